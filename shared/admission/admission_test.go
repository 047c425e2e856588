package admission_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
)

// newRun writes a bare run with a budget of limit micros.
func newRun(tb testing.TB, st *store.Store, limit int64) string {
	tb.Helper()
	id := ids.New("ses_")
	ev, err := redact.New(redact.SessionCreated{SessionID: id, BudgetMicros: limit})
	if err != nil {
		tb.Fatal(err)
	}
	err = st.CreateRun(context.Background(), store.NewRun{
		Head:    store.Head{RunID: id, Status: "running", BudgetLimit: limit, BudgetAvailable: limit, CreatedAt: store.FormatTime(time.Now())},
		Policy:  store.PolicySnapshot{PolicyID: "pol_x", Version: 1, Digest: "sha256:x", Document: "{}"},
		Created: ev,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

// TestSettlementRace: reports with different usage and sweeps race for one
// reservation; exactly one closes it, and every caller is told its cost.
func TestSettlementRace(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	led := ledger.New(st, time.Now)
	svc := admission.New(led, nil, time.Now)
	id := newRun(t, st, 1_000_000)
	ctx := context.Background()
	if _, err := svc.Admit(ctx, id, admission.Request{RequestID: "r", Model: "claude-haiku-4-5", MaxOutputTokens: 10_000}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	costs := make([]budget.Micros, 20)
	applied := make([]bool, 20)
	for i := range 20 {
		wg.Go(func() {
			var s admission.Settled
			var err error
			switch i % 3 {
			case 0:
				_, err = svc.SweepReservations(ctx, time.Now().Add(time.Second))
				s, _ = svc.Reconcile(ctx, id, "r", budget.Usage{})
			default:
				s, err = svc.Reconcile(ctx, id, "r", budget.Usage{InputTokens: int64(i), OutputTokens: int64(100 * i)})
			}
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			costs[i], applied[i] = s.Cost, s.Applied
		})
	}
	wg.Wait()
	h, err := st.GetHead(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range costs {
		if int64(c) != h.BudgetSpent {
			t.Errorf("caller %d was told %d, the head booked %d", i, c, h.BudgetSpent)
		}
	}
	events, err := st.Events(ctx, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Type == string(redact.TypeBudgetReconciled) {
			n++
		}
	}
	if n != 1 || h.BudgetReserved != 0 || h.BudgetLimit-h.BudgetSpent != h.BudgetAvailable {
		t.Errorf("%d budget.reconciled events, head %+v; want one, nothing reserved", n, h)
	}
}

func TestAdmitErrors(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	led := ledger.New(st, time.Now)
	svc := admission.New(led, nil, time.Now)
	ctx := context.Background()
	id := newRun(t, st, 100)
	for _, c := range []struct {
		req  admission.Request
		want error
	}{
		{admission.Request{RequestID: "a", Model: "gpt-imaginary", MaxOutputTokens: 1}, admission.ErrUnknownModel},
		{admission.Request{RequestID: "b", Model: "claude-haiku-4-5", MaxOutputTokens: 1000}, admission.ErrBudgetExhausted},
	} {
		if _, err := svc.Admit(ctx, id, c.req); !errors.Is(err, c.want) {
			t.Errorf("Admit(%+v) = %v, want %v", c.req, err, c.want)
		}
	}
	if _, err := svc.Admit(ctx, "ses_missing", admission.Request{RequestID: "c", Model: "claude-haiku-4-5", MaxOutputTokens: 1}); !errors.Is(err, admission.ErrRunNotFound) {
		t.Errorf("Admit on a missing run = %v, want ErrRunNotFound", err)
	}
	if _, err := svc.Reconcile(ctx, id, "never-admitted", budget.Usage{}); !errors.Is(err, admission.ErrReservationNotFound) {
		t.Errorf("Reconcile of nothing = %v, want ErrReservationNotFound", err)
	}
	if _, err := admission.LoadPrices("/nonexistent/prices.json"); err == nil {
		t.Error("LoadPrices of a missing file succeeded")
	}
}

// BenchmarkAdmitReconcile: one admission and its reconciliation (two
// ledger appends) on one run, through minidyn.
func BenchmarkAdmitReconcile(b *testing.B) {
	st := testenv.Store(b)
	led := ledger.New(st, time.Now)
	svc := admission.New(led, nil, time.Now)
	id := newRun(b, st, 1<<50)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		req := fmt.Sprintf("r%d", i)
		if _, err := svc.Admit(ctx, id, admission.Request{RequestID: req, Model: "claude-haiku-4-5", MaxOutputTokens: 1000, InputTokensUpperBound: 4000}); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Reconcile(ctx, id, req, budget.Usage{InputTokens: 900, OutputTokens: 200}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitParallel: admissions on many runs at once.
func BenchmarkAdmitParallel(b *testing.B) {
	st := testenv.Store(b)
	led := ledger.New(st, time.Now)
	svc := admission.New(led, nil, time.Now)
	runs := make([]string, 16)
	for i := range runs {
		runs[i] = newRun(b, st, 1<<50)
	}
	var mu sync.Mutex
	n := 0
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			n++
			k := n
			mu.Unlock()
			if _, err := svc.Admit(context.Background(), runs[k%len(runs)], admission.Request{RequestID: fmt.Sprintf("r%d", k), Model: "claude-haiku-4-5", MaxOutputTokens: 1000}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
