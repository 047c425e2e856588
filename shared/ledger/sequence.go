package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// Sequence numbers runID's pending events until none is left: each round
// reads up to store.MaxNumbered of them in key order and numbers them in
// one transaction after the head's counter. Only events of a generation
// the run is fenced at are numbered (a change left half-way is finished
// first), so nothing decided on an older head can be numbered after the
// change that fenced it. Sequencers may race, in this process or others:
// a round that loses found its events numbered by the winner, and reads
// again.
func (l *Ledger) Sequence(ctx context.Context, runID string) error {
	for attempt := 0; ; attempt++ {
		if attempt >= maxAttempts {
			return fmt.Errorf("ledger: sequence %s: %w", runID, ErrContention)
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("ledger: sequence %s: %w: %w", runID, store.ErrUnavailable, err)
		}
		batch, more, err := l.st.Unsequenced(ctx, runID, store.MaxNumbered)
		if err != nil || len(batch) == 0 {
			return err
		}
		head, err := l.st.GetHead(ctx, runID)
		if err != nil {
			return err
		}
		if head.FenceGen > head.FencedGen {
			if err := l.finishFence(ctx, head); err != nil {
				return err
			}
			head.FencedGen = head.FenceGen
		}
		n := 0
		for n < len(batch) && batch[n].Gen <= head.FencedGen {
			n++
		}
		if n == 0 {
			// Only events of a generation newer than the head's: the
			// head was read before their change committed. Read again.
			continue
		}
		next, err := l.st.Number(ctx, head, batch[:n])
		var conflict *store.SeqConflictError
		switch {
		case errors.As(err, &conflict):
			continue
		case err != nil:
			return err
		}
		l.remember(next)
		l.hub.notify(runID)
		if !more && n == len(batch) {
			return nil
		}
		attempt = -1
	}
}

// sequencers runs at most one background sequencer per run in this
// process; a kick while one runs makes it go round once more.
type sequencers struct {
	mu      sync.Mutex
	running map[string]bool // run -> kicked again while running
}

// linger is how long a background sequencer waits before a round, so that
// a burst of appends is numbered in one transaction rather than one each.
// Readers do not wait for it: they number what is pending themselves.
const linger = 10 * time.Millisecond

// backgroundTimeout bounds one background sequencing; what it leaves is
// numbered by the next kick or read.
const backgroundTimeout = 30 * time.Second

// backgroundRetries is how many more rounds a background sequencer goes
// after a round that failed (each lingering twice as long as the one
// before), so that events appended last are not left pending until
// someone reads the run.
const backgroundRetries = 4

// kick numbers runID's pending events in the background, unless the
// ledger leaves that to readers and the stream. It runs with ctx's values
// (the caller's identity) but not its deadline: the appender has its
// answer and goes.
func (l *Ledger) kick(ctx context.Context, runID string) {
	if !l.background {
		return
	}
	s := &l.seq
	s.mu.Lock()
	if s.running == nil {
		s.running = map[string]bool{}
	}
	if _, ok := s.running[runID]; ok {
		s.running[runID] = true
		s.mu.Unlock()
		return
	}
	s.running[runID] = false
	s.mu.Unlock()
	go func() {
		failed := 0
		for {
			// Linger: the appends of the next moments join this round,
			// as a stream's batching window gathers them on AWS.
			time.Sleep(linger << failed)
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundTimeout)
			// An error leaves the events pending, durable; this sequencer
			// goes round again a few times, later ones, and past that the
			// next kick or read numbers them. Nobody waits for this one.
			err := l.Sequence(bctx, runID)
			cancel()
			if err != nil && failed < backgroundRetries {
				failed++
				continue
			}
			failed = 0
			s.mu.Lock()
			if !s.running[runID] {
				delete(s.running, runID)
				s.mu.Unlock()
				return
			}
			s.running[runID] = false
			s.mu.Unlock()
		}
	}()
}
