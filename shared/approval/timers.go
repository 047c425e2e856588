package approval

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Scheduler arranges for an approval to be expired at its time. In AWS it
// starts a Step Functions execution; in dev, an in-process timer. A lost
// schedule widens nothing: lazy expiry and the sweep expire it all the same.
type Scheduler interface {
	Schedule(ctx context.Context, approvalID string, at time.Time) error
}

// Timers is the dev server's Scheduler: one in-process timer per approval,
// running the same Expire as every other path.
type Timers struct {
	svc *Service
	log *slog.Logger
	mu  sync.Mutex
	set map[string]*time.Timer
}

// NewTimers returns in-process expiry timers over svc; log may be nil.
func NewTimers(svc *Service, log *slog.Logger) *Timers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Timers{svc: svc, log: log, set: map[string]*time.Timer{}}
}

// Schedule expires approvalID at (or just after) at.
func (t *Timers) Schedule(_ context.Context, approvalID string, at time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.set[approvalID]; ok {
		return nil
	}
	// A few milliseconds late, so the row is overdue when Expire reads it.
	wait := at.Sub(t.svc.now()) + 5*time.Millisecond
	t.set[approvalID] = time.AfterFunc(max(wait, 0), func() { t.fire(approvalID) })
	return nil
}

func (t *Timers) fire(approvalID string) {
	t.mu.Lock()
	delete(t.set, approvalID)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	applied, err := t.svc.Expire(ctx, approvalID)
	switch {
	case err != nil:
		t.log.Error("expire approval", "approval", approvalID, "err", err)
	case applied:
		t.log.Info("approval expired", "approval", approvalID)
	}
}

// Stop cancels every pending timer.
func (t *Timers) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, tm := range t.set {
		tm.Stop()
		delete(t.set, id)
	}
}
