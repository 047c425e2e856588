package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse: Parse never panics, refuses with ErrInvalid, and what it
// accepts is a schedule whose walks agree: the next due time after a point
// is after it, and is the latest due time as of itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"cron(0 9 ? * MON-FRI *)", "cron(*/15 * * * ? *)", "cron(0 0 L-2,LW,15W * ? *)", "cron(0 17 ? * 6L,2#1 2026-2030/2)",
		"rate(1 minute)", "rate(5 minutes)", "rate(12 hours)", "rate(1 day)", "cron(0 22-2 * * ? *)", "cron(0 0 30 FEB ? *)",
	} {
		f.Add(s)
	}
	since := time.Date(2026, 12, 7, 10, 17, 42, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) = %v, not ErrInvalid", s, err)
			}
			return
		}
		if e.String() != s || e.IsZero() {
			t.Fatalf("Parse(%q).String() = %q", s, e.String())
		}
		next, ok := e.Next(since, since)
		if !ok {
			return // due only before 2026
		}
		if !next.After(since) || next.Second() != 0 {
			t.Fatalf("%q: Next(%v) = %v", s, since, next)
		}
		latest, ok := e.Latest(since, next, next.Sub(since))
		if !ok || !latest.Equal(next) {
			t.Fatalf("%q: Latest(as of Next %v) = %v %v", s, next, latest, ok)
		}
		if before, ok := e.Latest(since, next.Add(-time.Second), next.Sub(since)); ok {
			t.Fatalf("%q: Latest just before Next %v = %v, want none", s, next, before)
		}
	})
}
