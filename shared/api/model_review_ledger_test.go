package api_test

import (
	"encoding/json"
	"strings"
	"testing"
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
