package budget

import (
	"errors"
	"math"
	"testing"
)

func TestFromUSD(t *testing.T) {
	t.Parallel()
	tests := []struct {
		usd     float64
		want    Micros
		wantErr error
	}{
		{0, 0, nil},
		{math.Copysign(0, -1), 0, nil},
		{1, 1_000_000, nil},
		{0.05, 50_000, nil},
		{3.75, 3_750_000, nil},
		{0.0000004, 0, nil},       // rounds to nearest: down
		{0.0000005, 1, nil},       // half away from zero: up
		{0.1 + 0.2, 300_000, nil}, // float noise disappears at the micro
		{9.2e12, 9_200_000_000_000_000_000, nil},
		{9.3e12, 0, ErrOverflow},
		{math.MaxFloat64, 0, ErrOverflow},
		{-0.000001, 0, ErrNegative},
		{-1, 0, ErrNegative},
		{math.NaN(), 0, ErrInvalidAmount},
		{math.Inf(1), 0, ErrInvalidAmount},
		{math.Inf(-1), 0, ErrInvalidAmount},
	}
	for _, tt := range tests {
		got, err := FromUSD(tt.usd)
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("FromUSD(%v) = %d, %v, want %d, %v", tt.usd, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestMicrosUSDAndString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		m   Micros
		usd float64
		str string
	}{
		{0, 0, "$0.000000"},
		{1, 0.000001, "$0.000001"},
		{22_137, 0.022137, "$0.022137"},
		{3_000_000, 3, "$3.000000"},
		{-1_500_000, -1.5, "-$1.500000"},
		{math.MinInt64, -9223372036854.775808, "-$9223372036854.775808"},
	}
	for _, tt := range tests {
		if got := tt.m.USD(); got != tt.usd {
			t.Errorf("Micros(%d).USD() = %v, want %v", tt.m, got, tt.usd)
		}
		if got := tt.m.String(); got != tt.str {
			t.Errorf("Micros(%d).String() = %q, want %q", tt.m, got, tt.str)
		}
	}
}

func TestParseDecimalUSD(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Micros
		wantErr bool
	}{
		{"0", 0, false},
		{"3", 3_000_000, false},
		{"0.30", 300_000, false},
		{"18.75", 18_750_000, false},
		{"0.000001", 1, false},
		{"0.0000001", 0, true}, // finer than a micro
		{"", 0, true},
		{"-1", 0, true},
		{"1e3", 0, true},
		{"1.", 0, true},
		{".5", 0, true},
		{"01", 0, true},
		{"1.2.3", 0, true},
		{"9223372036854", 0, true},
		{"99999999999999999999999", 0, true},
	}
	for _, tt := range tests {
		got, err := parseDecimalUSD(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseDecimalUSD(%q) = %d, %v, want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
