package call_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	st  *store.Store
	led *ledger.Ledger
	run string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	st := testenv.Store(t)
	created, err := redact.New(redact.SessionCreated{SessionID: "ses_1", TrustTier: "trusted", Trigger: "api", Invoker: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.CreateRun(context.Background(), store.NewRun{
		Head:    store.Head{RunID: "ses_1", Status: vocab.Running, Invoker: "admin", TrustTier: "trusted", CreatedAt: store.FormatTime(t0)},
		Created: created,
	})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{st: st, led: ledger.New(st, func() time.Time { return t0 }), run: "ses_1"}
}

func (f fixture) asked(t *testing.T, id string, input map[string]any) call.Asked {
	t.Helper()
	d, err := redact.DigestJSON(input)
	if err != nil {
		t.Fatal(err)
	}
	return call.Asked{RunID: f.run, ToolCallID: id, ToolName: "Bash", Input: input, Digest: d}
}

// record appends what call.Record builds for d and returns what it recorded.
func (f fixture) record(t *testing.T, c call.Asked, d gate.Decision, pin call.Pin) (call.Recorded, error) {
	t.Helper()
	var rec call.Recorded
	_, err := f.led.Append(context.Background(), f.run, func(h store.Head) (store.Batch, error) {
		var err error
		rec, err = call.Record(f.st, h, c, d, pin, t0)
		return rec.Batch, err
	})
	return rec, err
}

func (f fixture) events(t *testing.T) []string {
	t.Helper()
	evs, _, err := f.led.Read(context.Background(), f.run, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

var (
	allow   = gate.Decision{Outcome: policy.VerdictAllow, Verdict: policy.VerdictAllow, RuleID: "r1", Reason: "allowed by r1"}
	pending = gate.Decision{Outcome: policy.VerdictRequireApproval, Verdict: policy.VerdictRequireApproval, RuleID: "r2",
		ScopeKey: "Bash:git push", Scope: policy.ScopeSession, TTL: time.Minute}
)

func TestRecordOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.asked(t, "toolu_1", map[string]any{"command": "ls"})
	rec, err := f.record(t, c, allow, call.Pin{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Answer.Decision != vocab.Allow || rec.Answer.RuleID != "r1" {
		t.Errorf("answer = %+v", rec.Answer)
	}
	got, err := f.st.GetCall(context.Background(), f.run, "toolu_1")
	if err != nil || got.Decision != vocab.Allow || got.InputDigest != c.Digest.String() || call.AnswerOf(got) != rec.Answer {
		t.Errorf("record = %+v, %v; answer %+v", got, err, rec.Answer)
	}
	if _, err := f.record(t, c, allow, call.Pin{}); !errors.Is(err, call.ErrRecorded) {
		t.Errorf("second record = %v, want ErrRecorded", err)
	}
	if got := f.events(t); strings.Join(got, " ") != "session.created tool.requested tool.decision" {
		t.Errorf("events = %v", got)
	}
}

func TestPendingThenSettled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	c := f.asked(t, "toolu_2", map[string]any{"command": "git push"})
	rec, err := f.record(t, c, pending, call.Pin{ApprovalID: "apr_1", ToolDigest: "sha256:t", PolicyDigest: "sha256:p"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Answer.Decision != vocab.Pending || rec.Answer.ApprovalID != "apr_1" {
		t.Fatalf("answer = %+v", rec.Answer)
	}
	listed, err := f.st.PendingApprovals(ctx, 10)
	if err != nil || len(listed) != 1 || listed[0].ID != "apr_1" || listed[0].ExpiresAt != store.FormatTime(t0.Add(time.Minute)) {
		t.Fatalf("pending = %+v, %v", listed, err)
	}
	h, _ := f.st.GetHead(ctx, f.run)
	if h.Status != vocab.AwaitingApproval || h.PendingApprovals != 1 {
		t.Errorf("head = %s/%d", h.Status, h.PendingApprovals)
	}

	// An expiry before the time does not hold.
	build, _, err := call.Settle(f.st, rec.Approval, vocab.ApprovalExpired, call.System(call.ExpiryRole), "", t0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Append(ctx, f.run, build); !errors.Is(err, call.ErrSettled) {
		t.Fatalf("early expiry = %v, want ErrSettled", err)
	}
	build, after, err := call.Settle(f.st, rec.Approval, vocab.ApprovedSession, "carol", "", t0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Append(ctx, f.run, build); err != nil {
		t.Fatal(err)
	}
	a, err := f.st.GetApprovalByID(ctx, "apr_1")
	if err != nil || a != after || a.Status != vocab.ApprovedSession || a.DecidedBy != "carol" {
		t.Errorf("approval = %+v, %v; want %+v", a, err, after)
	}
	got, _ := f.st.GetCall(ctx, f.run, "toolu_2")
	if got.Decision != vocab.Allow || got.Reason != "approved by carol" || got.ApprovalID != "apr_1" {
		t.Errorf("call = %+v", got)
	}
	// DynamoDB drops the row from the sparse index when the settlement
	// removes its index keys; minidyn v0.8.2 applies no REMOVE clause, so
	// what can be checked here is that nothing listed is still pending.
	listed, _ = f.st.PendingApprovals(ctx, 10)
	for _, l := range listed {
		if l.Status == vocab.ApprovalPending {
			t.Errorf("still pending in the index: %+v", l)
		}
	}
	h, _ = f.st.GetHead(ctx, f.run)
	if h.Status != vocab.Running || h.PendingApprovals != 0 {
		t.Errorf("head = %s/%d", h.Status, h.PendingApprovals)
	}
	grants, err := f.st.Grants(ctx, f.run)
	if err != nil || len(grants) != 1 || grants[0].ScopeKey != "Bash:git push" || grants[0].RuleID != "r2" || grants[0].GrantedBy != "carol" {
		t.Errorf("grants = %+v, %v", grants, err)
	}

	// Settled once: neither a second decision nor an expiry holds.
	for _, to := range []vocab.ApprovalStatus{vocab.ApprovalDenied, vocab.ApprovalExpired} {
		pend := rec.Approval // as a racer read it, still pending
		build, _, err := call.Settle(f.st, pend, to, "dave", "", t0.Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.led.Append(ctx, f.run, build); !errors.Is(err, call.ErrSettled) {
			t.Errorf("second settlement %s = %v, want ErrSettled", to, err)
		}
	}
	// From a settled state the machine has no move.
	if _, _, err := call.Settle(f.st, a, vocab.ApprovalDenied, "dave", "", t0); !errors.Is(err, call.ErrIllegal) {
		t.Errorf("settle a settled approval = %v, want ErrIllegal", err)
	}

	want := "session.created tool.requested approval.requested approval.decided tool.decision"
	if got := strings.Join(f.events(t), " "); got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
}

func TestDecisionAfterExpiryIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	rec, err := f.record(t, f.asked(t, "toolu_3", map[string]any{"command": "git push"}), pending, call.Pin{ApprovalID: "apr_3"})
	if err != nil {
		t.Fatal(err)
	}
	build, _, err := call.Settle(f.st, rec.Approval, vocab.ApprovedOnce, "carol", "", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Append(ctx, f.run, build); !errors.Is(err, call.ErrSettled) {
		t.Fatalf("approval at its expiry = %v, want ErrSettled", err)
	}
	build, _, err = call.Settle(f.st, rec.Approval, vocab.ApprovalExpired, call.System(call.ExpiryRole), "", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Append(ctx, f.run, build); err != nil {
		t.Fatal(err)
	}
	got, _ := f.st.GetCall(ctx, f.run, "toolu_3")
	if got.Decision != vocab.Deny || got.Source != "approval_expired" {
		t.Errorf("call = %+v", got)
	}
}

// TestGrantKeysAreHashes: a grant's sort key is a SHA-256 of the rule and
// the scope key, so a command of any length (or one holding a secret) never
// reaches a key, and revoking by the scope key finds it.
func TestGrantKeysAreHashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	long := "Bash:curl -H 'Authorization: Bearer sk-live-canary' " + strings.Repeat("x", 1200)
	d := pending
	d.ScopeKey = long
	rec, err := f.record(t, f.asked(t, "toolu_4", map[string]any{"command": long[5:]}), d, call.Pin{ApprovalID: "apr_4"})
	if err != nil {
		t.Fatal(err)
	}
	build, _, err := call.Settle(f.st, rec.Approval, vocab.ApprovedSession, "carol", "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Append(ctx, f.run, build); err != nil {
		t.Fatal(err)
	}
	k := store.GrantKey(f.run, d.RuleID, long)
	if !regexp.MustCompile(`^RGRANT#[0-9a-f]{64}$`).MatchString(k.SK) {
		t.Errorf("grant sort key %q is not RGRANT#<sha256>", k.SK)
	}
	var g store.Grant
	if err := f.st.Get(ctx, k, &g); err != nil || g.ScopeKey != long || g.RuleID != d.RuleID {
		t.Fatalf("grant at %s = %+v, %v", k.SK, g, err)
	}
	revoke := func() error {
		_, err = f.led.Append(ctx, f.run, func(store.Head) (store.Batch, error) {
			held, err := f.st.Grants(ctx, f.run)
			if err != nil {
				return store.Batch{}, err
			}
			return call.Revoke(f.st, f.run, long, held, call.Operator)
		})
		return err
	}
	if err := revoke(); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if err := revoke(); !errors.Is(err, call.ErrNoGrant) {
		t.Errorf("second revoke = %v, want ErrNoGrant", err)
	}
	if grants, _ := f.st.Grants(ctx, f.run); len(grants) != 0 {
		t.Errorf("grants after revoke = %+v", grants)
	}
}

// TestApprovalInputIsBounded: the input kept for display fits
// MaxShownInput whatever the input, stays valid JSON, and the digest and
// size are those of the whole input.
func TestApprovalInputIsBounded(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 30_000) // 60 KB each
	keys := map[string]any{}
	for i := range 5000 {
		keys[strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("z", i/26)] = "v"
	}
	cases := map[string]map[string]any{
		"small":              {"command": "git push"},
		"eight 60 KB":        {"a": big, "b": big, "c": big, "d": big, "e": big, "f": big, "g": big, "h": []any{big, map[string]any{"x": big}}},
		"many keys":          keys,
		"one huge string":    {"content": strings.Repeat("a", 3<<20)},
		"just over the line": {"content": strings.Repeat("a", call.MaxShownInput)},
	}
	for name, input := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c := f.asked(t, "toolu_5", input)
			rec, err := f.record(t, c, pending, call.Pin{ApprovalID: "apr_5"})
			if err != nil {
				t.Fatal(err)
			}
			a, err := f.st.GetApprovalByID(context.Background(), "apr_5")
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := json.Marshal(input)
			if a.InputDigest != c.Digest.String() || a.InputSize != len(whole) || a != rec.Approval {
				t.Errorf("digest %s size %d, want %s %d", a.InputDigest, a.InputSize, c.Digest, len(whole))
			}
			if len(a.Input) > call.MaxShownInput || !json.Valid([]byte(a.Input)) {
				t.Errorf("shown input is %d bytes, valid JSON %v", len(a.Input), json.Valid([]byte(a.Input)))
			}
			if a.InputTruncated != (len(whole) > call.MaxShownInput) || (!a.InputTruncated && a.Input != string(whole)) {
				t.Errorf("truncated = %v for %d bytes", a.InputTruncated, len(whole))
			}
		})
	}
}

func TestExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.record(t, f.asked(t, "ok", map[string]any{}), allow, call.Pin{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.record(t, f.asked(t, "no", map[string]any{}), gate.Decision{Outcome: policy.VerdictDeny, Source: gate.SourcePolicy}, call.Pin{}); err != nil {
		t.Fatal(err)
	}
	claim := func(id string) (store.Call, error) { return call.Claim(ctx, f.st, f.run, id, t0, time.Second) }

	if _, err := claim("no"); !errors.Is(err, call.ErrNotAllowed) {
		t.Errorf("claim a denied call = %v, want ErrNotAllowed", err)
	}
	if _, err := claim("missing"); !errors.Is(err, call.ErrNotRecorded) {
		t.Errorf("claim an unrecorded call = %v, want ErrNotRecorded", err)
	}
	out := call.Outcome{ResultDigest: redact.DigestBytes([]byte(`{"content":[]}`)), LatencyMS: 42}
	if err := call.StoreOutcome(ctx, f.st, f.run, "ok", out); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("outcome before the claim = %v, want ErrNotExecuting", err)
	}

	// Too little time left: nothing is claimed.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := call.Claim(short, f.st, f.run, "ok", t0, time.Second); !errors.Is(err, call.ErrNoTime) {
		t.Errorf("claim without time = %v, want ErrNoTime", err)
	}
	if c, _ := f.st.GetCall(ctx, f.run, "ok"); c.ExecutedAt != "" {
		t.Errorf("claimed without time: %+v", c)
	}

	// Dozens of concurrent claims: exactly one runs the tool.
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev, err := claim("ok")
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, call.ErrExecuted):
				if prev.ExecutedAt == "" {
					t.Errorf("ErrExecuted without the claim's record: %+v", prev)
				}
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d claims won, want 1", won.Load())
	}

	if err := call.StoreOutcome(ctx, f.st, f.run, "ok", out); err != nil {
		t.Fatal(err)
	}
	if err := call.StoreOutcome(ctx, f.st, f.run, "ok", out); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("second outcome = %v, want ErrNotExecuting", err)
	}
	prev, err := claim("ok")
	if got, known := call.OutcomeOf(prev); !errors.Is(err, call.ErrExecuted) || !known || got != out {
		t.Errorf("claim after the outcome = %v, outcome %+v %v, want ErrExecuted with %+v", err, got, known, out)
	}
	brokered := func() error {
		b, err := call.Brokered(f.st, f.run, redact.ToolBrokered{ToolCallID: "ok", ToolName: "Bash", ConnectionID: "con_1", LatencyMS: out.LatencyMS, ResultDigest: out.ResultDigest})
		if err != nil {
			return err
		}
		_, err = f.led.Append(ctx, f.run, func(store.Head) (store.Batch, error) { return b, nil })
		return err
	}
	if err := brokered(); err != nil {
		t.Fatal(err)
	}
	if err := brokered(); !errors.Is(err, call.ErrBrokeredRecorded) {
		t.Errorf("second tool.brokered = %v, want ErrBrokeredRecorded", err)
	}
	if c, _ := f.st.GetCall(ctx, f.run, "ok"); !c.Brokered || c.ResultDigest != out.ResultDigest.String() || c.LatencyMS != 42 {
		t.Errorf("record = %+v", c)
	}
	if n := strings.Count(strings.Join(f.events(t), " "), "tool.brokered"); n != 1 {
		t.Errorf("%d tool.brokered events, want 1", n)
	}
}

// TestReverifyIsTheGatesStage: re-verification refuses exactly what the
// gate's stage 2 refuses, with its reasons, including a binding frozen
// without a tool-set digest (which a copy of the check once missed).
func TestReverifyIsTheGatesStage(t *testing.T) {
	t.Parallel()
	tool := &gate.Tool{Name: "mcp__jira__echo", Class: "read", Callable: true, ConnectionID: "con_1"}
	run := func(b gate.Binding) *gate.Run {
		return &gate.Run{Tools: map[string]*gate.Tool{tool.Name: tool}, Bindings: map[string]gate.Binding{"con_1": b}}
	}
	good := gate.Binding{ConnectionID: "con_1", Generation: 2, ToolSetDigest: "sha256:a"}
	live := gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, ToolSetDigest: "sha256:a", OwnerActive: true}
	cases := []struct {
		name   string
		run    *gate.Run
		live   gate.Live
		source gate.Source
		reason string
	}{
		{"holds", run(good), live, "", ""},
		{"no digest frozen", run(gate.Binding{ConnectionID: "con_1", Generation: 2}), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, OwnerActive: true},
			gate.SourceBinding, "no frozen tool-set digest"},
		{"gone", run(good), gate.Live{}, gate.SourceBinding, "no longer exists"},
		{"revoked", run(good), gate.Live{Found: true, Status: gate.ConnectionRevoked, Generation: 2, ToolSetDigest: "sha256:a", OwnerActive: true}, gate.SourceBinding, "not active"},
		{"re-authorized", run(good), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 3, ToolSetDigest: "sha256:a", OwnerActive: true}, gate.SourceBinding, "re-authorized"},
		{"owner left", run(good), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, ToolSetDigest: "sha256:a"}, gate.SourceBinding, "no longer an active member"},
		{"drifted", run(good), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, ToolSetDigest: "sha256:b", OwnerActive: true}, gate.SourceCapability, "changed since this run started"},
		{"no run", nil, live, gate.SourceCapability, "no frozen tool set"},
	}
	for _, c := range cases {
		d, denied := call.Reverify(c.run, tool.Name, map[string]gate.Live{"con_1": c.live})
		if denied != (c.source != "") || d.Source != c.source || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%s: denied=%v %s %q, want %s %q", c.name, denied, d.Source, d.Reason, c.source, c.reason)
			continue
		}
		if !denied || c.run == nil {
			continue
		}
		// The same call through the whole gate is denied the same way.
		full := gate.Decide(&gate.Run{Tools: c.run.Tools, Bindings: c.run.Bindings, TrustTier: "trusted", AvailableMicros: 1, Policy: nil},
			gate.Request{ToolName: tool.Name, Input: map[string]any{}, Connections: map[string]gate.Live{"con_1": c.live}})
		if full.Source != d.Source || full.Reason != d.Reason {
			t.Errorf("%s: gate says %s %q, re-verification %s %q", c.name, full.Source, full.Reason, d.Source, d.Reason)
		}
	}
}

// TestUnclaim: a claimed execution the upstream refused at its door is
// released with its tool.decision deny, in one append; only that claim is
// released and only while no outcome is stored, and a released call is
// claimed again by exactly one of many.
func TestUnclaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.record(t, f.asked(t, "up", map[string]any{}), allow, call.Pin{}); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Second)
	unclaim := func(at time.Time) error {
		b, err := call.Unclaim(f.st, f.run, "up", "Bash", gate.SourceBinding, at)
		if err != nil {
			return err
		}
		_, err = f.led.Append(ctx, f.run, func(store.Head) (store.Batch, error) { return b, nil })
		return err
	}
	if err := unclaim(t0); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("release before any claim = %v, want ErrNotExecuting", err)
	}
	if _, err := call.Claim(ctx, f.st, f.run, "up", t0, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := unclaim(t1); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("release of another claim = %v, want ErrNotExecuting", err)
	}
	before := len(f.events(t))
	if err := unclaim(t0); err != nil {
		t.Fatal(err)
	}
	if evs := f.events(t); len(evs) != before+1 || evs[len(evs)-1] != "tool.decision" {
		t.Errorf("events after the release = %v, want one more tool.decision", evs)
	}
	out := call.Outcome{ResultDigest: redact.DigestBytes([]byte(`{}`))}
	if err := call.StoreOutcome(ctx, f.st, f.run, "up", out); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("outcome of a released claim = %v, want ErrNotExecuting", err)
	}

	var won atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := call.Claim(ctx, f.st, f.run, "up", t1, time.Second)
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, call.ErrExecuted):
				t.Errorf("claim after the release: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d claims won after the release, want 1", won.Load())
	}
	if err := call.StoreOutcome(ctx, f.st, f.run, "up", out); err != nil {
		t.Fatal(err)
	}
	if err := unclaim(t1); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("release after the outcome = %v, want ErrNotExecuting", err)
	}
}

// TestGrantFencesItsDecision: a decision a session grant answered is
// recorded only while that grant stands; revoked between the read and the
// record, the append refuses it (ErrGrantRevoked) and records nothing.
func TestGrantFencesItsDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	byGrant := gate.Decision{Outcome: policy.VerdictAllow, Verdict: policy.VerdictRequireApproval, RuleID: "r2", Reason: "granted",
		Grant: "Bash:git push", GrantRule: "r2"}
	if _, err := f.record(t, f.asked(t, "g1", map[string]any{"command": "git push"}), byGrant, call.Pin{}); !errors.Is(err, call.ErrGrantRevoked) {
		t.Fatalf("decision by a grant the run does not hold = %v, want ErrGrantRevoked", err)
	}
	if _, err := f.st.GetCall(ctx, f.run, "g1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused decision left a call record: %v", err)
	}
	g, err := f.st.Put(store.GrantKey(f.run, "r2", "Bash:git push"), store.Grant{RuleID: "r2", ScopeKey: "Bash:git push", ApprovalID: "apr_g"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := redact.New(redact.GrantRevoked{ScopeKey: "unrelated", RevokedBy: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.Append(ctx, f.run, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{g}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.record(t, f.asked(t, "g2", map[string]any{"command": "git push"}), byGrant, call.Pin{}); err != nil {
		t.Fatalf("decision by a grant the run holds = %v", err)
	}
	// The same grant under another rule is another grant.
	other := byGrant
	other.GrantRule = "r9"
	if _, err := f.record(t, f.asked(t, "g3", map[string]any{"command": "git push"}), other, call.Pin{}); !errors.Is(err, call.ErrGrantRevoked) {
		t.Errorf("decision by the key under another rule = %v, want ErrGrantRevoked", err)
	}
}

// TestSourceCountFollowsTheApproval: filing an approval of a trigger
// source adds to its count, past the limit the append refuses
// (ErrSourceFull), and a settlement, by a human or by expiry, takes it off.
func TestSourceCountFollowsTheApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	pin := func(id string) call.Pin {
		return call.Pin{ApprovalID: id, Source: "github:acme/app#author:1", SourceLimit: 2}
	}
	count := func() int64 {
		var c store.SourcePending
		if err := f.st.Get(ctx, store.SourceKey("github:acme/app#author:1"), &c); err != nil {
			t.Fatal(err)
		}
		return c.Pending
	}
	var recs []call.Recorded
	for _, id := range []string{"s1", "s2"} {
		rec, err := f.record(t, f.asked(t, id, map[string]any{"command": "git push " + id}), pending, pin("apr_"+id))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if _, err := f.record(t, f.asked(t, "s3", map[string]any{"command": "git push s3"}), pending, pin("apr_s3")); !errors.Is(err, call.ErrSourceFull) {
		t.Fatalf("a third of two = %v, want ErrSourceFull", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	settle := func(a store.Approval, to vocab.ApprovalStatus, by call.Subject, at time.Time) {
		t.Helper()
		build, _, err := call.Settle(f.st, a, to, by, "", at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.led.Append(ctx, f.run, build); err != nil {
			t.Fatalf("settle %s: %v", to, err)
		}
	}
	settle(recs[0].Approval, vocab.ApprovedOnce, "carol", t0)
	settle(recs[1].Approval, vocab.ApprovalExpired, call.System(call.ExpiryRole), t0.Add(time.Hour))
	if n := count(); n != 0 {
		t.Errorf("count after a decision and an expiry = %d, want 0", n)
	}
	if _, err := f.record(t, f.asked(t, "s4", map[string]any{"command": "git push s4"}), pending, pin("apr_s4")); err != nil {
		t.Errorf("filing once the count fell = %v", err)
	}
}
