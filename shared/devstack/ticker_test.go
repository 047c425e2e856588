package devstack

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestTicksFollowsItsClock(t *testing.T) {
	t.Parallel()
	c := make(chan time.Time)
	base := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	var got []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		Ticks(context.Background(), c, func(_ context.Context, now time.Time) { got = append(got, now) })
	}()
	want := []time.Time{base, base.Add(24 * time.Hour), base.Add(24*time.Hour + time.Second)}
	for _, at := range want {
		c <- at
	}
	close(c)
	<-done
	if !slices.Equal(got, want) {
		t.Errorf("Ticks fired at %v, want %v", got, want)
	}
}

func TestTicksStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Ticks(ctx, make(chan time.Time), func(context.Context, time.Time) { t.Error("fired with no tick") })
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Ticks did not return after its context ended")
	}
}

func TestEveryTicksAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixed := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	c := Every(ctx, time.Hour, func() time.Time { return fixed })
	select {
	case got := <-c:
		if !got.Equal(fixed) {
			t.Errorf("first tick = %v, want its clock's %v", got, fixed)
		}
	default:
		t.Fatal("Every delivered nothing at once; a due time missed while down would wait a whole period")
	}
}
