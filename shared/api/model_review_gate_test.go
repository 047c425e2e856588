package api_test

import (
	"strings"
	"testing"
)

// TestModelProxyJudgesEveryAllowedDomain: a policy that pins a server
// tool's domains the documented way, "/allowed_domains/0", allows a web
// fetch of docs.example.com. A request that lists that domain first and
// another after it, or that shapes allowed_domains so the pointer resolves
// on something the API does not read as a list, is refused by the gate, and
// nothing is forwarded; the domain alone still passes.
func TestModelProxyJudgesEveryAllowedDomain(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":10,"output_tokens":10}`, `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(serverToolPolicy), runOpts{budget: 50, bundle: "anthropic-server-tools"})
	fetch := func(domains string) string {
		return msgBody(`,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":1,"allowed_domains":` + domains + `}]`)
	}
	for _, c := range []struct {
		name, domains string
		status        int
		reason        string
	}{
		{"a second domain", `["docs.example.com","evil.example.net"]`, 403, "gate"},
		{"the allowed domain twice around another", `["docs.example.com","evil.example.net","docs.example.com"]`, 403, "gate"},
		{"an object whose member 0 is the domain", `{"0":"docs.example.com","1":"evil.example.net"}`, 403, "gate"},
		{"a list holding a list", `["docs.example.com",["evil.example.net"]]`, 403, "gate"},
	} {
		before := len(p.refusals(id))
		st, body := p.post(id, tok, fetch(c.domains))
		if st != c.status || !strings.Contains(body, `"type":"error"`) {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
		}
		refs := p.refusals(id)
		if len(refs) != before+1 || refs[len(refs)-1]["reason"] != c.reason {
			t.Errorf("%s: model.refused = %v, want one more with reason %s", c.name, refs, c.reason)
		}
	}
	if n := len(up.received()); n != 0 {
		t.Fatalf("the upstream received %d requests the policy does not allow", n)
	}
	if st, body := p.post(id, tok, fetch(`["docs.example.com"]`)); st != 200 {
		t.Errorf("the allowed domain alone = %d %s, want 200", st, body)
	}
	p.waitSettled(id, 1)
}
