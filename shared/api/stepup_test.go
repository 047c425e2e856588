package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
)

// TestOAuthStepUpThroughTheAPI: an upstream tool that needs a scope the
// authorization did not ask for (the MCP Go SDK's RequireBearerToken with
// Scopes) is denied with source binding and a reason to re-authorize; GET
// shows the scope in step_up_scopes while the connection stays active at
// its generation; the next authorization URL asks for it; the callback
// moves the generation by one; a new run's call succeeds; no token
// anywhere.
func TestOAuthStepUpThroughTheAPI(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback")
	up := oauthtest.NewServer(t, p, oauthtest.StepUpTool("write_note", "email"))
	pol := s.policy(`{"name":"stepup","default_verdict":"deny","rules":[
 {"id":"w","tool":"mcp__linear__write_note","verdict":"allow"}]}`)
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared",
		"credential":   oauthCred(p),
		"tool_classes": map[string]string{"whoami": "read", "write_note": "write"},
	})["id"].(string)
	if code, _ := s.browse(s.authorizeAs(p, con, adminToken, p.User1()).String()); code != 200 {
		t.Fatalf("callback = %d", code)
	}
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)

	runA, tokA := s.brokeredRun(pol, con, "")
	r := s.toolsCall(runA, tokA, "n1", "mcp__linear__write_note", map[string]any{})
	reason, _ := r.body["reason"].(string)
	if r.status != 200 || r.body["decision"] != "deny" || r.body["source"] != "binding" || !strings.Contains(reason, "fluidbox connections authorize "+con) {
		t.Fatalf("write_note without its scope = %d %s, want a binding denial saying to re-authorize", r.status, r.raw)
	}
	got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil)
	if got["status"] != "active" || got["authorization_generation"] != float64(2) || !slices.Equal(strs(got["step_up_scopes"]), []string{"email"}) {
		t.Fatalf("after the challenge: %v", got)
	}

	au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", adminToken, nil)["authorization_url"].(string)
	u := s.startAs(au)
	if asked := strings.Fields(u.Query().Get("scope")); !slices.Contains(asked, "email") || !slices.Contains(asked, "openid") {
		t.Fatalf("the re-authorization asks for %q", asked)
	}
	back, err := p.LoginIn(t.Context(), s.jar, u.String(), p.User1())
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := s.browse(back.String()); code != 200 {
		t.Fatalf("re-authorization callback = %d", code)
	}
	got = s.want(200, "GET", "/v1/connections/"+con, adminToken, nil)
	if got["status"] != "active" || got["authorization_generation"] != float64(3) || got["step_up_scopes"] != nil {
		t.Fatalf("after the re-authorization: %v", got)
	}
	runB, tokB := s.brokeredRun(pol, con, "")
	if r := s.toolsCall(runB, tokB, "n1", "mcp__linear__write_note", map[string]any{}); r.body["decision"] != "allow" || !strings.Contains(resultText(t, r), "id1") {
		t.Fatalf("write_note after the re-authorization = %s", r.raw)
	}
	s.assertNoSecrets(p.Issued())
}

func strs(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
