package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/budget"
)

// TestModelProxyRefusalKeepsNoModelText: the model a refused request names
// is the sandbox's own text. A name the price table does not know (a
// canary, or 300 KB of it) is refused as unpriced, the refusal is in the
// ledger, and neither the ledger nor the store nor the log holds the text;
// a name the table knows is recorded as it is.
func TestModelProxyRefusalKeepsNoModelText(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":1,"output_tokens":1}`, `{"type":"text","text":"never"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})

	body := func(model string) string {
		return strings.Replace(msgBody(""), `"claude-haiku-4-5"`, `"`+model+`"`, 1)
	}
	for i, model := range []string{"claude-" + promptCanary, "claude-" + strings.Repeat(promptCanary, 300<<10/len(promptCanary))} {
		st, resp := p.post(id, tok, body(model))
		if st != 400 || !strings.Contains(resp, "price table") {
			t.Fatalf("model %d: %d %.200s, want 400 unpriced", i, st, resp)
		}
		refs := p.refusals(id)
		if len(refs) != i+1 {
			t.Fatalf("model %d: %d model.refused events, want %d (every refusal is in the ledger)", i, len(refs), i+1)
		}
		b, _ := json.Marshal(refs[i])
		if refs[i]["reason"] != "unpriced" || strings.Contains(string(b), promptCanary) {
			t.Errorf("model %d: model.refused = %.300s, want reason unpriced and none of the request's text", i, b)
		}
	}
	// A priced model refused for another reason keeps its name.
	if st, _ := p.post(id, tok, body("claude-haiku-4-5"), "anthropic-beta", "context-1m-2025-08-07"); st != 400 {
		t.Fatalf("beta refusal = %d", st)
	}
	if st, _ := p.post(id, tok, strings.Replace(body("claude-haiku-4-5"), `"max_tokens":256`, `"max_tokens":256,"speed":"fast"`, 1)); st != 400 {
		t.Fatalf("speed refusal = %d", st)
	}
	poor, poorTok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 0.001})
	if st, _ := p.post(poor, poorTok, body("claude-haiku-4-5")); st != 402 {
		t.Fatalf("budget refusal = %d", st)
	}
	if refs := p.refusals(poor); len(refs) != 1 || refs[0]["model"] != "claude-haiku-4-5" {
		t.Errorf("budget refusal = %v, want the priced model named", refs)
	}
	if n := len(up.received()); n != 0 {
		t.Errorf("the upstream received %d refused requests", n)
	}
	p.checkNothingKept(tok)
}

// TestModelProxyServerToolNamesFromUpstream: the server_tool_use blocks of
// a response are the upstream's text. Only the server tools fluidbox knows
// are recorded, by their bundle names; a block naming anything else (here
// the reply canary, and thousands of distinct names) leaves no trace of its
// name in the ledger, the store or the log, and the request still settles
// at the upstream's usage.
func TestModelProxyServerToolNamesFromUpstream(t *testing.T) {
	t.Parallel()
	blocks := func() string {
		var sb strings.Builder
		for i := range 2 {
			fmt.Fprintf(&sb, `{"type":"server_tool_use","id":"srvtoolu_%d","name":"web_search","input":{}},`, i)
		}
		for i := range 3000 {
			fmt.Fprintf(&sb, `{"type":"server_tool_use","id":"srvtoolu_x%d","name":"%s-%d","input":{}},`, i, replyCanary, i)
		}
		return sb.String() + `{"type":"text","text":"ok"}`
	}()
	const usage = `{"input_tokens":3000,"output_tokens":100,"server_tool_use":{"web_search_requests":2}}`
	up := newRecorder(t, func(w http.ResponseWriter, body []byte) {
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			answerJSON("claude-haiku-4-5", usage, blocks)(w, body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":3000,\"output_tokens\":1}}}\n\n")
		var list []json.RawMessage
		_ = json.Unmarshal([]byte("["+blocks+"]"), &list)
		for i, b := range list {
			fmt.Fprintf(w, "data: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":%s}\n\n", i, b)
		}
		io.WriteString(w, "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"+usage+"}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 50, bundle: "anthropic-server-tools"})
	want := float64(haikuCost(budget.Usage{InputTokens: 3000, OutputTokens: 100}) + 2*10_000)
	for i, stream := range []string{"", `,"stream":true`} {
		st, resp := p.post(id, tok, msgBody(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]`+stream))
		if st != 200 {
			t.Fatalf("request %d = %d %.200s", i, st, resp)
		}
		p.waitSettled(id, i+1)
		evs := p.budgetEvents(id)
		rec := evs[len(evs)-1]
		uses, _ := rec["server_tool_uses"].(map[string]any)
		if rec["settlement"] != "usage" || rec["cost_micros"] != want || len(uses) != 1 || uses["anthropic__web_search"] != 2.0 {
			b, _ := json.Marshal(rec)
			t.Errorf("request %d: budget.reconciled = %.300s, want usage at %v with only anthropic__web_search: 2", i, b, want)
		}
	}
	p.checkNothingKept(tok)
}
