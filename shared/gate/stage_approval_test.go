package gate

import (
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/policy"
)

func TestStageApproval(t *testing.T) {
	t.Parallel()
	autonomous := func(r *Run) { r.Autonomous = true }
	granting := func(ruleAndKey ...string) func(*Run) {
		return func(r *Run) { r.Grants = grants(ruleAndKey...) }
	}
	and := func(muts ...func(*Run)) func(*Run) {
		return func(r *Run) {
			for _, m := range muts {
				m(r)
			}
		}
	}
	testStage(t, "approval", []stageCase{
		{name: "pause for a human", tool: toolIssue, input: issueInput, wantDone: true, wantOut: policy.VerdictRequireApproval, wantReason: `"gh-issue"`},
		{name: "default verdict pauses", tool: "Write", input: `{"file_path":"a","content":"b"}`, wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "grant covers the tool", run: granting("gh-issue", toolIssue), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictAllow, wantReason: "session grant"},
		{name: "grant for another tool", run: granting("gh-issue", toolGetIssue), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "grant of the tool under another rule", run: granting("", toolIssue), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "Bash grant covers the prefix", run: granting("bash-push", "Bash:git push"), tool: "Bash", input: `{"command":"git push origin main"}`,
			wantDone: true, wantOut: policy.VerdictAllow},
		{name: "Bash grant stored by scope key alone", run: granting("", "Bash:git push"), tool: "Bash", input: `{"command":"git push origin main"}`,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "Bash grant does not cover a list", run: granting("bash-push", "Bash:git push"), tool: "Bash", input: `{"command":"git push && git clean -fdx"}`,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "Bash grant does not cover an assignment", run: granting("bash-push", "Bash:git push"), tool: "Bash", input: `{"command":"GIT_SSH_COMMAND=x git push"}`,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "Bash grant does not cover a git option", run: granting("bash-push", "Bash:git push"), tool: "Bash", input: `{"command":"git -c core.sshCommand=x push"}`,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "autonomous, rule fallback allow", run: autonomous, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictAllow, wantReason: "rewritten to allow"},
		{name: "autonomous, policy fallback deny", run: autonomous, tool: "Write", input: `{"file_path":"a","content":"b"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourcePolicy, wantReason: "rewritten to deny"},
		{name: "autonomous, grant first", run: and(autonomous, granting("bash-push", "Bash:git push")), tool: "Bash", input: `{"command":"git push"}`,
			wantDone: true, wantOut: policy.VerdictAllow, wantReason: "session grant"},
		{name: "below the default pending limit", run: pending(19, 0), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "at the default pending limit", run: pending(20, 0), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceApprovalLimit, wantReason: "already has 20 approvals waiting for a human, the most a run may have (20)"},
		{name: "at a configured pending limit", run: pending(3, 3), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceApprovalLimit, wantReason: "the most a run may have (3)"},
		{name: "below a configured pending limit", run: pending(25, 30), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictRequireApproval},
		{name: "the trigger source at its limit", run: func(r *Run) { r.SourceFull = true }, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceApprovalLimit, wantReason: "already have 20 approvals waiting for a human, the most they may have together"},
		{name: "a grant needs no approval at the source's limit", run: and(func(r *Run) { r.SourceFull = true }, granting("gh-issue", toolIssue)), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictAllow},
		{name: "a grant needs no approval at the limit", run: and(pending(20, 0), granting("gh-issue", toolIssue)), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictAllow},
	})
}

// pending sets how many approvals the run has waiting, and its limit.
func pending(n int64, limit int) func(*Run) {
	return func(r *Run) { r.PendingApprovals, r.MaxPendingApprovals = n, limit }
}

func TestStageApprovalFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name  string
		auto  bool
		grant []string
		tool  string
		input string
		want  Decision
	}{
		{name: "rule scope and policy ttl", tool: toolIssue, input: issueInput, want: Decision{
			Outcome: policy.VerdictRequireApproval, Verdict: policy.VerdictRequireApproval, RuleID: "gh-issue",
			ScopeKey: toolIssue, Scope: policy.ScopeSession, TTL: 600 * time.Second, Stage: "approval", Grantable: true}},
		{name: "Bash prefix key, rule ttl", tool: "Bash", input: `{"command":"git -C repo push --force"}`, want: Decision{
			Outcome: policy.VerdictRequireApproval, Verdict: policy.VerdictRequireApproval, RuleID: "bash-push",
			ScopeKey: "Bash:git push", Scope: policy.ScopeSession, TTL: 300 * time.Second, Stage: "approval"}},
		{name: "default verdict of a file tool has no key", tool: "Write", input: `{"file_path":"a","content":"b"}`, want: Decision{
			Outcome: policy.VerdictRequireApproval, Verdict: policy.VerdictRequireApproval,
			Scope: policy.ScopeOnce, TTL: 600 * time.Second, Stage: "approval"}},
		{name: "grant", grant: []string{"bash-push", "Bash:git push"}, tool: "Bash", input: `{"command":"git push origin main"}`, want: Decision{
			Outcome: policy.VerdictAllow, Verdict: policy.VerdictRequireApproval, RuleID: "bash-push", Grant: "Bash:git push", GrantRule: "bash-push", Stage: "approval"}},
		{name: "grantable, not held", grant: []string{"bash-push", "Bash:git pull"}, tool: "Bash", input: `{"command":"git push origin main"}`, want: Decision{
			Outcome: policy.VerdictRequireApproval, Verdict: policy.VerdictRequireApproval, RuleID: "bash-push", Grantable: true,
			ScopeKey: "Bash:git push", Scope: policy.ScopeSession, TTL: 300 * time.Second, Stage: "approval"}},
		{name: "autonomous allow", auto: true, tool: toolIssue, input: issueInput, want: Decision{
			Outcome: policy.VerdictAllow, Verdict: policy.VerdictRequireApproval, Rewritten: policy.VerdictAllow, RuleID: "gh-issue", Stage: "approval", Grantable: true}},
		{name: "autonomous deny", auto: true, tool: "Bash", input: `{"command":"git push"}`, want: Decision{
			Outcome: policy.VerdictDeny, Source: SourcePolicy, Verdict: policy.VerdictRequireApproval, Rewritten: policy.VerdictDeny, RuleID: "bash-push", Stage: "approval", Grantable: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := f.run()
			run.Autonomous = tt.auto
			r := req(t, tt.tool, tt.input)
			run.Grants = grants(tt.grant...)
			got := Decide(run, r)
			if got.Reason == "" {
				t.Errorf("Decide(%q) has no reason", tt.tool)
			}
			got.Reason = ""
			if got != tt.want {
				t.Errorf("Decide(%q, %s) =\n %+v\nwant\n %+v", tt.tool, tt.input, got, tt.want)
			}
		})
	}
}

// TestStageApprovalFailsClosed feeds the approval stage results that a
// well-formed policy never produces.
func TestStageApprovalFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ra := policy.Result{Verdict: policy.VerdictRequireApproval, RuleID: "r", Reason: "rule \"r\" requires approval",
		Scope: policy.ScopeSession, TTL: time.Minute, ScopeKey: "Write", OnAutonomous: policy.VerdictAllow}
	tests := []struct {
		name    string
		auto    bool
		mut     func(*policy.Result)
		noEval  bool
		want    policy.Verdict
		wantRew policy.Verdict
	}{
		{name: "well formed", want: policy.VerdictRequireApproval},
		{name: "not evaluated", noEval: true, want: policy.VerdictDeny},
		{name: "verdict allow reaching approval", mut: func(r *policy.Result) { r.Verdict = policy.VerdictAllow }, want: policy.VerdictDeny},
		{name: "unknown scope", mut: func(r *policy.Result) { r.Scope = "forever" }, want: policy.VerdictDeny},
		{name: "empty scope with a key", mut: func(r *policy.Result) { r.Scope = "" }, want: policy.VerdictDeny},
		{name: "no ttl", mut: func(r *policy.Result) { r.TTL = 0 }, want: policy.VerdictDeny},
		{name: "negative ttl", mut: func(r *policy.Result) { r.TTL = -time.Second }, want: policy.VerdictDeny},
		{name: "autonomous, empty fallback", auto: true, mut: func(r *policy.Result) { r.OnAutonomous = "" }, want: policy.VerdictDeny, wantRew: policy.VerdictDeny},
		{name: "autonomous, fallback require_approval", auto: true, mut: func(r *policy.Result) { r.OnAutonomous = policy.VerdictRequireApproval }, want: policy.VerdictDeny, wantRew: policy.VerdictDeny},
		{name: "autonomous, unknown fallback", auto: true, mut: func(r *policy.Result) { r.OnAutonomous = "ALLOW" }, want: policy.VerdictDeny, wantRew: policy.VerdictDeny},
		{name: "autonomous, fallback allow", auto: true, want: policy.VerdictAllow, wantRew: policy.VerdictAllow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := ra
			if tt.mut != nil {
				tt.mut(&res)
			}
			c := &call{run: &Run{Autonomous: tt.auto, Policy: f.policy}, req: Request{ToolName: "Write"}, result: res, evaluated: !tt.noEval}
			d, done := checkApproval(c)
			if !done || d.Outcome != tt.want || d.Rewritten != tt.wantRew {
				t.Fatalf("checkApproval(%s) = %+v, %v, want %s (rewritten %q)", tt.name, d, done, tt.want, tt.wantRew)
			}
			if d.Outcome == policy.VerdictDeny && d.Source != SourcePolicy {
				t.Errorf("checkApproval(%s) source = %q, want policy", tt.name, d.Source)
			}
		})
	}
	// A key-less approval can only be once, whatever the rule said.
	res := ra
	res.ScopeKey = ""
	d, _ := checkApproval(&call{run: &Run{Policy: f.policy}, req: Request{ToolName: "Write"}, result: res, evaluated: true})
	if d.Outcome != policy.VerdictRequireApproval || d.Scope != policy.ScopeOnce {
		t.Errorf("checkApproval(no scope key) = %+v, want require_approval with scope once", d)
	}
	// A run without a policy never reaches here through Decide; called
	// directly, the stage denies rather than read a nil policy.
	d, _ = checkApproval(&call{run: &Run{}, req: Request{ToolName: "Write"}, result: ra, evaluated: true})
	if d.Outcome != policy.VerdictDeny {
		t.Errorf("checkApproval(no policy) = %+v, want deny", d)
	}
}
