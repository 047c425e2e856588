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
	return &Limiter{st: st, limit: perMinute, now: now, full: map[fullKey]struct{}{}}
}

// Limit is the configured requests per minute.
func (l *Limiter) Limit() int { return l.limit }

// Allow counts one request of runID: nil when it may go on, a
// *LimitedError when the run is over its limit, another error (wrapping
// store.ErrUnavailable) when the count could not be kept.
func (l *Limiter) Allow(ctx context.Context, runID string) error {
	now := l.now()
	start := now.Truncate(window)
	end := start.Add(window)
	k := fullKey{runID, start.Unix()}
	limited := &LimitedError{RetryAfter: end.Sub(now), Limit: l.limit}
	l.mu.Lock()
	_, full := l.full[k]
	l.mu.Unlock()
	if full {
		return limited
	}
	// The counter outlives its window by one more, so a clock a little
	// behind another instance's still finds it.
	err := l.st.CountRequest(ctx, store.RateKey(runID, start.Unix()), l.limit, end.Add(window).Unix())
	switch {
	case errors.Is(err, store.ErrConditionFailed):
		l.mu.Lock()
		if len(l.full) >= maxRemembered {
			clear(l.full)
		}
		l.full[k] = struct{}{}
		l.mu.Unlock()
		return limited
	case err != nil:
		return fmt.Errorf("ratelimit: count a request of %s: %w", runID, err)
	}
	return nil
}
