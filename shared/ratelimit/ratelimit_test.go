package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ratelimit"
	"github.com/fluidbox/fluidbox/shared/store"
)

// clock is a settable time shared by the "instances" of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestLimitHoldsAcrossInstances: eight limiters over one table stand for
// eight Lambda instances; 200 concurrent requests of one run get exactly
// the limit through, whichever instance they reach, and another run is not
// affected. The next window starts afresh.
func TestLimitHoldsAcrossInstances(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t)
	testenv.Calm(t, db) // it counts writes exactly
	c := &clock{t: time.Date(2026, 12, 1, 14, 0, 10, 0, time.UTC)}
	const limit = 25
	var instances []*ratelimit.Limiter
	for range 8 {
		instances = append(instances, ratelimit.New(st, limit, c.now))
	}
	var allowed, limited atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := instances[i%len(instances)].Allow(t.Context(), "ses_flood")
			var lim *ratelimit.LimitedError
			switch {
			case err == nil:
				allowed.Add(1)
			case errors.As(err, &lim) && errors.Is(err, ratelimit.ErrLimited):
				limited.Add(1)
				if lim.RetryAfter != 50*time.Second {
					t.Errorf("RetryAfter = %s, want 50s (the rest of the window)", lim.RetryAfter)
				}
			default:
				t.Errorf("Allow = %v", err)
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != limit || limited.Load() != 200-limit {
		t.Errorf("allowed %d, limited %d; want %d and %d", allowed.Load(), limited.Load(), limit, 200-limit)
	}
	if err := instances[0].Allow(t.Context(), "ses_quiet"); err != nil {
		t.Errorf("another run = %v, want allowed", err)
	}
	c.set(c.now().Add(time.Minute))
	for i := range limit {
		if err := instances[i%len(instances)].Allow(t.Context(), "ses_flood"); err != nil {
			t.Fatalf("request %d of the next window = %v, want allowed", i, err)
		}
	}
	if err := instances[0].Allow(t.Context(), "ses_flood"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Errorf("request past the limit in the next window = %v, want ErrLimited", err)
	}
}

// TestFullWindowCostsNoWrites: once an instance saw a window full, it
// answers the rest of that window itself. With the table gone, a request
// of that run in that window is still limited (no write tried), while
// another run's request, which must write, fails closed.
func TestFullWindowCostsNoWrites(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	c := &clock{t: time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)}
	l := ratelimit.New(st, 2, c.now)
	for range 2 {
		if err := l.Allow(t.Context(), "ses_a"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Allow(t.Context(), "ses_a"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("third = %v, want ErrLimited", err)
	}
	// A cancelled request cannot reach the table.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Allow(ctx, "ses_a"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Errorf("full window with the table unreachable = %v, want ErrLimited from memory", err)
	}
	if err := l.Allow(ctx, "ses_b"); err == nil || errors.Is(err, ratelimit.ErrLimited) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("count with the table unreachable = %v, want store.ErrUnavailable (fail closed)", err)
	}
}

// TestChunksHoldAcrossInstances: with a limit of 640 an instance reserves
// ten requests at a time. 1,000 concurrent requests over eight instances
// get exactly the limit through (an instance refuses only once it used
// what it holds and the table has none left), and the table is written
// about once per ten requests, not once per request.
func TestChunksHoldAcrossInstances(t *testing.T) {
	t.Parallel()
	var updates atomic.Int32
	st, db := testenv.StoreOn(t, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("count", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if middleware.GetOperationName(ctx) == "UpdateItem" {
					updates.Add(1)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		})
	})
	testenv.Calm(t, db) // it counts writes
	c := &clock{t: time.Date(2026, 12, 1, 14, 0, 10, 0, time.UTC)}
	const limit = 640
	var instances []*ratelimit.Limiter
	for range 8 {
		instances = append(instances, ratelimit.New(st, limit, c.now))
	}
	if n := instances[0].Chunk(); n != 10 {
		t.Fatalf("chunk of %d = %d, want 10", limit, n)
	}
	var allowed, limited atomic.Int32
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			err := instances[i%len(instances)].Allow(t.Context(), "ses_flood")
			switch {
			case err == nil:
				allowed.Add(1)
			case errors.Is(err, ratelimit.ErrLimited):
				limited.Add(1)
			default:
				t.Errorf("Allow = %v", err)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != limit || limited.Load() != 1000-limit {
		t.Errorf("allowed %d, limited %d; want %d and %d", allowed.Load(), limited.Load(), limit, 1000-limit)
	}
	// 64 chunks, and per instance at most a smaller last one, a refused
	// one and, racing, a few more refused before it remembers the window
	// is full.
	if n := updates.Load(); n < limit/10 || n > limit/10+8*4 {
		t.Errorf("%d UpdateItems for %d requests, want about one per ten", n, limit)
	}
}
