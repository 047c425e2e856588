// Package budget prices model usage in integer micro-dollars.
//
// It guarantees that money is never a float once it is inside fluidbox: every amount is an
// integer number of micro-USD (Micros), every multiplication is done in 128 bits, and every
// division rounds in the direction that protects the run's budget — up, for both a reservation
// and a real cost. A model that is not in the price table is an error (ErrUnknownModel), never a
// zero price. The package is pure: no I/O, no clock, no globals that change.
//
// It also extracts the usage that a model response reports (UsageFromBody for JSON, StreamUsage
// for a server-sent-event stream fed as it passes through the proxy), so the model proxy can
// reconcile a reservation with what the upstream actually billed.
package budget

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Micros is an amount of money in integer micro-USD (1 USD = 1_000_000 Micros).
//
// It is signed because a run's available balance can go below zero when a real cost exceeds
// its reservation; prices, costs and reservations produced by this package are never negative.
type Micros int64

// MicrosPerUSD is the number of Micros in one US dollar.
const MicrosPerUSD = 1_000_000

var (
	// ErrOverflow reports an amount that does not fit in Micros (about 9.2e12 USD).
	ErrOverflow = errors.New("budget: amount overflows")
	// ErrNegative reports a negative token count or amount where none is allowed.
	ErrNegative = errors.New("budget: negative value")
	// ErrInvalidAmount reports a NaN or infinite dollar amount.
	ErrInvalidAmount = errors.New("budget: invalid amount")
)

// USD returns m in dollars, for display and for the JSON of the API (`reserved_usd`,
// `cost_usd`). It is exact for every amount below 2^53 micros (about 9 billion USD).
func (m Micros) USD() float64 { return float64(m) / MicrosPerUSD }

// String formats m as dollars with six decimals, e.g. "$0.012345" or "-$1.000000".
func (m Micros) String() string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign = "-"
		u = -u // two's complement magnitude; correct for math.MinInt64 too
	}
	return fmt.Sprintf("%s$%d.%06d", sign, u/MicrosPerUSD, u%MicrosPerUSD)
}

// FromUSD converts a dollar amount to Micros, rounding to the nearest micro (half away from
// zero). It rejects NaN, infinities, negative amounts and amounts that do not fit.
func FromUSD(usd float64) (Micros, error) {
	switch {
	case math.IsNaN(usd) || math.IsInf(usd, 0):
		return 0, fmt.Errorf("budget: %v USD: %w", usd, ErrInvalidAmount)
	case usd < 0:
		return 0, fmt.Errorf("budget: %v USD: %w", usd, ErrNegative)
	}
	v := math.Round(usd * MicrosPerUSD)
	// 2^63 is exactly representable; any float >= it does not fit in an int64.
	if v >= math.Ldexp(1, 63) {
		return 0, fmt.Errorf("budget: %v USD: %w", usd, ErrOverflow)
	}
	return Micros(v), nil
}

// parseDecimalUSD parses a non-negative decimal dollar amount with at most six fractional
// digits ("3", "0.30", "18.75") exactly, without going through a float.
func parseDecimalUSD(s string) (Micros, error) {
	if s == "" {
		return 0, errors.New("empty amount")
	}
	whole, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			whole, frac = s[:i], s[i+1:]
			break
		}
	}
	if whole == "" || !allDigits(whole) || (len(whole) > 1 && whole[0] == '0') {
		return 0, fmt.Errorf("amount %q: want a plain non-negative decimal such as 3 or 0.30", s)
	}
	if len(s) != len(whole) && (frac == "" || !allDigits(frac)) {
		return 0, fmt.Errorf("amount %q: want a plain non-negative decimal such as 3 or 0.30", s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("amount %q: more than six decimals (finer than a micro-dollar)", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/MicrosPerUSD-1 {
		return 0, fmt.Errorf("amount %q: %w", s, ErrOverflow)
	}
	f := int64(0)
	if frac != "" {
		padded := frac + "000000"[len(frac):]
		f, _ = strconv.ParseInt(padded, 10, 64) // six digits: cannot fail
	}
	return Micros(w*MicrosPerUSD + f), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
