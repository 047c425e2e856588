package calltest

import (
	"context"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// T0 is the fixture's clock.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Decisions of the gate the tests record.
var (
	Allow   = gate.Decision{Outcome: policy.VerdictAllow, Verdict: policy.VerdictAllow, RuleID: "r1", Reason: "allowed by r1"}
	Pending = gate.Decision{Outcome: policy.VerdictRequireApproval, Verdict: policy.VerdictRequireApproval, RuleID: "r2",
		ScopeKey: "Bash:git push", Scope: policy.ScopeSession, TTL: time.Minute}
)

// Fixture is one running run, for the tests of the moves themselves
// (permission.Record, approval.Settle, the broker's execution).
type Fixture struct {
	St  *store.Store
	Led *ledger.Ledger
	Run string
}

// NewFixture creates the run.
func NewFixture(t *testing.T) Fixture {
	t.Helper()
	st := testenv.Store(t)
	created, err := redact.New(redact.SessionCreated{SessionID: "ses_1", TrustTier: "trusted", Trigger: "api", Invoker: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.CreateRun(context.Background(), store.NewRun{
		// A budget, as every run has (run creation requires one).
		Head:    store.Head{RunID: "ses_1", Status: vocab.Running, Invoker: "admin", TrustTier: "trusted", CreatedAt: store.FormatTime(T0), BudgetLimit: 10_000_000, BudgetAvailable: 10_000_000},
		Created: created,
	})
	if err != nil {
		t.Fatal(err)
	}
	return Fixture{St: st, Led: ledger.New(st, func() time.Time { return T0 }), Run: "ses_1"}
}

// Asked is a Bash call of the run with input.
func (f Fixture) Asked(t *testing.T, id string, input map[string]any) permission.Asked {
	t.Helper()
	d, err := redact.DigestJSON(input)
	if err != nil {
		t.Fatal(err)
	}
	return permission.Asked{RunID: f.Run, ToolCallID: id, ToolName: "Bash", Input: input, Digest: d}
}

// Record appends what permission.Record builds for d and returns what it
// recorded.
func (f Fixture) Record(t *testing.T, c permission.Asked, d gate.Decision, pin permission.Pin) (permission.Recorded, error) {
	t.Helper()
	var rec permission.Recorded
	_, err := f.Led.Append(context.Background(), f.Run, func(h store.Head) (store.Batch, error) {
		var err error
		rec, err = permission.Record(f.St, h, c, d, pin, T0)
		return rec.Batch, err
	})
	return rec, err
}

// Events is the types of the run's events, in order.
func (f Fixture) Events(t *testing.T) []string {
	t.Helper()
	evs, _, err := f.Led.Read(context.Background(), f.Run, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}
