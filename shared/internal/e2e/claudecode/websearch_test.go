//go:build e2e

package claudecode

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestWebSearchTwoDecisions: Claude Code's WebSearch is two decisions, in
// order. The tool call (WebSearch, class egress in the claude-code bundle)
// is decided by the hook first; only if it is allowed does the CLI send the
// sub-request offering the web_search server tool, which the model proxy
// judges as anthropic__web_search (TestWebSearchThroughTheGate: allowed it
// reaches the scripted upstream, denied it is refused there). Allowing the
// server tool never allows the tool call: a policy that allows only
// anthropic__web_search, or a read_only run whose policy allows
// everything, sends no search anywhere.
func TestWebSearchTwoDecisions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, policy string
		extra        map[string]any
		source, rule string
	}{
		{"server tool allowed, tool call denied", `{"name":"only-server","default_verdict":"deny","rules":[
 {"id":"no-search-tool","tool":"WebSearch","verdict":"deny"},
 {"id":"server-search","tool":"anthropic__web_search","verdict":"allow"}]}`, nil, "policy", "no-search-tool"},
		{"read_only run", `{"name":"allow-all","default_verdict":"allow","rules":[]}`, map[string]any{"trust_tier": "read_only"}, "trust_tier", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, call("toolu_search", "WebSearch", map[string]any{"query": "golang release"}), scriptedmodel.SayText("done"))
			s.Model.Route(offersWebSearch, scriptedmodel.SayText("a search result"))
			extra := map[string]any{"capabilities": []string{"claude-code", "anthropic-server-tools"}}
			for k, v := range c.extra {
				extra[k] = v
			}
			r := s.NewRun(t, c.policy, extra)
			res := s.claude(t, r, project(t, nil), "search the web", cliOpts{})
			v := s.Ledger(t, r)
			if d := v.Decisions["toolu_search"]; d.Decision != vocab.Deny || d.Source != c.source || d.RuleID != c.rule {
				t.Errorf("WebSearch decision %+v, want deny by %s %s", d, c.source, c.rule)
			}
			if _, ok := res.denied()["toolu_search"]; !ok {
				t.Errorf("permission_denials = %+v, want the WebSearch call", res.PermissionDenials)
			}
			for _, req := range s.Model.Requests() {
				if offersWebSearch(req) {
					t.Error("a web_search sub-request reached the upstream after the WebSearch call was denied")
				}
			}
			refused, offered := modelToolEvents(t, s, r)
			if len(refused) != 0 || offered["anthropic__web_search"] {
				t.Errorf("model.refused %v, server tools offered %v: want no sub-request at all", refused, offered)
			}
			s.CheckModelTraffic(t, r, v)
		})
	}
}
