package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/client"
)

// shadowDoc is tighter than basicPolicy: git diff needs approval, and what
// no rule names is denied.
const shadowDoc = `{"name":"tight","default_verdict":"deny","rules":[
 {"id":"status","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"allow"},
 {"id":"diff-asks","tool":"Bash","match":{"command_prefix":["git diff"]},"verdict":"require_approval"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`

func shadowRun(pol, shadow string, extra map[string]any) map[string]any {
	b := map[string]any{"policy_id": pol, "shadow_policy_id": shadow, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// summary reads every page of a policy's shadow summary, limit runs at a
// time, and adds them up as the CLI does.
func (s *stack) summary(pol string, limit int) (client.ShadowSummary, int) {
	s.t.Helper()
	var sum client.ShadowSummary
	cursor, pages := "", 0
	for {
		path := "/v1/policies/" + pol + "/shadow?limit=" + itoa(limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := s.do("GET", path, adminToken, nil)
		if r.status != 200 {
			s.t.Fatalf("GET %s = %d %s", path, r.status, r.raw)
		}
		var page client.ShadowSummary
		if err := json.Unmarshal(r.raw, &page); err != nil {
			s.t.Fatal(err)
		}
		pages++
		sum.PolicyID = page.PolicyID
		sum.Merge(page)
		if cursor = page.NextCursor; cursor == "" {
			return sum, pages
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// shadowOverHTTP is TestShadowPolicyOverHTTP's stack, its two policies
// and its first run.
type shadowOverHTTP struct {
	s           *stack
	pol, shadow string
	id, tok     string
}

// TestShadowPolicyOverHTTP: a run frozen with a shadow policy answers as
// its enforced policy does; tool.decision carries the shadow's verdict and
// rule only where they differ; the shadow stays frozen when its policy is
// updated; the summary adds the differences up across runs.
func TestShadowPolicyOverHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	c := &shadowOverHTTP{s: s, pol: s.policy(basicPolicy), shadow: s.policy(shadowDoc)}

	t.Run("refused like an unknown policy_id", c.refused)
	c.firstRun(t)
	c.askFirstRun(t)
	t.Run("events", c.checkEvents)
	c.laterRuns(t)
	for _, limit := range []int{100, 1} {
		t.Run(fmt.Sprintf("summary limit %d", limit), func(t *testing.T) { c.checkSummary(t, limit) })
	}
	t.Run("enforced policy and refusals", c.checkEnforcedAndRefusals)
}

func (c *shadowOverHTTP) refused(t *testing.T) {
	s, pol, shadow := c.s, c.pol, c.shadow
	for body, want := range map[string]string{
		`{"policy_id":"` + pol + `","shadow_policy_id":"pol_nope","capabilities":["claude-code"],"budget":{"limit_usd":1}}`:                                 `shadow_policy_id: no policy "pol_nope"`,
		`{"policy_id":"` + pol + `","shadow_policy_id":"` + shadow + `","shadow_policy_version":9,"capabilities":["claude-code"],"budget":{"limit_usd":1}}`: "shadow_policy_version: policy",
		`{"policy_id":"` + pol + `","shadow_policy_id":"pol_` + strings.Repeat("a", 3000) + `","capabilities":["claude-code"],"budget":{"limit_usd":1}}`:    `shadow_policy_id: "pol_aaaa`,
		`{"policy_id":"POL_X","capabilities":["claude-code"],"budget":{"limit_usd":1}}`:                                                                     `policy_id: "POL_X" is not a policy id`,
		`{"policy_id":"` + pol + `","shadow_policy_version":1,"capabilities":["claude-code"],"budget":{"limit_usd":1}}`:                                     "shadow_policy_version: is set without shadow_policy_id",
	} {
		r := s.do("POST", "/v1/sessions", adminToken, body)
		if msg := str(r.body["error"].(map[string]any)["message"]); r.status != 400 || !strings.HasPrefix(msg, want) {
			t.Errorf("%s = %d %s, want 400 with %q", body, r.status, r.raw, want)
		}
	}
}

// firstRun creates the first run with the shadow at version 1, then
// updates the shadow to version 2.
func (c *shadowOverHTTP) firstRun(t *testing.T) {
	s, pol, shadow := c.s, c.pol, c.shadow
	// A shadow that is the enforced document itself can never differ.
	if w := s.must(201, "POST", "/v1/sessions", adminToken, shadowRun(pol, pol, nil))["warnings"]; !strings.Contains(fmt.Sprint(w), "can never differ") {
		t.Errorf("shadow = enforced: warnings %v, want one saying it can never differ", w)
	}
	created := s.must(201, "POST", "/v1/sessions", adminToken, shadowRun(pol, shadow, nil))
	c.id, c.tok = created["id"].(string), created["token"].(string)
	got := s.must(200, "GET", "/v1/sessions/"+c.id, adminToken, nil)
	if got["shadow_policy_id"] != shadow || got["shadow_policy_version"] != float64(1) || !strings.HasPrefix(str(got["shadow_policy_digest"]), "sha256:") {
		t.Fatalf("GET session = %v; want its frozen shadow", got)
	}
	// Version 2 of the shadow agrees with everything: runs created before
	// it keep version 1.
	s.must(200, "PUT", "/v1/policies/"+shadow, adminToken, `{"name":"loose","default_verdict":"allow","rules":[]}`)
}

// askFirstRun asks four calls of the first run: each is answered as the
// enforced policy says, without a word of the shadow.
func (c *shadowOverHTTP) askFirstRun(t *testing.T) {
	s := c.s
	answers := map[string]string{}
	for _, tc := range []struct{ call, command string }{
		{"same", "git status"},      // allow / allow
		{"differs", "git diff"},     // allow / require_approval
		{"same-deny", "git push x"}, // deny / deny (by its own rule each)
		{"approval", "make"},        // require_approval / deny (its default)
	} {
		r := s.ask(c.id, c.tok, tc.call, "Bash", bash(tc.command))
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tc.call, r.status, r.raw)
		}
		answers[tc.call] = str(r.body["decision"])
		if strings.Contains(string(r.raw), "shadow") {
			t.Errorf("%s: the runner's answer mentions the shadow: %s", tc.call, r.raw)
		}
		if tc.call == "approval" {
			s.must(200, "POST", "/v1/approvals/"+str(r.body["approval_id"])+"/decision", adminToken, map[string]any{"decision": "approved_once"})
		}
	}
	if answers["same"] != "allow" || answers["differs"] != "allow" || answers["same-deny"] != "deny" || answers["approval"] != "pending" {
		t.Fatalf("answers = %v; want the enforced policy's", answers)
	}
}

// checkEvents: the first run's events name the shadow, and carry its
// verdict and rule only where it differs.
func (c *shadowOverHTTP) checkEvents(t *testing.T) {
	decisions := map[string]map[string]any{}
	var requested map[string]any
	for _, e := range c.s.must(200, "GET", "/v1/sessions/"+c.id+"/events", adminToken, nil)["events"].([]any) {
		ev := e.(map[string]any)
		data := ev["data"].(map[string]any)
		switch ev["type"] {
		case "tool.decision":
			decisions[str(data["tool_call_id"])] = data
		case "approval.requested":
			requested = data
		case "session.created":
			if data["shadow_policy_id"] != c.shadow || data["shadow_policy_version"] != float64(1) {
				t.Errorf("session.created = %v; want the shadow policy named", data)
			}
		}
	}
	for _, call := range []string{"same", "same-deny"} {
		for k := range decisions[call] {
			if strings.HasPrefix(k, "shadow_") {
				t.Errorf("%s agrees, yet its tool.decision has %s: %v", call, k, decisions[call])
			}
		}
	}
	if d := decisions["differs"]; d["decision"] != "allow" || d["shadow_verdict"] != "require_approval" || d["shadow_rule_id"] != "diff-asks" {
		t.Errorf("differs: tool.decision = %v; want the shadow's require_approval by diff-asks", d)
	}
	if d := decisions["approval"]; d["decision"] != "allow" || d["verdict"] != "require_approval" || d["shadow_verdict"] != "deny" || d["shadow_rule_id"] != nil {
		t.Errorf("approval: settled tool.decision = %v; want the shadow's default deny", d)
	}
	if requested["shadow_verdict"] != "deny" {
		t.Errorf("approval.requested = %v; want the shadow's deny", requested)
	}
}

// laterRuns: a second run, created after the update, freezes version 2,
// which agrees with basicPolicy on everything it allows; a third, with
// version 1 pinned, differs like the first.
func (c *shadowOverHTTP) laterRuns(t *testing.T) {
	s, pol, shadow := c.s, c.pol, c.shadow
	second, tok2 := s.session(shadowRun(pol, shadow, nil))
	if v := s.must(200, "GET", "/v1/sessions/"+second, adminToken, nil)["shadow_policy_version"]; v != float64(2) {
		t.Fatalf("second run's shadow version = %v, want 2", v)
	}
	s.ask(second, tok2, "differs", "Bash", bash("git diff"))
	third, tok3 := s.session(shadowRun(pol, shadow, map[string]any{"shadow_policy_version": 1}))
	s.ask(third, tok3, "differs", "Bash", bash("git diff --stat"))
	s.ask(third, tok3, "again", "Bash", bash("git diff HEAD"))
}

// checkSummary: the shadow's summary, read limit runs a page, adds up the
// three runs' differences in two groups, most calls first.
func (c *shadowOverHTTP) checkSummary(t *testing.T, limit int) {
	sum, pages := c.s.summary(c.shadow, limit)
	if limit == 1 && pages < 3 {
		t.Errorf("limit 1: %d pages for 3 runs", pages)
	}
	if sum.PolicyID != c.shadow || sum.Runs != 3 || sum.RunsDiffering != 2 || sum.Differences != 4 {
		t.Errorf("limit %d: summary %+v; want 3 runs, 2 differing, 4 differences", limit, sum)
	}
	if len(sum.ByDifference) != 2 {
		t.Fatalf("limit %d: groups %+v", limit, sum.ByDifference)
	}
	g := sum.ByDifference[0] // most calls first
	if g.ToolName != "Bash" || g.Verdict != "allow" || g.RuleID != "git-read" || g.ShadowVerdict != "require_approval" || g.ShadowRuleID != "diff-asks" || g.Count != 3 || g.Runs != 2 || len(g.Samples) != 2 {
		t.Errorf("limit %d: first group %+v", limit, g)
	}
	if a := sum.ByDifference[1]; a.Verdict != "require_approval" || a.ShadowVerdict != "deny" || a.Count != 1 || a.Samples[0].SessionID != c.id || a.Samples[0].ToolCallID != "approval" {
		t.Errorf("limit %d: second group %+v", limit, a)
	}
	c.checkSamples(t, sum)
}

// checkSamples: each group's samples point at the events that differ.
func (c *shadowOverHTTP) checkSamples(t *testing.T, sum client.ShadowSummary) {
	for _, g := range sum.ByDifference {
		for _, smp := range g.Samples {
			ev := c.s.must(200, "GET", "/v1/sessions/"+smp.SessionID+"/events?after="+itoa(int(smp.Seq-1))+"&limit=1", adminToken, nil)["events"].([]any)
			data := ev[0].(map[string]any)["data"].(map[string]any)
			if data["tool_call_id"] != smp.ToolCallID || data["shadow_verdict"] != g.ShadowVerdict {
				t.Errorf("sample %+v points at %v", smp, data)
			}
		}
	}
}

// checkEnforcedAndRefusals: the enforced policy was the shadow of one run,
// its own: it never differed. An unknown policy is 404; a session token
// may not read it; a bad cursor is 400.
func (c *shadowOverHTTP) checkEnforcedAndRefusals(t *testing.T) {
	s, shadow := c.s, c.shadow
	if r := s.must(200, "GET", "/v1/policies/"+c.pol+"/shadow", adminToken, nil); r["runs"] != float64(1) || r["runs_differing"] != float64(0) || r["differences"] != float64(0) || len(r["by_difference"].([]any)) != 0 || r["next_cursor"] != nil {
		t.Errorf("enforced policy's summary = %v, want its one run and no difference", r)
	}
	for path, want := range map[string]int{
		"/v1/policies/pol_nope/shadow":                               404,
		"/v1/policies/" + shadow + "/shadow?cursor=x":                400,
		"/v1/policies/" + shadow + "/shadow?limit=1000":              400,
		"/v1/policies/" + shadow + "/shadow?created_after=yesterday": 400,
	} {
		if r := s.do("GET", path, adminToken, nil); r.status != want {
			t.Errorf("GET %s = %d %s, want %d", path, r.status, r.raw, want)
		}
	}
	if r := s.do("GET", "/v1/policies/"+shadow+"/shadow", c.tok, nil); r.status != 403 {
		t.Errorf("session token: %d, want 403", r.status)
	}
}
