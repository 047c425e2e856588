package api_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

const operatorKey = "sk-ant-operator-key-0123456789"

// Canaries: text that must pass through the proxy and be kept nowhere.
const (
	promptCanary = "CANARY-PROMPT-5b1e0c7d"
	systemCanary = "CANARY-SYSTEM-93af2e11"
	replyCanary  = "CANARY-REPLY-d04c7a55"
)

// lockedBuffer collects log lines from concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proxyStack is the API with a local sealer and a captured log, its model
// upstream set (through the API) to url with the operator's key.
type proxyStack struct {
	*stack
	logs *lockedBuffer
}

func newProxyStack(t *testing.T, upstreamURL string, opts ...func(*api.Config)) *proxyStack {
	t.Helper()
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal", "key"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg := api.Config{AdminToken: adminToken, Ledger: led, Sealer: sealer, Egress: testenv.Loopback,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, o := range opts {
		o(&cfg)
	}
	h := api.New(cfg)
	srv := httptest.NewServer(roles.Serve(h))
	t.Cleanup(srv.Close)
	p := &proxyStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, logs: logs}
	out := p.must(200, "PUT", "/v1/model-upstream", adminToken, map[string]any{
		"url": upstreamURL, "credential": map[string]any{"type": "header", "name": "x-api-key", "value": operatorKey}})
	if out["url"] != upstreamURL || out["generation"] != 1.0 || strings.Contains(fmt.Sprint(out), operatorKey) {
		t.Fatalf("PUT /v1/model-upstream = %v", out)
	}
	return p
}

func (p *proxyStack) sdk(id, tok string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(p.url+"/v1/sessions/"+id+"/model"), option.WithAPIKey(tok), option.WithMaxRetries(0))
}

func userMessage(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: anthropic.ModelClaudeHaiku4_5, MaxTokens: 256,
		System:   []anthropic.TextBlockParam{{Text: systemCanary}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// waitSettled waits for the run's reservations to be closed: the proxy
// settles after the response ends, so a client may finish first.
func (p *proxyStack) waitSettled(id string, want int) []store.Reservation {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := p.st.RunReservations(context.Background(), id)
		if err != nil {
			p.t.Fatal(err)
		}
		closed := 0
		for _, r := range res {
			if r.Status != store.ReservationOpen {
				closed++
			}
		}
		if len(res) == want && closed == want {
			return res
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("reservations of %s = %+v, want %d, all closed", id, res, want)
		}
		_ = p.led.Wait(context.Background(), id, 50*time.Millisecond)
	}
}

// budgetEvents returns the run's budget events as (type, data) pairs.
func (p *proxyStack) budgetEvents(id string) []map[string]any {
	p.t.Helper()
	var out []map[string]any
	for _, e := range p.ledger(id) {
		if strings.HasPrefix(e.Type, "budget.") {
			m := reconciled(p.t, e)
			m["type"] = e.Type
			out = append(out, m)
		}
	}
	return out
}

// checkUpstreamSaw asserts every request reached the upstream with the
// operator's key and nowhere carried the session token.
func checkUpstreamSaw(t *testing.T, reqs []scriptedmodel.Request, tok string) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for i, r := range reqs {
		if r.Credential() != operatorKey || r.APIKey != operatorKey || r.Authorization != "" {
			t.Errorf("upstream request %d: x-api-key %q authorization %q, want the operator's key only", i, r.APIKey, r.Authorization)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, tok) || strings.Contains(v, "fbx_sess_") {
					t.Errorf("upstream request %d: header %s carries the session token", i, k)
				}
			}
		}
		if bytes.Contains(r.Body, []byte(tok)) {
			t.Errorf("upstream request %d: body carries the session token", i)
		}
	}
}

// checkNothingKept scans every stored item and the log for the canaries
// and the secrets.
func (p *proxyStack) checkNothingKept(tok string) {
	p.t.Helper()
	for _, it := range p.items() {
		for k, v := range it {
			for _, c := range []string{promptCanary, systemCanary, replyCanary, operatorKey, tok} {
				if strings.Contains(v, c) {
					p.t.Errorf("stored item %s/%s attribute %s holds %q", it["pk"], it["sk"], k, c[:12])
				}
			}
		}
	}
	logs := p.logs.String()
	for _, c := range []string{promptCanary, systemCanary, replyCanary, operatorKey, tok} {
		if strings.Contains(logs, c) {
			p.t.Errorf("the log holds %q", c[:12])
		}
	}
}

// haikuCost prices usage at claude-haiku-4-5's rates, by hand: $1 input,
// $5 output, $0.10 cache read, $1.25 cache write per million tokens.
func haikuCost(u budget.Usage) int64 {
	micros := u.InputTokens*1_000_000 + u.OutputTokens*5_000_000 + u.CacheReadInputTokens*100_000 + u.CacheCreationInputTokens*1_250_000
	return (micros + 999_999) / 1_000_000
}

// haikuReserve is the proxy's bound for a request without server tools nor
// 1-hour cache writes: the output at $5, the body's bytes plus the API's own
// prompt (8192 tokens) at the 5-minute cache-write rate, $1.25.
func haikuReserve(maxTokens int64, bodyBytes int) int64 {
	micros := maxTokens*5_000_000 + (int64(bodyBytes)+8192)*1_250_000
	return (micros + 999_999) / 1_000_000
}

// imposedTier is what the proxy adds to a request naming no service tier.
const imposedTier = `,"service_tier":"standard_only"`

func checkReservedThenReconciled(t *testing.T, evs []map[string]any, req scriptedmodel.Request, cost int64, settlement string) {
	t.Helper()
	if len(evs) != 2 || evs[0]["type"] != "budget.reserved" || evs[1]["type"] != "budget.reconciled" {
		t.Fatalf("budget events = %v, want budget.reserved then budget.reconciled", evs)
	}
	// The reservation is on the bytes the client sent; the forwarded body
	// also carries the service tier the proxy imposes.
	sent := len(req.Body) - len(imposedTier)
	if !bytes.Contains(req.Body, []byte(imposedTier)) {
		sent = len(req.Body)
	}
	if want := float64(haikuReserve(req.MaxTokens, sent)); evs[0]["reserved_micros"] != want || evs[0]["model"] != haiku {
		t.Errorf("budget.reserved = %v, want %v micros for %s", evs[0], want, haiku)
	}
	if evs[1]["cost_micros"] != float64(cost) || evs[1]["settlement"] != settlement || evs[1]["request_id"] != evs[0]["request_id"] {
		t.Errorf("budget.reconciled = %v, want cost %d settlement %s for %v", evs[1], cost, settlement, evs[0]["request_id"])
	}
}

// TestModelProxySDK points the official Anthropic Go SDK at the proxy, for a
// non-streaming and a streaming call against the scripted model upstream.
func TestModelProxySDK(t *testing.T) {
	t.Parallel()
	usage := budget.Usage{InputTokens: 1200, OutputTokens: 345, CacheReadInputTokens: 2000, CacheCreationInputTokens: 400}
	up := scriptedmodel.New(
		scriptedmodel.Respond(scriptedmodel.Reply{Text: "plain " + replyCanary, Usage: usage}),
		scriptedmodel.Respond(scriptedmodel.Reply{Text: "streamed, in several deltas: " + replyCanary, Usage: usage}),
	)
	defer up.Close()
	up.RequireAPIKey(operatorKey)
	p := newProxyStack(t, up.URL())
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	client := p.sdk(id, tok)

	t.Run("non-streaming", func(t *testing.T) {
		msg, err := client.Messages.New(context.Background(), userMessage("hello "+promptCanary))
		if err != nil {
			t.Fatalf("Messages.New = %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "plain "+replyCanary || msg.Usage.OutputTokens != 345 {
			t.Errorf("message = %+v", msg)
		}
		p.waitSettled(id, 1)
		checkReservedThenReconciled(t, p.budgetEvents(id), up.Requests()[0], haikuCost(usage), "usage")
	})
	t.Run("streaming", func(t *testing.T) {
		stream := client.Messages.NewStreaming(context.Background(), userMessage("stream "+promptCanary))
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream = %v", err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Text != "streamed, in several deltas: "+replyCanary || acc.Usage.OutputTokens != 345 {
			t.Errorf("accumulated = %+v", acc)
		}
		p.waitSettled(id, 2)
		checkReservedThenReconciled(t, p.budgetEvents(id)[2:], up.Requests()[1], haikuCost(usage), "usage")
		if !up.Requests()[1].Stream {
			t.Error("the upstream did not see stream: true")
		}
	})
	checkUpstreamSaw(t, up.Requests(), tok)
	h := p.head(id)
	checkBudgetInvariant(t, h)
	if h.BudgetReserved != 0 || h.BudgetSpent != 2*haikuCost(usage) {
		t.Errorf("head: reserved %d spent %d, want 0 and %d", h.BudgetReserved, h.BudgetSpent, 2*haikuCost(usage))
	}
	p.checkNothingKept(tok)
}

// TestModelProxyHTTP covers what Claude Code sends that the SDK test does
// not: the HEAD probe of the base URL, x-api-key, ?beta=true and the
// anthropic-beta header; and the proxy's refusals, in Anthropic's shape.
func TestModelProxyHTTP(t *testing.T) {
	t.Parallel()
	up := scriptedmodel.New(scriptedmodel.SayText("ok"))
	defer up.Close()
	up.RequireAPIKey(operatorKey)
	p := newProxyStack(t, up.URL())
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	_, otherTok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	base := p.url + "/v1/sessions/" + id + "/model"

	for _, u := range []string{base, base + "/"} {
		for _, m := range []string{"HEAD", "GET"} {
			req, _ := http.NewRequest(m, u, nil)
			req.Header.Set("x-api-key", tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s %s = %d, want 200", m, u, resp.StatusCode)
			}
		}
	}

	post := func(key, body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/v1/messages?beta=true", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi ` + promptCanary + `"}]}`
	if st, body := post(tok, good, "anthropic-beta", "interleaved-thinking-2025-05-14", "Cookie", "c=1"); st != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("x-api-key call = %d %s", st, body)
	}
	r := up.Requests()[0]
	if r.RawQuery != "beta=true" || r.AnthropicBeta != "interleaved-thinking-2025-05-14" || r.AnthropicVersion != "2023-06-01" || r.Header.Get("Cookie") != "" {
		t.Errorf("upstream saw query %q beta %q version %q cookie %q", r.RawQuery, r.AnthropicBeta, r.AnthropicVersion, r.Header.Get("Cookie"))
	}
	p.waitSettled(id, 1)

	for _, c := range []struct {
		name, key, body string
		status          int
		errType         string
	}{
		{"no key", "", good, 401, "authentication_error"},
		{"another run's token", otherTok, good, 401, "authentication_error"},
		{"the admin token", adminToken, good, 401, "authentication_error"},
		{"not JSON", tok, `{"model":`, 400, "invalid_request_error"},
		{"no max_tokens", tok, `{"model":"claude-haiku-4-5","messages":[]}`, 400, "invalid_request_error"},
		{"unknown model", tok, `{"model":"claude-imaginary-9","max_tokens":5,"messages":[{"role":"user","content":"` + promptCanary + `"}]}`, 400, "invalid_request_error"},
		{"too large", tok, `{"model":"claude-haiku-4-5","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 33<<20) + `"}]}`, 413, "request_too_large"},
		{"an unknown beta", tok, good, 400, "invalid_request_error"},
		{"an unknown field", tok, `{"model":"claude-haiku-4-5","max_tokens":5,"mcp_servers":[],"messages":[]}`, 400, "invalid_request_error"},
	} {
		var hdr []string
		if c.name == "an unknown beta" {
			hdr = []string{"anthropic-beta", "context-1m-2025-08-07"}
		}
		st, body := post(c.key, c.body, hdr...)
		if st != c.status || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"type":"`+c.errType+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, body, c.status, c.errType)
		}
		if strings.Contains(body, promptCanary) || strings.Contains(body, tok) {
			t.Errorf("%s: the error body echoes the request", c.name)
		}
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("refused requests reached the upstream: %d requests", n)
	}
	if evs := p.budgetEvents(id); len(evs) != 2 {
		t.Errorf("refused requests left budget events: %v", evs)
	}
	p.checkNothingKept(tok)
}

// TestModelProxyBudgetExhaustedSDK: the SDK sees a typed 402 billing_error.
func TestModelProxyBudgetExhaustedSDK(t *testing.T) {
	t.Parallel()
	up := scriptedmodel.New(scriptedmodel.SayText("never"))
	defer up.Close()
	p := newProxyStack(t, up.URL())
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 0.001})
	client := p.sdk(id, tok)
	_, err := client.Messages.New(context.Background(), userMessage("too expensive"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 402 || !strings.Contains(apiErr.RawJSON(), "billing_error") {
		t.Fatalf("over budget = %v, want a 402 billing_error", err)
	}
	if len(up.Requests()) != 0 || len(p.budgetEvents(id)) != 0 {
		t.Error("a refused request reached the upstream or the ledger")
	}
}

// TestModelProxySettlesFailures: an upstream error is released, a stream
// the upstream cuts and a stream the client abandons are reconciled on what
// was seen with the output at its bound, a 200 without usage is settled in full. No reservation is left
// open on any of these paths.
func TestModelProxySettlesFailures(t *testing.T) {
	t.Parallel()
	startUsage := `{"input_tokens":700,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}`
	messageStart := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" + startUsage + "}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + replyCanary + "\"}}\n\n"
	released := make(chan struct{})
	var once sync.Once
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mode := string(b) // the test names the upstream's behaviour in the prompt
		switch {
		case strings.Contains(mode, "fail-500"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
		case strings.Contains(mode, "no-usa"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"type":"message","content":[]}`)
		case strings.Contains(mode, "cut"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, messageStart)
			w.(http.Flusher).Flush()
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = buf.Flush()
				conn.Close() // mid-stream, without a terminating chunk
			}
		case strings.Contains(mode, "hang"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, messageStart)
			w.(http.Flusher).Flush()
			<-r.Context().Done() // until the proxy gives up on us
			once.Do(func() { close(released) })
		}
	}))
	defer upstream.Close()
	p := newProxyStack(t, upstream.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	bodyOf := func(mode string) string {
		return `{"model":"claude-haiku-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"` + promptCanary + ` ` + mode + `"}]}`
	}
	send := func(ctx context.Context, mode string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", p.url+"/v1/sessions/"+id+"/model/v1/messages", strings.NewReader(bodyOf(mode)))
		req.Header.Set("x-api-key", tok)
		return http.DefaultClient.Do(req)
	}
	// The streams carry text after message_start and are cut before the
	// final message_delta: the output is billed at max_tokens, its bound,
	// never at message_start's count the client read past.
	seen := haikuCost(budget.Usage{InputTokens: 700, OutputTokens: 100})
	reserve := haikuReserve(100, len(bodyOf("no-usa")))

	for i, c := range []struct {
		beta       string
		status     int
		settlement string
		cost       int64
	}{
		{"fail-500", 500, "released", 0},
		{"no-usa", 200, "pessimistic", reserve},
		{"cut", 200, "partial", seen},
	} {
		resp, err := send(context.Background(), c.beta)
		if err != nil {
			t.Fatalf("%s: %v", c.beta, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.beta, resp.StatusCode, c.status)
		}
		p.waitSettled(id, i+1)
		evs := p.budgetEvents(id)
		last := evs[len(evs)-1]
		if last["type"] != "budget.reconciled" || last["settlement"] != c.settlement || last["cost_micros"] != float64(c.cost) {
			t.Errorf("%s: settled as %v, want %s at %d", c.beta, last, c.settlement, c.cost)
		}
	}

	// The client leaves mid-stream: the proxy stops the upstream and
	// reconciles what it saw.
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := send(ctx, "hang")
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if !strings.HasPrefix(line, "event: message_start") {
		t.Errorf("first line = %q", line)
	}
	cancel()
	resp.Body.Close()
	<-released
	p.waitSettled(id, 4)
	evs := p.budgetEvents(id)
	if last := evs[len(evs)-1]; last["settlement"] != "partial" || last["cost_micros"] != float64(seen) {
		t.Errorf("client gone: settled as %v, want partial at %d", last, seen)
	}

	// An upstream nobody listens on: nothing was sent, nothing is billed.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	p.must(200, "PUT", "/v1/model-upstream", adminToken, map[string]any{"url": dead, "credential": map[string]any{"type": "header", "name": "x-api-key", "value": operatorKey}})
	resp, err = send(context.Background(), "any")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Errorf("dead upstream: status %d, want 502", resp.StatusCode)
	}
	p.waitSettled(id, 5)
	evs = p.budgetEvents(id)
	if last := evs[len(evs)-1]; last["settlement"] != "released" || last["cost_micros"] != 0.0 {
		t.Errorf("dead upstream: settled as %v, want released at 0", last)
	}
	h := p.head(id)
	checkBudgetInvariant(t, h)
	if h.BudgetReserved != 0 || h.BudgetSpent != reserve+2*seen {
		t.Errorf("head: reserved %d spent %d, want 0 and %d", h.BudgetReserved, h.BudgetSpent, reserve+2*seen)
	}
	p.checkNothingKept(tok)
}

// TestModelUpstreamSetting: the credential is sealed and never shown; each
// replacement bumps the generation; a bad URL is refused.
func TestModelUpstreamSetting(t *testing.T) {
	t.Parallel()
	p := newProxyStack(t, "https://api.anthropic.com")
	out := p.must(200, "GET", "/v1/model-upstream", adminToken, nil)
	if out["generation"] != 1.0 || out["credential_type"] != "header" || strings.Contains(fmt.Sprint(out), operatorKey) {
		t.Errorf("GET = %v", out)
	}
	out = p.must(200, "PUT", "/v1/model-upstream", adminToken, map[string]any{"url": "https://api.anthropic.com/", "credential": map[string]any{"type": "bearer", "token": operatorKey}})
	if out["generation"] != 2.0 || out["url"] != "https://api.anthropic.com" {
		t.Errorf("second PUT = %v", out)
	}
	for _, u := range []string{"http://api.anthropic.com", "ftp://x", "https://u:p@x.example", "not a url"} {
		if r := p.do("PUT", "/v1/model-upstream", adminToken, map[string]any{"url": u, "credential": map[string]any{"type": "bearer", "token": "k"}}); r.status != 400 {
			t.Errorf("PUT url %q = %d, want 400", u, r.status)
		}
	}
	_, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	if r := p.do("PUT", "/v1/model-upstream", tok, map[string]any{"url": "https://x.example", "credential": map[string]any{"type": "bearer", "token": "k"}}); r.status != 401 && r.status != 403 {
		t.Errorf("PUT with a session token = %d, want 401 or 403", r.status)
	}
	p.checkNothingKept(tok)
}
