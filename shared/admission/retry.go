package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Settlement retry: a settlement that fails for a reason that may pass (a
// transaction conflict, throttling, a store briefly down) is tried again,
// first on the request's own time, then in the background, before the sweep
// books the reservation in full. One conflict must not turn a request that
// cost $0.10 into its whole reservation.
const (
	inlineAttempts     = 3
	backgroundAttempts = 8
	firstBackoff       = 50 * time.Millisecond
	maxBackoff         = 15 * time.Second
	backgroundBudget   = 3 * time.Minute
)

// terminal reports an error that no retry can change.
func terminal(err error) bool {
	var inv *InvalidError
	return errors.As(err, &inv) || errors.Is(err, ErrReservationNotFound) || errors.Is(err, ErrRunNotFound) ||
		errors.Is(err, ErrProxyReservation) || errors.Is(err, ErrUnknownModel)
}

// SettleRetrying runs attempt until it succeeds or fails for good. It tries
// up to inlineAttempts times within ctx; if every try failed for a reason
// that may pass, it keeps trying in the background (done, when not nil, is
// called with the final outcome) and returns the last error, so the caller
// answers on time. A settlement is idempotent (one per reservation), so a
// try that succeeded without its answer arriving is harmless to repeat.
func (s *Service) SettleRetrying(ctx context.Context, attempt func(context.Context) (Settled, error), done func(Settled, error)) (Settled, error) {
	var err error
	backoff := firstBackoff
	for i := range inlineAttempts {
		var st Settled
		if st, err = attempt(ctx); err == nil || terminal(err) {
			return st, err
		}
		if i == inlineAttempts-1 || !sleep(ctx, jitter(backoff)) {
			break
		}
		backoff *= 2
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundBudget)
		defer cancel()
		st, err := Settled{}, err
		b := backoff
		for range backgroundAttempts {
			if !sleep(bctx, jitter(b)) {
				break
			}
			b = min(2*b, maxBackoff)
			if st, err = attempt(bctx); err == nil || terminal(err) {
				break
			}
		}
		if done != nil {
			done(st, err)
		}
	}()
	return Settled{}, err
}

// Wait blocks until every background settlement has finished.
func (s *Service) Wait() { s.bg.Wait() }

// jitter spreads retries of concurrent settlements: a duration in [d/2, d).
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
