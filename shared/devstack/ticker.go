package devstack

import (
	"context"
	"time"
)

// Ticks is the dev server's clock for scheduled triggers: it calls fire
// with each time c delivers, one call at a time, until ctx ends or c is
// closed. Every gives it the wall clock; a test gives it a channel of its
// own and so decides what time it is and when.
func Ticks(ctx context.Context, c <-chan time.Time, fire func(context.Context, time.Time)) {
	for {
		select {
		case <-ctx.Done():
			return
		case now, ok := <-c:
			if !ok {
				return
			}
			fire(ctx, now)
		}
	}
}

// Every delivers now() at once (a due time missed while the server was
// down fires on start) and then every d, until ctx ends. A tick not taken
// before the next is dropped, as time.Ticker drops it.
func Every(ctx context.Context, d time.Duration, now func() time.Time) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- now()
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				select {
				case c <- now():
				default:
				}
			}
		}
	}()
	return c
}
