package gate

import (
	"slices"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// TestStageOrder pins the order of the gate. Changing it is a change of the
// security model: rewrite the stage comments first.
func TestStageOrder(t *testing.T) {
	t.Parallel()
	var got []string
	for _, s := range stages {
		got = append(got, s.name)
	}
	want := []string{"session", "budget", "tool_set", "schema", "trust_tier", "policy", "approval"}
	if !slices.Equal(got, want) {
		t.Fatalf("stages = %v, want %v", got, want)
	}
}

// grantEverything holds a grant for every rule of the fixture policy (and
// the default verdict) under every scope key the cases below could ask
// with: whatever a grant could answer, it would.
var grantEverything = func() policy.Grants {
	var keys []policy.GrantKey
	for _, rule := range []string{"", "read-all", "no-secrets", "bash-safe", "bash-push", "bash-rm", "gh-read", "gh-issue", "gh-issue-prod"} {
		for _, k := range []string{toolIssue, toolGetIssue, "mcp__github__delete_repo", "NoSuch", "Read", "Read:secrets/**", "Write", "Bash:git push"} {
			keys = append(keys, policy.GrantKey{RuleID: rule, ScopeKey: k})
		}
	}
	return policy.NewGrants(keys...)
}()

// TestFirstDenialWins combines failures of several stages and checks the
// earliest one answers; grants and autonomy are thrown at every case.
func TestFirstDenialWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	readOnly := func(r *Run) { r.TrustTier = trust.ReadOnly }
	drift := func(r *Request) {
		l := r.Connections[conGitHub]
		l.ToolSetDigest = "sha256:tools-v2"
		r.Connections[conGitHub] = l
	}
	revoke := func(r *Request) {
		l := r.Connections[conGitHub]
		l.Status = ConnectionRevoked
		r.Connections[conGitHub] = l
	}
	tests := []struct {
		name       string
		run        func(*Run)
		req        func(*Request)
		tool       string
		input      string
		grant      bool // hold every grant (grantEverything)
		auto       bool
		wantOut    policy.Verdict
		wantSource Source
		wantStage  string
	}{
		{name: "ended + exhausted + unknown tool", run: func(r *Run) { r.Ended = true; r.AvailableMicros = 0 },
			tool: "NoSuch", input: `{}`, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceSession, wantStage: "session"},
		{name: "exhausted + unknown tool + read_only + nil policy", run: func(r *Run) { r.AvailableMicros = 0; r.TrustTier = trust.ReadOnly; r.Policy = nil },
			tool: "NoSuch", input: `{}`, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceBudget, wantStage: "budget"},
		{name: "unknown tool + read_only + nil policy", run: func(r *Run) { r.TrustTier = trust.ReadOnly; r.Policy = nil },
			tool: "NoSuch", input: `{}`, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "drift + invalid input + read_only", run: readOnly, req: drift,
			tool: toolIssue, input: `{}`, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "revoked + drift", req: func(r *Request) { revoke(r); drift(r) },
			tool: toolIssue, input: issueInput, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantStage: "tool_set"},
		{name: "invalid input + read_only write", run: readOnly,
			tool: "Write", input: `{"file_path":"a"}`, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantStage: "schema"},
		{name: "un-callable + policy allow", tool: toolBroken, input: `{}`, grant: true,
			wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantStage: "schema"},
		// The tier is a floor a policy allow cannot lower: a Bash line
		// that is not read-only is refused before the policy is asked.
		{name: "read_only + policy allow", run: readOnly,
			tool: "Bash", input: `{"command":"git status > out"}`, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + brokered read + policy allow", run: readOnly,
			tool: toolGetIssue, input: getIssueInput, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + grant", run: readOnly,
			tool: "Write", input: `{"file_path":"a","content":"b"}`, grant: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + autonomy fallback allow", run: readOnly,
			tool: toolIssue, input: issueInput, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + grant + autonomy", run: readOnly,
			tool: toolIssue, input: issueInput, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "unknown tier + grant + autonomy", run: func(r *Run) { r.TrustTier = "" },
			tool: toolIssue, input: issueInput, grant: true, auto: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "unknown tool + grant", tool: "mcp__github__delete_repo", input: `{}`, grant: true, auto: true,
			wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "drift + grant", req: drift, tool: toolIssue, input: issueInput, grant: true,
			wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "stale generation + grant + autonomy", req: func(r *Request) {
			l := r.Connections[conGitHub]
			l.Generation++
			r.Connections[conGitHub] = l
		}, tool: toolIssue, input: issueInput, grant: true, auto: true,
			wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantStage: "tool_set"},
		{name: "policy deny + grant + autonomy", tool: "Read", input: `{"file_path":"secrets/k"}`, grant: true, auto: true,
			wantOut: policy.VerdictDeny, wantSource: SourcePolicy, wantStage: "policy"},
		{name: "everything passes, grant allows", tool: toolIssue, input: issueInput, grant: true,
			wantOut: policy.VerdictAllow, wantStage: "approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := f.run()
			run.Autonomous = tt.auto
			if tt.run != nil {
				tt.run(run)
			}
			r := req(t, tt.tool, tt.input)
			if tt.grant {
				run.Grants = grantEverything
			}
			if tt.req != nil {
				tt.req(&r)
			}
			d := Decide(run, r)
			if d.Outcome != tt.wantOut || d.Source != tt.wantSource || d.Stage != tt.wantStage {
				t.Fatalf("Decide(%s) = %s/%s at %s (%q), want %s/%s at %s",
					tt.name, d.Outcome, d.Source, d.Stage, d.Reason, tt.wantOut, tt.wantSource, tt.wantStage)
			}
		})
	}
}

// TestPanicFailsClosed: a stage that panics denies the call with its own
// source, names itself, and says so (Panicked); it neither crashes the
// gate nor allows, and the stages after it never run.
func TestPanicFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	later := false
	panicking := []stage{
		{"session", SourceSession, checkSession},
		{"schema", SourceSchema, func(*call) (Decision, bool) { panic("index out of range") }},
		{"policy", SourcePolicy, func(*call) (Decision, bool) { later = true; return Decision{Outcome: policy.VerdictAllow}, true }},
	}
	d := decideWith(panicking, f.run(), req(t, toolIssue, issueInput))
	want := Decision{Outcome: policy.VerdictDeny, Source: SourceSchema, Stage: "schema", Reason: reasonPanic, Panicked: true}
	if d != want || later {
		t.Fatalf("decideWith(panicking stage) = %+v (later stage ran: %v), want %+v", d, later, want)
	}
	if d := Decide(f.run(), req(t, toolIssue, issueInput)); d.Panicked {
		t.Fatalf("Decide(fixture) = %+v, panicked", d)
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	long := string(make([]byte, 1000))
	if got := quote(long); len(got) > 4*maxQuoted+8 {
		t.Errorf("quote(1000 bytes) is %d bytes long", len(got))
	}
	if got, want := quote("Bash"), `"Bash"`; got != want {
		t.Errorf("quote(%q) = %s, want %s", "Bash", got, want)
	}
	// Never cut inside a rune.
	s := ""
	for len(s) < 2*maxQuoted {
		s += "é"
	}
	if got := quote(s); got[len(got)-4:] != `"...` {
		t.Errorf("quote(runes) = %s, want it to end with an ellipsis", got)
	}
}

// TestRunRefuses: what RunRefuses answers for a run is what Decide answers
// for every call of it (an ended run, one with no budget left, both, no
// run at all), and it refuses nothing of a live run with money left: the
// stages it runs read the run alone.
func TestRunRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	calls := []Request{req(t, "Read", `{"file_path":"src/main.go"}`), req(t, "Bash", `{"command":"git push"}`), req(t, toolIssue, issueInput), req(t, "NoSuch", `{}`), {}}
	ended, broke, both := f.run(), f.run(), f.run()
	ended.Ended = true
	broke.AvailableMicros = 0
	both.Ended, both.AvailableMicros = true, -5
	for _, tt := range []struct {
		name  string
		run   *Run
		stage string
	}{{"ended", ended, "session"}, {"no budget", broke, "budget"}, {"ended with no budget", both, "session"}, {"no run", nil, "session"}, {"live", f.run(), ""}} {
		d, refused := RunRefuses(tt.run)
		if refused != (tt.stage != "") || refused && (d.Stage != tt.stage || d.Outcome != policy.VerdictDeny || d.Reason == "") {
			t.Errorf("%s: RunRefuses = %+v, %v; want a denial by %q", tt.name, d, refused, tt.stage)
			continue
		}
		for _, r := range calls {
			got := Decide(tt.run, r)
			if refused && (got.Stage != d.Stage || got.Source != d.Source || got.Reason != d.Reason) {
				t.Errorf("%s: Decide(%s) = %+v, want RunRefuses' %+v", tt.name, r.ToolName, got, d)
			}
			if !refused && (got.Stage == "session" || got.Stage == "budget") {
				t.Errorf("%s: Decide(%s) denied at %s, which RunRefuses let through", tt.name, r.ToolName, got.Stage)
			}
		}
	}
}
