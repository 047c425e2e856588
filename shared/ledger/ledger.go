// Package ledger appends to and reads a run's gapless event log.
//
// Deciding is apart from sequencing (docs/architecture.md, "Ledger"). An
// append builds its batch from the run's head as this process last saw
// it and writes it in one transaction with its events unsequenced: a
// decision (a batch that changes nothing on the head) checks one fence
// shard and touches nothing another decision writes, so a run's parallel
// decisions do not queue; a batch that changes the head is conditioned on
// the head's version and rebuilt from the current head when another
// write got there first. The sequencer, the only writer of a run's
// counter, then numbers the unsequenced events: seqs are 1, 2, 3... with
// no gap and no duplicate, and a reader sequences what is pending before
// it reads, so a read after an answer always sees the answer's events.
//
// A change that fences decisions (the run's end, its budget crossing
// zero, a grant revoked) is finished before the append returns: every
// fence shard is raised, so a decision made on an older head fails its
// check and is made again on the current one. Whoever finds a change
// unfinished (a process that died half-way) finishes it.
//
// Within one process, head changes to the same run wait their turn behind
// a striped lock: they would only conflict in DynamoDB anyway, and every
// conflict costs a transaction. Decisions take no lock.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// ErrContention: an append lost the race for the counter too many times.
var ErrContention = errors.New("ledger: too much contention")

// An append retries head conflicts at most maxAttempts times (and no
// longer than its context allows). Every retry is informed (the conflict
// returned the current head), but a process that loses to another one
// draining a burst of appends can lose many rounds in a row, so the bound
// is generous.
const maxAttempts = 1000

// stripes is the number of in-process append locks.
const stripes = 256

// Build computes what to write from the run's current head. It is called
// again after every conflict, with the newer head; an error aborts.
type Build func(head store.Head) (store.Batch, error)

// Ledger appends and reads run events.
type Ledger struct {
	st    *store.Store
	now   func() time.Time
	hub   hub
	locks [stripes]chan struct{}
	mu    sync.Mutex
	heads map[string]cachedHead
	// headAge is how long a cached head is trusted (see cached).
	headAge time.Duration
	// background: sequence each run in this process after it is
	// appended to (see Option).
	background bool
	seq        sequencers
}

// Option changes how a Ledger works.
type Option func(*Ledger)

// SequenceOnlyWhenRead leaves numbering to readers and to whoever calls
// Sequence (on AWS, the notify function, woken by the table's stream),
// instead of a goroutine of this process after every append.
func SequenceOnlyWhenRead(l *Ledger) { l.background = false }

// DefaultHeadAge is how long a ledger trusts a run's head it read or
// wrote. Fences make a decision on an older head fail for what must stop
// it (end, budget, grants); the rest of the head (the count of pending
// approvals) is only as fresh as this.
const DefaultHeadAge = time.Second

// TrustHeadFor makes a ledger re-read a run's head once it is older than
// d (DefaultHeadAge otherwise).
func TrustHeadFor(d time.Duration) Option { return func(l *Ledger) { l.headAge = d } }

// New returns a ledger over st; now stamps events.
func New(st *store.Store, now func() time.Time, opts ...Option) *Ledger {
	l := &Ledger{st: st, now: now, heads: map[string]cachedHead{}, headAge: DefaultHeadAge, background: true}
	for i := range l.locks {
		l.locks[i] = make(chan struct{}, 1)
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// lock takes runID's in-process append lock, or gives up with ctx.
func (l *Ledger) lock(ctx context.Context, runID string) (unlock func(), err error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runID))
	ch := l.locks[h.Sum32()%stripes]
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("ledger: wait to append to %s: %w: %w", runID, store.ErrUnavailable, ctx.Err())
	}
}

// Store returns the store under the ledger.
func (l *Ledger) Store() *store.Store { return l.st }

// Append builds and writes a batch to runID's ledger. It starts from the
// head this process saw last (steady state: no read at all) and corrects
// itself from the head DynamoDB returns on a conflict, or re-reads it when
// a decision's fence moved. The batch's events are numbered afterwards;
// the returned head's LastSeq does not count them.
func (l *Ledger) Append(ctx context.Context, runID string, build Build) (store.Head, error) {
	head, ok := l.cached(runID)
	if !ok {
		var err error
		if head, err = l.Head(ctx, runID); err != nil {
			return store.Head{}, err
		}
	}
	var unlock func()
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	for attempt := range maxAttempts {
		if head.FenceGen > head.FencedGen {
			// A fence change another writer left unfinished: finish it
			// before deciding on the head it made.
			if err := l.finishFence(ctx, head); err != nil {
				return store.Head{}, err
			}
			head.FencedGen = head.FenceGen
		}
		b, err := build(head)
		if err != nil {
			return store.Head{}, err
		}
		if writesHead(b) && unlock == nil {
			if unlock, err = l.lock(ctx, runID); err != nil {
				return store.Head{}, err
			}
		}
		if b.Numbered() {
			// Its events are numbered now: number what is pending first,
			// so that nothing of an older generation follows them.
			if err := l.Sequence(ctx, runID); err != nil {
				return store.Head{}, err
			}
		}
		next, err := l.st.Append(ctx, head, store.FormatTime(l.now()), b)
		if err == nil {
			if writesHead(b) {
				// A decision returns the head it was made on, which
				// proves nothing newer about it.
				l.remember(next)
			}
			if next.FenceGen > next.FencedGen {
				if err := l.finishFence(ctx, next); err != nil {
					return store.Head{}, err
				}
			}
			l.hub.notify(runID)
			l.kick(ctx, runID)
			return next, nil
		}
		var conflict *store.SeqConflictError
		switch {
		case errors.As(err, &conflict):
			head = conflict.Current
			l.remember(head)
		case errors.Is(err, store.ErrFenced):
			if head, err = l.Head(ctx, runID); err != nil {
				return store.Head{}, err
			}
		default:
			return store.Head{}, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Head{}, fmt.Errorf("ledger: append to %s: %w: %w", runID, store.ErrUnavailable, err)
		}
	}
	return store.Head{}, fmt.Errorf("ledger: append to %s: %w", runID, ErrContention)
}

// writesHead says whether b is written on the head's version (anything
// but a plain decision), so worth serializing within the process.
func writesHead(b store.Batch) bool { return b.Head != (store.HeadChange{}) || b.Numbered() }

// finishFence raises h's run's fence shards to h.FenceGen and remembers
// the head as fenced.
func (l *Ledger) finishFence(ctx context.Context, h store.Head) error {
	if err := l.st.RaiseFence(ctx, h.RunID, h.FenceGen); err != nil {
		return fmt.Errorf("ledger: fence %s: %w", h.RunID, err)
	}
	h.FencedGen = h.FenceGen
	l.remember(h)
	return nil
}

// backoff sleeps a short random time after a lost race. It stays short:
// the conflict already handed back the current head, and a loser that waits
// long only hands the next round to the writer that just won.
func backoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	t := time.NewTimer(rand.N(time.Duration(min(attempt, 8)) * 250 * time.Microsecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Settled numbers runID's pending events, then reads its head: its
// LastSeq counts every event appended before the call, as a reader of the
// run's view expects. The decision path reads Head, which numbers
// nothing.
func (l *Ledger) Settled(ctx context.Context, runID string) (store.Head, error) {
	if err := l.Sequence(ctx, runID); err != nil {
		return store.Head{}, err
	}
	return l.Head(ctx, runID)
}

// Head reads a run's head from the table and remembers it.
func (l *Ledger) Head(ctx context.Context, runID string) (store.Head, error) {
	h, err := l.st.GetHead(ctx, runID)
	if err != nil {
		return store.Head{}, err
	}
	l.remember(h)
	return h, nil
}

// Load reads a run's head with what the run froze, in one request
// (store.RunState), and remembers the head: a process's first request of
// a run (its token checked against the head) leaves the head for its
// decision's append and the frozen state for its gate.
func (l *Ledger) Load(ctx context.Context, runID string) (store.Head, error) {
	h, err := l.st.RunState(ctx, runID)
	if err != nil {
		return store.Head{}, err
	}
	l.remember(h)
	return h, nil
}

// cachedHead is a head and when this process last learnt it (the wall
// clock, not the ledger's: that may be a test's fixed one).
type cachedHead struct {
	store.Head
	at time.Time
}

// cached is runID's head as this process last saw it, unless that is
// older than the ledger trusts.
func (l *Ledger) cached(runID string) (store.Head, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.heads[runID]
	if !ok || time.Since(c.at) > l.headAge {
		return store.Head{}, false
	}
	return c.Head, true
}

// remember keeps the newest head seen for a run: the latest version, and
// of one version the most fenced, then the most numbered. It is told
// only of heads read from the table or returned by it (a write on the
// head, a conflict), which are current as of now.
func (l *Ledger) remember(h store.Head) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.heads[h.RunID]
	if !ok || old.Ver < h.Ver || old.Ver == h.Ver && (old.FencedGen < h.FencedGen || old.FencedGen == h.FencedGen && old.LastSeq <= h.LastSeq) {
		l.heads[h.RunID] = cachedHead{h, time.Now()}
	}
}

// MaxWait is the longest a read may wait for new events.
const MaxWait = 25 * time.Second

// pollEvery is how often a waiting read looks at the table when no append
// in this process wakes it (another Lambda instance may be the writer).
const pollEvery = 250 * time.Millisecond

// Read returns up to limit events with seq > after, in order, and the run's
// last seq. With wait > 0 and nothing to return yet, it waits up to wait for
// the first new event.
func (l *Ledger) Read(ctx context.Context, runID string, after int64, limit int, wait time.Duration) ([]store.Event, int64, error) {
	// The wait is bounded by a timer, not by reading a clock: the ledger's
	// clock stamps events and may be a test's fixed one.
	expired := wait <= 0
	bound := time.NewTimer(max(min(wait, MaxWait), 0))
	defer bound.Stop()
	for {
		woken := l.hub.wait(runID)
		// Number what is pending first: an answer given before this read
		// began is in what it returns.
		if err := l.Sequence(ctx, runID); err != nil {
			return nil, 0, err
		}
		events, err := l.st.Events(ctx, runID, after, limit)
		if err != nil {
			return nil, 0, err
		}
		if len(events) > 0 || expired {
			head, err := l.Head(ctx, runID)
			if err != nil {
				return nil, 0, err
			}
			return events, head.LastSeq, nil
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, ctx.Err()
		case <-woken:
		case <-t.C:
		case <-bound.C:
			expired = true
		}
		t.Stop()
	}
}

// Wait returns when this process next appends to runID, or after d.
func (l *Ledger) Wait(ctx context.Context, runID string, d time.Duration) error {
	woken := l.hub.wait(runID)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-woken:
	case <-t.C:
	}
	return nil
}

// hub wakes readers waiting on a run when this process appends to it.
type hub struct {
	mu      sync.Mutex
	waiters map[string]chan struct{}
}

func (h *hub) wait(runID string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters == nil {
		h.waiters = map[string]chan struct{}{}
	}
	ch, ok := h.waiters[runID]
	if !ok {
		ch = make(chan struct{})
		h.waiters[runID] = ch
	}
	return ch
}

func (h *hub) notify(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.waiters[runID]; ok {
		close(ch)
		delete(h.waiters, runID)
	}
}
