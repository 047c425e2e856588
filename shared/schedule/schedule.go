// Package schedule parses the schedule expressions of EventBridge, which a
// trigger configuration takes as it is ("cron(0 9 ? * MON-FRI *)",
// "rate(5 minutes)"), and says when one is due.
//
// Guarantees: Parse accepts a subset of EventBridge's dialect and nothing
// outside it, so an expression that parses here means the same thing it
// means to EventBridge; what EventBridge's documentation leaves unclear is
// refused rather than guessed (a range that wraps, "L" alone in the
// day-of-week field, lower-case names, extra spaces). An expression that
// can never be due again is refused too. Times are UTC and minute-aligned.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxLength bounds an expression, as EventBridge Scheduler bounds its
// ScheduleExpression.
const MaxLength = 256

// ErrInvalid is the error of every expression Parse refuses.
var ErrInvalid = errors.New("schedule: invalid expression")

// SyntaxError says what is wrong with an expression, in words an operator
// can act on; it wraps ErrInvalid.
type SyntaxError struct{ Msg string }

func (e *SyntaxError) Error() string { return e.Msg }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *SyntaxError) Unwrap() error { return ErrInvalid }

func invalid(format string, args ...any) error {
	return &SyntaxError{Msg: fmt.Sprintf(format, args...)}
}

// Expression is a parsed schedule: a rate or a cron. The zero value is no
// schedule and is never due.
type Expression struct {
	text  string
	every time.Duration // a rate's period; 0 for a cron
	cron  *cron
}

// String is the expression as it was given.
func (e Expression) String() string { return e.text }

// IsZero reports whether e is no schedule.
func (e Expression) IsZero() bool { return e.text == "" }

// Parse reads an EventBridge schedule expression: "rate(value unit)" or
// "cron(minutes hours day-of-month month day-of-week year)".
func Parse(s string) (Expression, error) {
	if len(s) > MaxLength {
		return Expression{}, invalid("must be at most %d bytes", MaxLength)
	}
	if body, ok := cutCall(s, "rate"); ok {
		every, err := parseRate(body)
		if err != nil {
			return Expression{}, err
		}
		return Expression{text: s, every: every}, nil
	}
	if body, ok := cutCall(s, "cron"); ok {
		c, err := parseCron(body)
		if err != nil {
			return Expression{}, err
		}
		return Expression{text: s, cron: c}, nil
	}
	return Expression{}, invalid(`must be "cron(minutes hours day-of-month month day-of-week year)" or "rate(value unit)", as EventBridge takes them`)
}

func cutCall(s, name string) (string, bool) {
	body, ok := strings.CutPrefix(s, name+"(")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(body, ")")
}

// A rate's value is at most five digits: 99999 days is far less than a
// time.Duration can hold.
const maxRateDigits = 5

func parseRate(body string) (time.Duration, error) {
	value, unit, ok := strings.Cut(body, " ")
	if !ok {
		return 0, invalid(`rate: must be "rate(value unit)", e.g. rate(5 minutes)`)
	}
	if value == "" || len(value) > maxRateDigits || !allDigits(value) || value[0] == '0' {
		return 0, invalid("rate: the value must be a positive whole number of at most %d digits, without leading zeros", maxRateDigits)
	}
	n, _ := strconv.Atoi(value) // digits only, at most five
	var per time.Duration
	switch strings.TrimSuffix(unit, "s") {
	case "minute":
		per = time.Minute
	case "hour":
		per = time.Hour
	case "day":
		per = 24 * time.Hour
	default:
		return 0, invalid("rate: the unit must be minute(s), hour(s) or day(s)")
	}
	if plural := strings.HasSuffix(unit, "s"); plural != (n > 1) {
		return 0, invalid("rate: a value of 1 takes a singular unit (rate(1 hour)) and a larger value a plural one (rate(2 hours))")
	}
	return time.Duration(n) * per, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Latest is the latest time e was due at in (since, now], looking back at
// most lookback before now; ok is false when there is none. since is when
// the schedule was set: a rate is anchored at its minute (rate(1 hour) set
// at 10:17:42 is due at 11:17, 12:17, ...), and nothing at or before it is
// due.
func (e Expression) Latest(since, now time.Time, lookback time.Duration) (t time.Time, ok bool) {
	since, now = since.UTC(), now.UTC()
	after := since
	if low := now.Add(-lookback); low.After(after) {
		after = low
	}
	if !now.After(after) {
		return time.Time{}, false
	}
	switch {
	case e.every > 0:
		anchor := since.Truncate(time.Minute)
		k := now.Sub(anchor) / e.every
		t = anchor.Add(k * e.every)
		return t, k >= 1 && t.After(after)
	case e.cron != nil:
		return e.cron.latest(after, now)
	}
	return time.Time{}, false
}

// Next is the first time e is due after t (for a schedule set at since);
// ok is false when it never is again.
func (e Expression) Next(since, t time.Time) (time.Time, bool) {
	since, t = since.UTC(), t.UTC()
	if t.Before(since) {
		t = since
	}
	switch {
	case e.every > 0:
		anchor := since.Truncate(time.Minute)
		k := t.Sub(anchor)/e.every + 1
		return anchor.Add(k * e.every), true
	case e.cron != nil:
		return e.cron.next(t)
	}
	return time.Time{}, false
}
