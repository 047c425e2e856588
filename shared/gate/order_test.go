package gate

import (
	"slices"
	"testing"

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

// grantAll grants every scope key and counts how often it was asked.
type grantAll struct{ asked int }

func (g *grantAll) granted(string) bool { g.asked++; return true }

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
		grant      bool // grant every scope key
		auto       bool
		wantOut    Outcome
		wantSource Source
		wantStage  string
	}{
		{name: "ended + exhausted + unknown tool", run: func(r *Run) { r.Ended = true; r.AvailableMicros = 0 },
			tool: "NoSuch", input: `{}`, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceSession, wantStage: "session"},
		{name: "exhausted + unknown tool + read_only + nil policy", run: func(r *Run) { r.AvailableMicros = 0; r.TrustTier = trust.ReadOnly; r.Policy = nil },
			tool: "NoSuch", input: `{}`, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceBudget, wantStage: "budget"},
		{name: "unknown tool + read_only + nil policy", run: func(r *Run) { r.TrustTier = trust.ReadOnly; r.Policy = nil },
			tool: "NoSuch", input: `{}`, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "drift + invalid input + read_only", run: readOnly, req: drift,
			tool: toolIssue, input: `{}`, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "revoked + drift", req: func(r *Request) { revoke(r); drift(r) },
			tool: toolIssue, input: issueInput, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceBinding, wantStage: "tool_set"},
		{name: "invalid input + read_only write", run: readOnly,
			tool: "Write", input: `{"file_path":"a"}`, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceSchema, wantStage: "schema"},
		{name: "un-callable + policy allow", tool: toolBroken, input: `{}`, grant: true,
			wantOut: OutcomeDeny, wantSource: SourceSchema, wantStage: "schema"},
		// The tier is a floor a policy allow cannot lower: a Bash line
		// that is not read-only is refused before the policy is asked.
		{name: "read_only + policy allow", run: readOnly,
			tool: "Bash", input: `{"command":"git status > out"}`, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + brokered read + policy allow", run: readOnly,
			tool: toolGetIssue, input: getIssueInput, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + grant", run: readOnly,
			tool: "Write", input: `{"file_path":"a","content":"b"}`, grant: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + autonomy fallback allow", run: readOnly,
			tool: toolIssue, input: issueInput, auto: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "read_only + grant + autonomy", run: readOnly,
			tool: toolIssue, input: issueInput, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "unknown tier + grant + autonomy", run: func(r *Run) { r.TrustTier = "" },
			tool: toolIssue, input: issueInput, grant: true, auto: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantStage: "trust_tier"},
		{name: "unknown tool + grant", tool: "mcp__github__delete_repo", input: `{}`, grant: true, auto: true,
			wantOut: OutcomeDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "drift + grant", req: drift, tool: toolIssue, input: issueInput, grant: true,
			wantOut: OutcomeDeny, wantSource: SourceCapability, wantStage: "tool_set"},
		{name: "stale generation + grant + autonomy", req: func(r *Request) {
			l := r.Connections[conGitHub]
			l.Generation++
			r.Connections[conGitHub] = l
		}, tool: toolIssue, input: issueInput, grant: true, auto: true,
			wantOut: OutcomeDeny, wantSource: SourceBinding, wantStage: "tool_set"},
		{name: "policy deny + grant + autonomy", tool: "Read", input: `{"file_path":"secrets/k"}`, grant: true, auto: true,
			wantOut: OutcomeDeny, wantSource: SourcePolicy, wantStage: "policy"},
		{name: "everything passes, grant allows", tool: toolIssue, input: issueInput, grant: true,
			wantOut: OutcomeAllow, wantStage: "approval"},
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
			g := &grantAll{}
			if tt.grant {
				r.Granted = g.granted
			}
			if tt.req != nil {
				tt.req(&r)
			}
			d := Decide(run, r)
			if d.Outcome != tt.wantOut || d.Source != tt.wantSource || d.Stage != tt.wantStage {
				t.Fatalf("Decide(%s) = %s/%s at %s (%q), want %s/%s at %s",
					tt.name, d.Outcome, d.Source, d.Stage, d.Reason, tt.wantOut, tt.wantSource, tt.wantStage)
			}
			// Stages 0-5 never consult grants.
			if tt.wantStage != "approval" && g.asked != 0 {
				t.Errorf("Decide(%s) asked Granted %d times before the approval stage", tt.name, g.asked)
			}
		})
	}
}

// TestPanicFailsClosed: a panicking Granted callback (the caller's store
// failing) denies, it does not crash the gate or allow.
func TestPanicFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := req(t, toolIssue, issueInput)
	r.Granted = func(string) bool { panic("store down") }
	d := Decide(f.run(), r)
	if d.Outcome != OutcomeDeny || d.Source != SourcePolicy || d.Stage != "approval" || d.Reason != reasonPanic {
		t.Fatalf("Decide(panicking Granted) = %+v, want deny/policy at approval", d)
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
