package gate

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// Policies the fuzzer picks from. The permissive ones matter most: the
// invariants must hold even when the policy allows everything.
var fuzzPolicies = []string{
	testPolicy,
	`{"name":"allow-all","default_verdict":"allow","rules":[{"id":"all","tool":"*","verdict":"allow"}]}`,
	`{"name":"ask-all","default_verdict":"require_approval","autonomy":{"on_approval_rule":"allow"},
	  "approval":{"scope":"session"},"rules":[{"id":"ask","tool":"*","verdict":"require_approval","on_autonomous":"allow"}]}`,
	`{"name":"deny-all","default_verdict":"deny","rules":[]}`,
}

// Fuzz flags.
const (
	fzEnded = 1 << iota
	fzBroke
	fzReadOnly
	fzAutonomous
	fzGrantAll
	fzDrift
	fzRevoked
	fzAddTool // freeze a tool under the fuzzed name, with the fuzzed class
	fzBrokered
	fzBadTier
)

func FuzzDecide(f *testing.F) {
	f.Add("Read", `{"file_path":"src/a.go"}`, uint16(0), uint8(1), "read")
	f.Add("Read", `{"file_path":"secrets/a"}`, uint16(fzReadOnly), uint8(0), "read")
	f.Add("Bash", `{"command":"git push origin main"}`, uint16(fzGrantAll|fzAutonomous), uint8(2), "execute")
	f.Add("Bash", `{"command":"git status"}`, uint16(fzReadOnly|fzGrantAll|fzAutonomous), uint8(1), "execute")
	f.Add(toolIssue, issueInput, uint16(fzReadOnly|fzGrantAll|fzAutonomous), uint8(2), "write")
	f.Add(toolIssue, issueInput, uint16(fzDrift|fzGrantAll), uint8(1), "write")
	f.Add(toolGetIssue, getIssueInput, uint16(fzRevoked), uint8(1), "read")
	f.Add("mcp__x__y", `{}`, uint16(fzAddTool|fzReadOnly), uint8(1), "READ")
	f.Add("mcp__x__y", `{}`, uint16(fzAddTool|fzReadOnly|fzBrokered), uint8(1), "read")
	f.Add("Write", `{"file_path":"a","content":"b"}`, uint16(fzBadTier|fzGrantAll), uint8(1), "write")
	f.Add("", `null`, uint16(fzEnded|fzBroke), uint8(3), "")
	f.Add("Bash", `{"command":"$(rm -rf /)"}`, uint16(fzGrantAll|fzAutonomous), uint8(2), "execute")

	tools := testTools(f)
	var pols []*policy.Policy
	for _, doc := range fuzzPolicies {
		pols = append(pols, mustPolicy(f, doc))
	}
	anything := mustSchema(f, `{}`)

	f.Fuzz(func(t *testing.T, name, input string, flags uint16, pol uint8, class string) {
		run := fuzzRun(tools, pols[int(pol)%len(pols)], anything, name, class, flags)
		r := fuzzRequest(name, input, flags)
		d := decideGrantingAll(run, r, flags)
		checkAnswer(t, name, input, d)
		checkFloors(t, name, run, r, d, flags)
	})
}

// fuzzRun is the run the flags describe.
func fuzzRun(tools map[string]*Tool, pol *policy.Policy, anything *schemaguard.Schema, name, class string, flags uint16) *Run {
	run := &Run{
		Ended:           flags&fzEnded != 0,
		AvailableMicros: 1000,
		TrustTier:       trust.Trusted,
		Autonomous:      flags&fzAutonomous != 0,
		Tools:           tools,
		Policy:          pol,
		Bindings: map[string]Binding{
			conGitHub: {ConnectionID: conGitHub, Generation: conGitHubGen, Owner: "usr_alice", ToolSetDigest: conGitHubTool},
		},
	}
	if flags&fzBroke != 0 {
		run.AvailableMicros = 0
	}
	if flags&fzReadOnly != 0 {
		run.TrustTier = trust.ReadOnly
	}
	if flags&fzBadTier != 0 {
		run.TrustTier = trust.Tier(class)
	}
	if flags&fzAddTool != 0 {
		run.Tools = maps.Clone(tools)
		tool := &Tool{Name: name, Class: capability.Class(class), Schema: anything, Callable: true}
		if flags&fzBrokered != 0 {
			tool.ConnectionID = conGitHub
		}
		run.Tools[name] = tool
	}
	return run
}

// fuzzRequest is the call of name with input (taken as a string when it is
// not JSON), with the GitHub connection as the flags say it stands.
func fuzzRequest(name, input string, flags uint16) Request {
	live := liveGitHub()
	if flags&fzDrift != 0 {
		live.ToolSetDigest = "sha256:drifted"
	}
	if flags&fzRevoked != 0 {
		live.Status = ConnectionRevoked
	}
	r := Request{ToolName: name, Connections: map[string]Live{conGitHub: live}}
	dec := json.NewDecoder(bytes.NewReader([]byte(input)))
	dec.UseNumber()
	if err := dec.Decode(&r.Input); err != nil {
		r.Input = input // not JSON: the gate must still answer
	}
	return r
}

// decideGrantingAll decides r. With fzGrantAll, it grants whatever the
// gate asks, as a human approving every call for the session would, and
// decides again: no grant may pass a floor.
func decideGrantingAll(run *Run, r Request, flags uint16) Decision {
	d := Decide(run, r)
	var held []policy.GrantKey
	for range 4 {
		if flags&fzGrantAll == 0 || d.Outcome != policy.VerdictRequireApproval || d.ScopeKey == "" {
			break
		}
		held = append(held, policy.GrantKey{RuleID: d.RuleID, ScopeKey: d.ScopeKey})
		run.Grants = policy.NewGrants(held...)
		d = Decide(run, r)
	}
	return d
}

// checkAnswer: no stage panicked, the outcome is one of three, a deny and
// only a deny has a source, and every answer has a reason.
func checkAnswer(t *testing.T, name, input string, d Decision) {
	t.Helper()
	if d.Reason == reasonPanic {
		t.Fatalf("Decide(%q, %q) panicked inside a stage: %+v", name, input, d)
	}
	switch d.Outcome {
	case policy.VerdictAllow, policy.VerdictRequireApproval:
		if d.Source != "" {
			t.Fatalf("Decide(%q) = %s with source %q", name, d.Outcome, d.Source)
		}
	case policy.VerdictDeny:
		if d.Source == "" {
			t.Fatalf("Decide(%q) = deny without a source", name)
		}
	default:
		t.Fatalf("Decide(%q) outcome = %q, want allow, deny or require_approval", name, d.Outcome)
	}
	if d.Reason == "" {
		t.Fatalf("Decide(%q) = %+v without a reason", name, d)
	}
}

// checkFloors: what no policy and no grant may allow is denied: a tool
// not frozen, anything but a read (or a read-only Bash line) of a frozen
// tool in a run not trusted, anything in an ended or exhausted run, a
// brokered tool on a drifted or revoked connection.
func checkFloors(t *testing.T, name string, run *Run, r Request, d Decision, flags uint16) {
	t.Helper()
	tool := run.Tools[name]
	if tool == nil && d.Outcome != policy.VerdictDeny {
		t.Fatalf("Decide(%q) = %s for a tool not in the frozen set", name, d.Outcome)
	}
	if run.TrustTier != trust.Trusted && d.Outcome == policy.VerdictAllow {
		readOnlyBash := false
		if tool != nil && tool.Name == "Bash" && tool.Class == capability.ClassExecute {
			readOnlyBash, _ = policy.BashReadOnly(r.Input)
		}
		if tool == nil || tool.Class != capability.ClassRead && !readOnlyBash || tool.ConnectionID != "" || run.TrustTier != trust.ReadOnly {
			t.Fatalf("Decide(%q) = allow in a %q run for %+v", name, run.TrustTier, tool)
		}
	}
	if (run.Ended || run.AvailableMicros <= 0) && d.Outcome != policy.VerdictDeny {
		t.Fatalf("Decide(%q) = %s for an ended or exhausted run", name, d.Outcome)
	}
	if (flags&(fzDrift|fzRevoked) != 0) && tool != nil && tool.ConnectionID != "" && d.Outcome != policy.VerdictDeny {
		t.Fatalf("Decide(%q) = %s on a drifted or revoked connection", name, d.Outcome)
	}
}
