package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

func scheduledTrigger(id, repo, schedule string) store.Trigger {
	t := store.Trigger{ID: id, Repository: repo, PolicyID: "pol_x", Capabilities: []string{"claude-code"}, Connections: []string{},
		BudgetLimit: 1, TrustTier: "trusted", Events: []string{}, CreatedAt: at(0), CreatedBy: "admin"}
	if schedule != "" {
		t.Schedule, t.ScheduleSince = schedule, at(0)
	}
	return t
}

// TestScheduledTriggers lists every trigger with a schedule, across pages,
// and no other.
func TestScheduledTriggers(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	var want []string
	for i := range 7 {
		schedule := ""
		if i%2 == 0 {
			schedule = "rate(1 hour)"
			want = append(want, fmt.Sprintf("trg_%d", i))
		}
		if err := s.PutTrigger(ctx, scheduledTrigger(fmt.Sprintf("trg_%d", i), fmt.Sprintf("acme/r%d", i), schedule)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ScheduledTriggers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range got {
		ids = append(ids, tr.ID)
		if tr.Schedule == "" {
			t.Errorf("ScheduledTriggers returned %s, which has no schedule", tr.ID)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, want) {
		t.Errorf("ScheduledTriggers = %v, want %v", ids, want)
	}
}

// TestClaimFire: a due time is claimed once, however many try at once; a
// claim from a read of a trigger whose schedule changed, was removed or
// which was deleted is refused and writes nothing.
func TestClaimFire(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	tr := scheduledTrigger("trg_a", "acme/a", "rate(1 hour)")
	if err := s.PutTrigger(ctx, tr); err != nil {
		t.Fatal(err)
	}
	due := at(time.Hour)
	fire := store.Fire{TriggerID: tr.ID, Due: due, RunID: "ses_x", ClaimedAt: due, Expires: t0.Add(50 * time.Hour).Unix()}
	if _, err := s.GetFire(ctx, tr.ID, due); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetFire before the claim = %v, want ErrNotFound", err)
	}
	var wins, claimed atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := s.ClaimFire(ctx, fire, tr); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, store.ErrFireClaimed):
				claimed.Add(1)
			default:
				t.Errorf("ClaimFire = %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || claimed.Load() != 15 {
		t.Fatalf("16 claims at once: %d won, %d found it claimed; want 1 and 15", wins.Load(), claimed.Load())
	}
	if got, err := s.GetFire(ctx, tr.ID, due); err != nil || got != fire {
		t.Errorf("GetFire = %+v %v, want %+v", got, err, fire)
	}

	// The schedule changed since the read: refused, nothing written.
	changed := tr
	changed.Schedule, changed.Revision, changed.UpdatedAt = "rate(2 hours)", 1, at(time.Minute)
	if err := s.UpdateTrigger(ctx, changed); err != nil {
		t.Fatal(err)
	}
	next := store.Fire{TriggerID: tr.ID, Due: at(2 * time.Hour), RunID: "ses_y", ClaimedAt: at(2 * time.Hour)}
	if err := s.ClaimFire(ctx, next, tr); !errors.Is(err, store.ErrTriggerChanged) {
		t.Errorf("ClaimFire from a stale read = %v, want ErrTriggerChanged", err)
	}
	if _, err := s.GetFire(ctx, tr.ID, next.Due); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused claim was written: %v", err)
	}
	if err := s.ClaimFire(ctx, next, changed); err != nil {
		t.Errorf("ClaimFire from the current read = %v", err)
	}
	// Removed, then deleted.
	removed := changed
	removed.Schedule, removed.ScheduleSince, removed.Revision = "", "", 2
	if err := s.UpdateTrigger(ctx, removed); err != nil {
		t.Fatal(err)
	}
	third := store.Fire{TriggerID: tr.ID, Due: at(3 * time.Hour), RunID: "ses_z", ClaimedAt: at(3 * time.Hour)}
	if err := s.ClaimFire(ctx, third, changed); !errors.Is(err, store.ErrTriggerChanged) {
		t.Errorf("ClaimFire after the schedule was removed = %v, want ErrTriggerChanged", err)
	}
	if _, err := s.DeleteTrigger(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimFire(ctx, third, changed); !errors.Is(err, store.ErrTriggerChanged) {
		t.Errorf("ClaimFire after the trigger was deleted = %v, want ErrTriggerChanged", err)
	}
}
