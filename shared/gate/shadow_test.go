package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// shadowPolicy is tighter than testPolicy: ls needs approval, git push is
// denied, and an autonomous run's approvals fall back to deny.
const shadowPolicy = `{
  "name": "gate-tests-shadow",
  "default_verdict": "require_approval",
  "autonomy": {"on_approval_rule": "deny"},
  "approval": {"scope": "once", "ttl_seconds": 600},
  "rules": [
    {"id": "read-all", "tool": "Read", "verdict": "allow"},
    {"id": "bash-status", "tool": "Bash", "match": {"command_prefix": ["git status"]}, "verdict": "allow"},
    {"id": "bash-ls", "tool": "Bash", "match": {"command_prefix": ["ls"]}, "verdict": "require_approval"},
    {"id": "no-push", "tool": "Bash", "match": {"command_prefix": ["git push"]}, "verdict": "deny"},
    {"id": "gh-read", "tool": "mcp__github__get_*", "verdict": "allow"},
    {"id": "gh-issue", "tool": "mcp__github__create_issue", "verdict": "require_approval"}
  ]
}`

func TestShadowIsComparedNeverEnforced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	shadow := mustPolicy(t, shadowPolicy)
	tests := []struct {
		name       string
		autonomous bool
		tool, in   string
		granted    []string
		wantOut    policy.Verdict
		want       *Shadow // nil: the policy stage did not run
	}{
		{name: "same verdict, same rule", tool: "Read", in: `{"file_path":"src/a.go"}`, wantOut: policy.VerdictAllow,
			want: &Shadow{Verdict: policy.VerdictAllow, RuleID: "read-all", Enforced: policy.VerdictAllow, EnforcedRuleID: "read-all"}},
		{name: "allow where the shadow asks", tool: "Bash", in: `{"command":"ls -la"}`, wantOut: policy.VerdictAllow,
			want: &Shadow{Verdict: policy.VerdictRequireApproval, RuleID: "bash-ls", Enforced: policy.VerdictAllow, EnforcedRuleID: "bash-safe", Differs: true}},
		{name: "approval where the shadow denies", tool: "Bash", in: `{"command":"git push origin main"}`, wantOut: policy.VerdictRequireApproval,
			want: &Shadow{Verdict: policy.VerdictDeny, RuleID: "no-push", Enforced: policy.VerdictRequireApproval, EnforcedRuleID: "bash-push", Differs: true}},
		{name: "a grant answers only the enforced approval", tool: "Bash", in: `{"command":"git push origin main"}`, granted: []string{"bash-push", "Bash:git push"}, wantOut: policy.VerdictAllow,
			want: &Shadow{Verdict: policy.VerdictDeny, RuleID: "no-push", Enforced: policy.VerdictRequireApproval, EnforcedRuleID: "bash-push", Differs: true}},
		{name: "deny where the shadow has no rule", tool: "Bash", in: `{"command":"rm -rf x"}`, wantOut: policy.VerdictDeny,
			want: &Shadow{Verdict: policy.VerdictRequireApproval, Enforced: policy.VerdictDeny, EnforcedRuleID: "bash-rm", Differs: true}},
		{name: "autonomous: both fall back to the same", autonomous: true, tool: "Write", in: `{"file_path":"a","content":"b"}`, wantOut: policy.VerdictDeny,
			want: &Shadow{Verdict: policy.VerdictRequireApproval, Rewritten: policy.VerdictDeny, Enforced: policy.VerdictDeny}},
		{name: "autonomous: fallbacks differ", autonomous: true, tool: toolIssue, in: issueInput, wantOut: policy.VerdictAllow,
			want: &Shadow{Verdict: policy.VerdictRequireApproval, Rewritten: policy.VerdictDeny, RuleID: "gh-issue", Enforced: policy.VerdictAllow, EnforcedRuleID: "gh-issue", Differs: true}},
		{name: "an unfrozen tool never reaches either policy", tool: "NoSuchTool", in: `{}`, wantOut: policy.VerdictDeny},
		{name: "a schema deny never reaches either policy", tool: "Read", in: `{"file_path":7}`, wantOut: policy.VerdictDeny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			without := f.run()
			without.Autonomous = tt.autonomous
			with := f.run()
			with.Autonomous, with.Shadow = tt.autonomous, shadow
			without.Grants, with.Grants = grants(tt.granted...), grants(tt.granted...)
			r := req(t, tt.tool, tt.in)
			base, got := Decide(without, r), Decide(with, r)
			if base.Shadow != nil {
				t.Fatalf("a run without a shadow got %+v", base.Shadow)
			}
			if got.Outcome != tt.wantOut || base.Outcome != tt.wantOut {
				t.Fatalf("outcome %s (without shadow %s), want %s", got.Outcome, base.Outcome, tt.wantOut)
			}
			sh := got.Shadow
			got.Shadow = nil
			if got != base {
				t.Errorf("the shadow changed the decision:\n%+v\nwithout it:\n%+v", got, base)
			}
			switch {
			case tt.want == nil && sh != nil:
				t.Errorf("shadow = %+v, want none (the policy stage did not run)", sh)
			case tt.want != nil && (sh == nil || *sh != *tt.want):
				t.Errorf("shadow = %+v, want %+v", sh, tt.want)
			}
		})
	}
}

func TestShadowBrokenIsRecordedNotEnforced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, in := range []string{`{"command":"ls"}`, `{"command":"rm x"}`, `{"command":"git push"}`} {
		r := f.run()
		base := Decide(r, req(t, "Bash", in))
		r.ShadowBroken = true
		got := Decide(r, req(t, "Bash", in))
		sh := got.Shadow
		got.Shadow = nil
		if got != base {
			t.Errorf("%s: a broken shadow changed the decision: %+v, want %+v", in, got, base)
		}
		if sh == nil || sh.Error != ShadowUnavailable || !sh.Differs || sh.Verdict != "" {
			t.Errorf("%s: shadow = %+v, want an unavailable error that differs", in, sh)
		}
	}
}

// TestShadowSeesTheSameEnvironment: the shadow is evaluated in the run's
// workspace, like the enforced policy.
func TestShadowSeesTheSameEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Relative globs resolve against the workspace for both policies: the
	// shadow denies src/** and must see the same resolved path.
	shadow := mustPolicy(t, `{"name":"s","default_verdict":"allow","rules":[{"id":"no-src","tool":"Read","match":{"path":["src/**"]},"verdict":"deny"}]}`)
	r := f.run()
	r.Workspace, r.Shadow = "/work/app", shadow
	d := Decide(r, req(t, "Read", `{"file_path":"/work/app/src/a.go"}`))
	if d.Outcome != policy.VerdictAllow || d.Shadow == nil || d.Shadow.Verdict != policy.VerdictDeny || d.Shadow.RuleID != "no-src" || !d.Shadow.Differs {
		t.Errorf("decision %+v, shadow %+v; want allow with a shadow deny by no-src", d, d.Shadow)
	}
}
