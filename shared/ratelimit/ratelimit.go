// Package ratelimit bounds how many API requests one run's session token
// may make per minute, so one sandbox cannot use up the API Gateway
// throttle every run shares (FLUIDBOX_RUN_REQUESTS_PER_MINUTE).
//
// The API runs as many Lambda instances at once, and a flood fans out over
// them: API Gateway gives each request in flight its own instance, so a
// token bucket per instance would let N parallel requests through N
// buckets, and the bound would grow with the attack. The count is
// therefore kept in DynamoDB, shared by every instance: a fixed one-minute
// window per run (RATE#<run> / W#<window start>), incremented by one
// conditional UpdateItem that refuses to pass the limit, and deleted by the
// table's TTL afterwards. Fixed windows cost one write and no read per
// request, at the price of letting up to twice the limit through across a
// window boundary; a sliding window or a bucket needs a read-modify-write
// DynamoDB cannot do in one conditional update.
//
// An instance does not write once per request: it reserves a share of the
// window at a time (Chunk requests) with that one conditional update and
// answers the next requests of the run from what it holds, so a busy
// run costs the table one write per Chunk requests and a warm decision
// none. The sum of what every instance reserved never passes the limit,
// so the bound holds as before; a reservation that would pass it takes
// what is left instead. What an instance holds when the window ends, or
// when it stops getting the run's requests, is lost: a run spread over N
// instances may be refused up to N*(Chunk-1) requests early, never let
// past the limit.
//
// Each instance also remembers the windows it saw full, and answers the
// rest of such a window itself, without a write: past the limit, a flood
// costs the table one refused write per instance per window, not one per
// request.
//
// Guarantees: a request over the limit is refused with the time until the
// window ends (Retry-After); a request whose count cannot be written is
// refused too (the caller answers 503: fail closed, as every other store
// failure); nothing but the run id reaches the key.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// DefaultPerMinute is the limit when none is configured: well above what
// an agent's hook and runner send (a permission call per tool call, long
// polls of 25 s), well below what would starve other runs.
const DefaultPerMinute = 600

// window is the length of one counting window.
const window = time.Minute

// ErrLimited: the run is over its limit for this window.
var ErrLimited = errors.New("ratelimit: the run is over its request limit")

// LimitedError is ErrLimited with the time until the window ends.
type LimitedError struct {
	RetryAfter time.Duration
	Limit      int
}

func (e *LimitedError) Error() string {
	return fmt.Sprintf("%s of %d a minute; retry after %s", ErrLimited, e.Limit, e.RetryAfter)
}

// Is makes errors.Is(err, ErrLimited) hold.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// RetryAfterSeconds is RetryAfter as a Retry-After header says it: whole
// seconds, rounded up, at least 1.
func (e *LimitedError) RetryAfterSeconds() int64 {
	return max(int64((e.RetryAfter+time.Second-1)/time.Second), 1)
}

// Limiter counts runs' requests.
type Limiter struct {
	st    *store.Store
	limit int
	now   func() time.Time

	mu   sync.Mutex
	full map[fullKey]struct{}
	// held is what this instance reserved of a window and not used yet;
	// refills, the reservations in flight.
	held    map[fullKey]int
	refills map[fullKey]*refill
}

type fullKey struct {
	run    string
	window int64
}

// maxRemembered bounds the memo of full windows; past it the memo starts
// over (the table still holds the counts).
const maxRemembered = 10000

// New returns a limiter of perMinute requests per run per minute (0 is
// DefaultPerMinute).
func New(st *store.Store, perMinute int, now func() time.Time) *Limiter {
	if perMinute <= 0 {
		perMinute = DefaultPerMinute
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{st: st, limit: perMinute, now: now, full: map[fullKey]struct{}{}, held: map[fullKey]int{}, refills: map[fullKey]*refill{}}
}

// Limit is the configured requests per minute.
func (l *Limiter) Limit() int { return l.limit }

// Chunk is how many requests an instance reserves at a time: a 64th of
// the limit, at least 1 and at most maxChunk, so that what a few
// instances hold unused stays a small part of the limit.
func (l *Limiter) Chunk() int { return min(max(l.limit/64, 1), maxChunk) }

const maxChunk = 32

// Allow counts one request of runID: nil when it may go on, a
// *LimitedError when the run is over its limit, another error (wrapping
// store.ErrUnavailable) when the count could not be kept.
func (l *Limiter) Allow(ctx context.Context, runID string) error {
	now := l.now()
	start := now.Truncate(window)
	end := start.Add(window)
	k := fullKey{runID, start.Unix()}
	limited := &LimitedError{RetryAfter: end.Sub(now), Limit: l.limit}
	for {
		l.mu.Lock()
		_, full := l.full[k]
		switch {
		case full:
			l.mu.Unlock()
			return limited
		case l.held[k] > 0:
			l.held[k]--
			l.mu.Unlock()
			return nil
		}
		r, busy := l.refills[k]
		if !busy {
			break // this request refills, holding l.mu
		}
		r.waiting++
		l.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			l.mu.Lock()
			r.waiting--
			l.mu.Unlock()
			return fmt.Errorf("ratelimit: count a request of %s: %w: %w", runID, store.ErrUnavailable, ctx.Err())
		}
	}
	// One reservation at a time per run and window on an instance: the
	// requests that arrive meanwhile wait for it, and it reserves a share
	// for each of them beside the chunk, so none is left to write again.
	r := &refill{done: make(chan struct{})}
	l.refills[k] = r
	l.mu.Unlock()
	n, err := l.reserve(ctx, runID, start, func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return r.waiting
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.refills, k)
	close(r.done)
	switch {
	case errors.Is(err, store.ErrConditionFailed):
		if len(l.full) >= maxRemembered {
			clear(l.full)
		}
		l.full[k] = struct{}{}
		return limited
	case err != nil:
		return fmt.Errorf("ratelimit: count a request of %s: %w", runID, err)
	}
	if len(l.held) >= maxRemembered {
		clear(l.held) // what is dropped is lost, never counted twice
	}
	delete(l.held, fullKey{runID, k.window - int64(window/time.Second)})
	l.held[k] += n - 1
	return nil
}

// refill is a reservation in flight: the requests waiting for it, and
// closed when it is done.
type refill struct {
	waiting int
	done    chan struct{}
}

// reserve reserves a chunk of runID's window starting at start, plus one
// for each request waiting, and returns how many; when less than that is
// left it takes what is. A window with nothing left is
// store.ErrConditionFailed.
func (l *Limiter) reserve(ctx context.Context, runID string, start time.Time, waiting func() int) (int, error) {
	// The counter outlives its window by one more, so a clock a little
	// behind another instance's still finds it.
	expires := start.Add(2 * window).Unix()
	rk := store.RateKey(runID, start.Unix())
	n := min(l.Chunk()+waiting(), l.limit)
	err := l.st.ReserveRequests(ctx, rk, n, l.limit, expires)
	var counted *store.CountedError
	if errors.As(err, &counted) && counted.Count < l.limit {
		n = min(n, l.limit-counted.Count)
		err = l.st.ReserveRequests(ctx, rk, n, l.limit, expires)
	}
	return n, err
}
