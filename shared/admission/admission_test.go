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
	"github.com/fluidbox/fluidbox/shared/vocab"
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
		Head:    store.Head{RunID: id, Status: vocab.Running, BudgetLimit: limit, BudgetAvailable: limit, CreatedAt: store.FormatTime(time.Now())},
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
				s, _ = svc.ReconcileReported(ctx, id, "r", budget.Usage{})
			default:
				s, err = svc.ReconcileReported(ctx, id, "r", budget.Usage{InputTokens: int64(i), OutputTokens: int64(100 * i)})
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
	events, _, err := led.Read(ctx, id, 0, 100, 0)
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
	if _, err := svc.ReconcileReported(ctx, id, "never-admitted", budget.Usage{}); !errors.Is(err, admission.ErrReservationNotFound) {
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
		if _, err := svc.ReconcileReported(ctx, id, req, budget.Usage{InputTokens: 900, OutputTokens: 200}); err != nil {
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

// TestProxyReservationOneMeter: a reservation the proxy booked cannot be
// settled by a runner's report, however many race the proxy's own
// reconcile; the charge is the proxy's.
func TestProxyReservationOneMeter(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	led := ledger.New(st, time.Now)
	svc := admission.New(led, nil, time.Now)
	id := newRun(t, st, 100_000_000)
	ctx := context.Background()
	price, _ := budget.DefaultPrices().Lookup("claude-sonnet-4-5")
	if _, err := svc.AdmitProxied(ctx, id, admission.Proxied{Request: admission.Request{RequestID: "p", Model: "claude-sonnet-4-5", MaxOutputTokens: 100_000, InputTokensUpperBound: 1000}, Price: price}); err != nil {
		t.Fatal(err)
	}
	real := budget.Usage{InputTokens: 900, OutputTokens: 50_000}
	want, _ := budget.Cost(price, real)
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			if _, err := svc.ReconcileReported(ctx, id, "p", budget.Usage{}); !errors.Is(err, admission.ErrProxyReservation) {
				t.Errorf("runner report on a proxy reservation: %v, want ErrProxyReservation", err)
			}
		})
	}
	wg.Go(func() {
		if st, err := svc.Reconcile(ctx, id, "p", real, map[string]int64{"web_search": 2}); err != nil || st.Cost != want {
			t.Errorf("proxy reconcile = %+v, %v; want cost %s", st, err, want)
		}
	})
	wg.Wait()
	h, err := led.Head(ctx, id)
	if err != nil || h.BudgetSpent != int64(want) || h.BudgetReserved != 0 {
		t.Errorf("head spent %d reserved %d (%v), want %d and 0", h.BudgetSpent, h.BudgetReserved, err, want)
	}
}

// TestSettleRetrying: a settlement that fails for a passing reason is
// retried, inline and then in the background, and lands at its real cost;
// one that fails for good is not retried.
func TestSettleRetrying(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	led := ledger.New(st, time.Now)
	svc := admission.New(led, nil, time.Now)
	id := newRun(t, st, 100_000_000)
	ctx := context.Background()
	price, _ := budget.DefaultPrices().Lookup("claude-haiku-4-5")
	if _, err := svc.AdmitProxied(ctx, id, admission.Proxied{Request: admission.Request{RequestID: "q", Model: "claude-haiku-4-5", MaxOutputTokens: 100_000, InputTokensUpperBound: 10}, Price: price}); err != nil {
		t.Fatal(err)
	}
	u := budget.Usage{InputTokens: 10, OutputTokens: 10}
	want, _ := budget.Cost(price, u)
	var mu sync.Mutex
	tries := 0
	attempt := func(ctx context.Context) (admission.Settled, error) {
		mu.Lock()
		tries++
		n := tries
		mu.Unlock()
		if n <= 4 { // every inline try and the first background one
			return admission.Settled{}, fmt.Errorf("conflict: %w", store.ErrUnavailable)
		}
		return svc.Reconcile(ctx, id, "q", u, nil)
	}
	done := make(chan admission.Settled, 1)
	if _, err := svc.SettleRetrying(ctx, attempt, func(s admission.Settled, err error) {
		if err != nil {
			t.Errorf("background settlement: %v", err)
		}
		done <- s
	}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("inline result = %v, want the conflict (the retry goes on in the background)", err)
	}
	svc.Wait()
	if s := <-done; s.Cost != want || s.Settlement != admission.SettlementUsage {
		t.Errorf("settled %+v, want %s by usage", s, want)
	}
	if n, _ := svc.SweepReservations(ctx, time.Now().Add(time.Hour)); n != 0 {
		t.Errorf("the sweep settled %d reservations after the retry landed, want 0", n)
	}
	calls := 0
	if _, err := svc.SettleRetrying(ctx, func(context.Context) (admission.Settled, error) {
		calls++
		return admission.Settled{}, admission.ErrReservationNotFound
	}, nil); !errors.Is(err, admission.ErrReservationNotFound) || calls != 1 {
		t.Errorf("terminal error: %v after %d calls, want it at once", err, calls)
	}
}
