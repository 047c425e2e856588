package modelproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const benchAdmin = "bench-admin-token-0123456789abcdef"

// proxied is fluidbox's model proxy as `fluidbox dev` serves it (minidyn
// behind the validating layer, on loopback) in front of the same loopback
// upstream as the forwarder, and a run with money for every request.
type proxied struct {
	url, token string
	client     *http.Client
	// ask asks the gate about a tool call, as the runner's hook does.
	ask func(id, name string, input json.RawMessage)
	// reads counts the BatchGetItem calls made so far.
	reads *atomic.Int64
}

// countBatchGets counts BatchGetItem calls into n.
func countBatchGets(n *atomic.Int64) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if middleware.GetOperationName(ctx) == "BatchGetItem" {
					n.Add(1)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		})
	}
}

// newProxied starts the proxy and a run that was asked, and allowed, every
// tool call of body: the proxy checks each tool result against the gate.
func newProxied(tb testing.TB, upstreamURL string, body []byte) *proxied {
	tb.Helper()
	ctx := context.Background()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	reads := &atomic.Int64{}
	st := store.New(devstack.DynamoClient(db.URL, countBatchGets(reads)), "bench")
	if err := st.CreateTable(ctx); err != nil {
		tb.Fatal(err)
	}
	sealer, err := seal.NewLocal(filepath.Join(tb.TempDir(), "key"))
	if err != nil {
		tb.Fatal(err)
	}
	h := api.New(api.Config{AdminToken: benchAdmin, Ledger: ledger.New(st, time.Now), Sealer: sealer,
		Egress: egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), Logger: slog.New(slog.DiscardHandler)})
	front := httptest.NewServer(h)
	tb.Cleanup(front.Close)
	admin := func(method, path string, body any, out any) {
		tb.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, front.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+benchAdmin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := front.Client().Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			msg, _ := io.ReadAll(resp.Body)
			tb.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, msg)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				tb.Fatal(err)
			}
		}
	}
	admin("PUT", "/v1/model-upstream", map[string]any{"url": upstreamURL, "credential": map[string]any{"type": "header", "name": "x-api-key", "value": "bench-upstream-key"}}, nil)
	var pol struct{ ID string }
	admin("POST", "/v1/policies", map[string]any{"name": "bench", "default_verdict": "allow", "rules": []any{}}, &pol)
	// The captured conversation used Claude Code's WebSearch, which the
	// built-in bundle does not have.
	var bundle struct{ ID string }
	admin("POST", "/v1/capabilities", map[string]any{"name": "bench-web-search", "tools": []any{map[string]any{
		"name": "WebSearch", "description": "Claude Code's web search", "class": "egress", "input_schema": map[string]any{"type": "object"}}}}, &bundle)
	var run struct{ ID, Token string }
	admin("POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code", bundle.ID}, "budget": map[string]any{"limit_usd": 1e6}}, &run)
	p := &proxied{url: front.URL + "/v1/sessions/" + run.ID + "/model/v1/messages?beta=true", token: run.Token, client: front.Client(), reads: reads}
	p.ask = func(id, name string, input json.RawMessage) {
		tb.Helper()
		var out struct{ Decision vocab.Decision }
		b, _ := json.Marshal(map[string]any{"tool_call_id": id, "tool_name": name, "input": input})
		req, _ := http.NewRequest("POST", front.URL+"/v1/sessions/"+run.ID+"/permission", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+run.Token)
		resp, err := front.Client().Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Decision != vocab.Allow {
			tb.Fatalf("gate on %s = %q, %v", id, out.Decision, err)
		}
	}
	for _, u := range toolUses(tb, body) {
		p.ask(u.ID, u.Name, u.Input)
	}
	return p
}

// toolUse is a tool_use block of a request's history.
type toolUse struct {
	ID, Name string
	Input    json.RawMessage
}

func toolUses(tb testing.TB, body []byte) []toolUse {
	tb.Helper()
	var req struct {
		Messages []struct {
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		tb.Fatal(err)
	}
	var out []toolUse
	for _, m := range req.Messages {
		var blocks []struct {
			Type string
			toolUse
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a string content
		}
		for _, b := range blocks {
			if b.Type == "tool_use" {
				out = append(out, b.toolUse)
			}
		}
	}
	return out
}

func (p *proxied) send(tb testing.TB, body []byte) {
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", betas)
	req.Header.Set("X-Api-Key", p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(stream)) {
		tb.Fatalf("proxied: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
}

// BenchmarkProxiedShare does, in each iteration and in turn, the
// inspection, the request through fluidbox's model proxy (inspection,
// reservation, forwarding, the stream followed and settled) and the same
// request through the plain httputil.ReverseProxy, against the same
// loopback upstream, and reports the inspection's time as a share of the
// proxied request's latency (inspect-of-proxied-%) and of the plain
// forward's (inspect-of-forward-%).
func BenchmarkProxiedShare(b *testing.B) {
	body, h, f := request(b), header(), newForwarder(b)
	p := newProxied(b, f.upstream, body)
	f.forward(b, body)
	p.send(b, body)
	var inspecting, proxying, forwarding time.Duration
	for b.Loop() {
		t0 := time.Now()
		inspect(b, h, body)
		t1 := time.Now()
		p.send(b, body)
		t2 := time.Now()
		f.forward(b, body)
		inspecting += t1.Sub(t0)
		proxying += t2.Sub(t1)
		forwarding += time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(inspecting.Nanoseconds())/n, "inspect-ns/op")
	b.ReportMetric(float64(proxying.Nanoseconds())/n, "proxied-ns/op")
	b.ReportMetric(float64(forwarding.Nanoseconds())/n, "forward-ns/op")
	b.ReportMetric(100*float64(inspecting)/float64(proxying), "inspect-of-proxied-%")
	b.ReportMetric(100*float64(inspecting)/float64(forwarding), "inspect-of-forward-%")
}

// BenchmarkProxiedVerify is a conversation going on through fluidbox's
// model proxy: each iteration the model calls a tool, the runner asks the
// gate (outside the timer, as the hook does before the tool runs) and
// sends the whole history (the 100 KB request and every turn since) with
// the new result. It reports the proxied request's latency, and the
// batched reads of call records per request (reads/op: the new result
// costs one; the history's results, checked before, none), against the
// same request through the plain forward.
func BenchmarkProxiedVerify(b *testing.B) {
	body, f := request(b), newForwarder(b)
	p := newProxied(b, f.upstream, body)
	p.send(b, body)
	var msgs []json.RawMessage
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		b.Fatal(err)
	}
	var proxying, forwarding time.Duration
	reads0, i := p.reads.Load(), 0
	for b.Loop() {
		b.StopTimer()
		id := fmt.Sprintf("toolu_bench%06d", i)
		i++
		input := json.RawMessage(`{"command":"git status","description":"Status"}`)
		p.ask(id, "Bash", input)
		use, _ := json.Marshal(map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": input}}})
		res, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "clean", "is_error": false}}})
		msgs = append(msgs, use, res)
		top["messages"], _ = json.Marshal(msgs)
		next, _ := json.Marshal(top)
		b.StartTimer()
		t0 := time.Now()
		p.send(b, next)
		t1 := time.Now()
		f.forward(b, next)
		proxying += t1.Sub(t0)
		forwarding += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(proxying.Nanoseconds())/n, "proxied-ns/op")
	b.ReportMetric(float64(forwarding.Nanoseconds())/n, "forward-ns/op")
	b.ReportMetric(float64(p.reads.Load()-reads0)/n, "reads/op")
}
