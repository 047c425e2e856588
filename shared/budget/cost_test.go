package budget

import (
	"errors"
	"math"
	"math/big"
	"testing"
)

// usd is a test helper: dollars per MTok (exact in the cases used) to Micros.
func usd(t testing.TB, v string) Micros {
	t.Helper()
	m, err := parseDecimalUSD(v)
	if err != nil {
		t.Fatalf("parseDecimalUSD(%q): %v", v, err)
	}
	return m
}

func TestCost(t *testing.T) {
	t.Parallel()
	sonnet45 := Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000, CacheReadPerMTok: 300_000, CacheWritePerMTok: 3_750_000}
	opus45 := Price{InputPerMTok: 5_000_000, OutputPerMTok: 25_000_000, CacheReadPerMTok: 500_000, CacheWritePerMTok: 6_250_000}
	haiku3 := Price{InputPerMTok: 250_000, OutputPerMTok: 1_250_000, CacheReadPerMTok: 30_000, CacheWritePerMTok: 300_000}
	big := Price{InputPerMTok: math.MaxInt64, OutputPerMTok: math.MaxInt64, CacheReadPerMTok: math.MaxInt64, CacheWritePerMTok: math.MaxInt64}
	tests := []struct {
		name    string
		p       Price
		u       Usage
		want    Micros
		wantErr error
	}{
		{"zero usage", sonnet45, Usage{}, 0, nil},
		{"one million input tokens is the list price", sonnet45, Usage{InputTokens: 1_000_000}, 3_000_000, nil},
		{"one million output tokens", opus45, Usage{OutputTokens: 1_000_000}, 25_000_000, nil},
		{"exact, no rounding", opus45, Usage{OutputTokens: 40}, 1_000, nil},
		// 2095*3 + 503*15 + 2051*0.30 + 2051*3.75 = 22136.55 micro-dollars -> 22137.
		{"documented response usage, rounded up", sonnet45,
			Usage{InputTokens: 2095, OutputTokens: 503, CacheReadInputTokens: 2051, CacheCreationInputTokens: 2051}, 22_137, nil},
		{"a quarter micro rounds up to one", haiku3, Usage{InputTokens: 1}, 1, nil},
		{"rounding is on the total, not per field", haiku3, Usage{InputTokens: 2, CacheReadInputTokens: 10}, 1, nil}, // 0.5 + 0.3
		{"cache read only", sonnet45, Usage{CacheReadInputTokens: 1_000_000}, 300_000, nil},
		{"cache write only", sonnet45, Usage{CacheCreationInputTokens: 1_000_000}, 3_750_000, nil},
		{"largest token count at a small price", Price{InputPerMTok: 1, OutputPerMTok: 1}, Usage{InputTokens: math.MaxInt64}, 9_223_372_036_855, nil},
		{"overflow", sonnet45, Usage{InputTokens: math.MaxInt64}, 0, ErrOverflow},
		{"overflow at every field and rate", big, Usage{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, 0, 0, 0}, 0, ErrOverflow},
		{"negative input", sonnet45, Usage{InputTokens: -1}, 0, ErrNegative},
		{"negative cache write", sonnet45, Usage{CacheCreationInputTokens: -5}, 0, ErrNegative},
		{"negative price", Price{InputPerMTok: -1}, Usage{InputTokens: 1}, 0, ErrNegative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Cost(tt.p, tt.u)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Cost(%+v, %+v) = %d, %v, want %d, %v", tt.p, tt.u, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReserve(t *testing.T) {
	t.Parallel()
	sonnet45 := Price{InputPerMTok: 3_000_000, OutputPerMTok: 15_000_000, CacheReadPerMTok: 300_000, CacheWritePerMTok: 3_750_000}
	haiku3 := Price{InputPerMTok: 250_000, OutputPerMTok: 1_250_000, CacheReadPerMTok: 30_000, CacheWritePerMTok: 300_000}
	cheapWrite := Price{InputPerMTok: 2_000_000, OutputPerMTok: 10_000_000, CacheWritePerMTok: 1_000_000}
	tests := []struct {
		name       string
		p          Price
		maxOut, in int64
		want       Micros
		wantErr    error
	}{
		{"nothing", sonnet45, 0, 0, 0, nil},
		// input bound at the cache-write rate 3.75 (above input 3): 10000*3.75 + 1000*15 = 52500.
		{"input priced at the cache-write rate when higher", sonnet45, 1000, 10_000, 52_500, nil},
		{"input priced at the input rate when higher", cheapWrite, 0, 1_000_000, 2_000_000, nil},
		{"output only", sonnet45, 64_000, 0, 960_000, nil},
		{"rounds up", haiku3, 0, 1, 1, nil}, // 0.3 micro
		{"negative output", sonnet45, -1, 0, 0, ErrNegative},
		{"negative input", sonnet45, 0, -1, 0, ErrNegative},
		{"overflow", sonnet45, math.MaxInt64, math.MaxInt64, 0, ErrOverflow},
	}
	for _, tt := range tests {
		got, err := Reserve(tt.p, tt.maxOut, tt.in)
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("%s: Reserve(%+v, %d, %d) = %d, %v, want %d, %v", tt.name, tt.p, tt.maxOut, tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestReserveBoundsCost checks the reservation's promise for every shipped price: any usage
// within the declared bounds (input, cache reads and cache writes together within the input
// bound, output within max_tokens) costs no more than the reservation.
func TestReserveBoundsCost(t *testing.T) {
	t.Parallel()
	prices := DefaultPrices()
	const maxOut, inBound = 8192, 150_000
	splits := []Usage{
		{InputTokens: inBound, OutputTokens: maxOut},
		{CacheCreationInputTokens: inBound, OutputTokens: maxOut},
		{CacheReadInputTokens: inBound, OutputTokens: maxOut},
		{InputTokens: inBound / 3, CacheReadInputTokens: inBound / 3, CacheCreationInputTokens: inBound / 3, OutputTokens: maxOut},
	}
	for _, model := range prices.Models() {
		p, err := prices.Lookup(model)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", model, err)
		}
		r, err := Reserve(p, maxOut, inBound)
		if err != nil {
			t.Fatalf("Reserve(%q): %v", model, err)
		}
		for _, u := range splits {
			c, err := Cost(p, u)
			if err != nil {
				t.Fatalf("Cost(%q, %+v): %v", model, u, err)
			}
			if c > r {
				t.Errorf("%s: Cost(%+v) = %s > Reserve = %s", model, u, c, r)
			}
		}
	}
}

// refCost is Cost computed with math/big, the reference for the fuzz test.
func refCost(p Price, u Usage) *big.Int {
	sum := new(big.Int)
	for _, pair := range [][2]int64{
		{u.InputTokens, int64(p.InputPerMTok)},
		{u.OutputTokens, int64(p.OutputPerMTok)},
		{u.CacheReadInputTokens, int64(p.CacheReadPerMTok)},
		{u.CacheCreationInputTokens, int64(p.CacheWritePerMTok)},
	} {
		sum.Add(sum, new(big.Int).Mul(big.NewInt(pair[0]), big.NewInt(pair[1])))
	}
	d := big.NewInt(1_000_000)
	sum.Add(sum, big.NewInt(999_999))
	return sum.Quo(sum, d)
}

func FuzzCost(f *testing.F) {
	f.Add(int64(2095), int64(503), int64(2051), int64(2051), int64(3_000_000), int64(15_000_000), int64(300_000), int64(3_750_000), uint8(0), int64(1))
	f.Add(int64(1), int64(0), int64(0), int64(0), int64(250_000), int64(1_250_000), int64(30_000), int64(300_000), uint8(1), int64(999_999))
	f.Add(int64(math.MaxInt64), int64(0), int64(0), int64(0), int64(1), int64(1), int64(1), int64(1), uint8(2), int64(0))
	f.Fuzz(func(t *testing.T, in, out, cr, cw, pin, pout, pcr, pcw int64, field uint8, delta int64) {
		p := Price{Micros(pin), Micros(pout), Micros(pcr), Micros(pcw), Micros(pcw), 0}
		u := Usage{in, out, cr, cw, 0, 0, 0}
		c, err := Cost(p, u)
		negative := in < 0 || out < 0 || cr < 0 || cw < 0 || pin < 0 || pout < 0 || pcr < 0 || pcw < 0
		if negative {
			if !errors.Is(err, ErrNegative) {
				t.Fatalf("Cost(%+v, %+v) = %d, %v, want ErrNegative", p, u, c, err)
			}
			return
		}
		ref := refCost(p, u)
		if !ref.IsInt64() {
			if !errors.Is(err, ErrOverflow) {
				t.Fatalf("Cost(%+v, %+v) = %d, %v, want ErrOverflow (exact %v)", p, u, c, err, ref)
			}
		} else if err != nil || int64(c) != ref.Int64() {
			t.Fatalf("Cost(%+v, %+v) = %d, %v, want %v", p, u, c, err, ref)
		}

		// Monotone: more of any one kind of token never costs less.
		if delta < 0 {
			delta = -(delta + 1)
		}
		u2 := u
		fields := []*int64{&u2.InputTokens, &u2.OutputTokens, &u2.CacheReadInputTokens, &u2.CacheCreationInputTokens}
		fp := fields[int(field)%len(fields)]
		if *fp > math.MaxInt64-delta {
			return
		}
		*fp += delta
		c2, err2 := Cost(p, u2)
		switch {
		case err != nil && err2 == nil:
			t.Fatalf("Cost(%+v) overflowed but the larger Cost(%+v) = %d", u, u2, c2)
		case err == nil && err2 == nil && c2 < c:
			t.Fatalf("Cost(%+v) = %d < Cost(%+v) = %d: not monotone", u2, c2, u, c)
		}
	})
}

// TestCostServerToolsAndCacheTTL: 100 web searches cost exactly $1.00 more; 1-hour cache
// writes are billed at the 1-hour rate and the rest of the writes at the 5-minute rate.
func TestCostServerToolsAndCacheTTL(t *testing.T) {
	t.Parallel()
	p, err := DefaultPrices().Lookup("claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	base := Usage{InputTokens: 1000, OutputTokens: 500}
	plain, _ := Cost(p, base)
	searched := base
	searched.WebSearchRequests = 100
	withSearch, _ := Cost(p, searched)
	if withSearch-plain != MicrosPerUSD {
		t.Errorf("100 web searches add %s, want $1.00", withSearch-plain)
	}
	mixed, _ := Cost(p, Usage{CacheCreationInputTokens: 1_000_000, CacheCreation1hInputTokens: 400_000})
	if want := Micros(600_000*3.75 + 400_000*6); mixed != want {
		t.Errorf("600k 5m + 400k 1h cache writes cost %s, want %s", mixed, want)
	}
	over, _ := Cost(p, Usage{CacheCreationInputTokens: 10, CacheCreation1hInputTokens: 1_000_000})
	if over != 6*MicrosPerUSD {
		t.Errorf("a 1h count above the total costs %s, want it counted in full ($6)", over)
	}
	r, _ := ReserveBound(p, Bound{MaxOutputTokens: 0, InputTokens: 1_000_000, WebSearches: 5})
	if r != 6*MicrosPerUSD+50_000 {
		t.Errorf("reserve of 1M input tokens and 5 searches = %s, want the 1h cache rate ($6) plus $0.05", r)
	}
}
