package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ratelimit"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestOpenHoldsAcrossInstances: eight bounds over one table stand for
// eight Lambda instances; of 48 concurrent requests of one run that all
// stay open, exactly the limit get in, whichever instance they reach; once
// they end, as many get in again, and another run is never affected.
func TestOpenHoldsAcrossInstances(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t)
	testenv.Calm(t, db) // it counts entries exactly
	c := &clock{t: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)}
	var instances []*ratelimit.Open
	for range 8 {
		instances = append(instances, ratelimit.NewOpen(st, 0, c.now))
	}
	limit := instances[0].Limit()
	if limit != ratelimit.DefaultMaxOpen {
		t.Fatalf("Limit() = %d, want the default %d", limit, ratelimit.DefaultMaxOpen)
	}
	var entered, busy atomic.Int32
	var slots sync.Map
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := instances[i%len(instances)].Enter(t.Context(), "ses_flood")
			var b *ratelimit.BusyError
			switch {
			case err == nil:
				entered.Add(1)
				slots.Store(i, s)
			case errors.As(err, &b) && errors.Is(err, ratelimit.ErrBusy) && b.Limit == limit:
				busy.Add(1)
			default:
				t.Errorf("Enter = %v", err)
			}
		}()
	}
	wg.Wait()
	if entered.Load() != int32(limit) || busy.Load() != 48-int32(limit) {
		t.Fatalf("entered %d, busy %d; want %d and %d", entered.Load(), busy.Load(), limit, 48-limit)
	}
	if _, err := instances[0].Enter(t.Context(), "ses_quiet"); err != nil {
		t.Errorf("another run = %v, want a slot", err)
	}
	// They end, concurrently; as many get in again, and no more.
	slots.Range(func(_, v any) bool {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := v.(*ratelimit.Slot).Release(t.Context()); err != nil {
				t.Errorf("Release = %v", err)
			}
		}()
		return true
	})
	wg.Wait()
	for i := range limit {
		if _, err := instances[i%len(instances)].Enter(t.Context(), "ses_flood"); err != nil {
			t.Fatalf("request %d after the others ended = %v, want a slot", i, err)
		}
	}
	if _, err := instances[0].Enter(t.Context(), "ses_flood"); !errors.Is(err, ratelimit.ErrBusy) {
		t.Errorf("one past the limit again = %v, want ErrBusy", err)
	}
}

// TestOpenLeaseExpires: the instances holding a run's slots die without
// releasing them; the run is refused until the leases expire, and then
// gets every slot back, not one more.
func TestOpenLeaseExpires(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	c := &clock{t: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)}
	o := ratelimit.NewOpen(st, 3, c.now)
	var held []*ratelimit.Slot
	for range 3 {
		s, err := o.Enter(t.Context(), "ses_dead")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	c.set(c.now().Add(ratelimit.LeaseFor - time.Millisecond))
	if _, err := o.Enter(t.Context(), "ses_dead"); !errors.Is(err, ratelimit.ErrBusy) {
		t.Fatalf("before the leases expire = %v, want ErrBusy", err)
	}
	c.set(c.now().Add(time.Millisecond))
	for i := range 3 {
		if _, err := o.Enter(t.Context(), "ses_dead"); err != nil {
			t.Fatalf("request %d once the leases expired = %v, want a slot", i, err)
		}
	}
	if _, err := o.Enter(t.Context(), "ses_dead"); !errors.Is(err, ratelimit.ErrBusy) {
		t.Errorf("one past the limit = %v, want ErrBusy", err)
	}
	// A late release of a purged lease frees nobody else's slot.
	if err := held[0].Release(t.Context()); err != nil {
		t.Errorf("Release(purged lease) = %v, want nil", err)
	}
	if _, err := o.Enter(t.Context(), "ses_dead"); !errors.Is(err, ratelimit.ErrBusy) {
		t.Errorf("after releasing a purged lease = %v, want ErrBusy", err)
	}
}

// TestOpenFailsClosed: a count that cannot be kept refuses the request
// with an error the caller answers 503, never a slot and never a 429.
func TestOpenFailsClosed(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	o := ratelimit.NewOpen(st, 2, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, err := o.Enter(ctx, "ses_a")
	if s != nil || err == nil || errors.Is(err, ratelimit.ErrBusy) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Enter with the table unreachable = %v, %v; want store.ErrUnavailable (fail closed)", s, err)
	}
}
