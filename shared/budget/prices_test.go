package budget

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultPrices(t *testing.T) {
	t.Parallel()
	// The embedded file must parse: DefaultPrices hides a parse error behind an empty table.
	if _, err := ParsePrices(defaultPricesJSON); err != nil {
		t.Fatalf("ParsePrices(prices.json) = %v", err)
	}
	p := DefaultPrices()
	if !strings.Contains(p.Source(), "platform.claude.com/docs/en/about-claude/pricing") {
		t.Errorf("DefaultPrices().Source() = %q, want it to cite the pricing page", p.Source())
	}
	m := func(v string) Micros { return usd(t, v) }
	tests := []struct {
		model string
		want  Price
	}{
		{"claude-opus-4-5", Price{m("5"), m("25"), m("0.50"), m("6.25"), 2 * m("5"), 10_000}},
		{"claude-opus-4-5-20251101", Price{m("5"), m("25"), m("0.50"), m("6.25"), 2 * m("5"), 10_000}},
		{"claude-sonnet-4-5", Price{m("3"), m("15"), m("0.30"), m("3.75"), 2 * m("3"), 10_000}},
		{"claude-sonnet-4-5-20250929", Price{m("3"), m("15"), m("0.30"), m("3.75"), 2 * m("3"), 10_000}},
		{"claude-haiku-4-5", Price{m("1"), m("5"), m("0.10"), m("1.25"), 2 * m("1"), 10_000}},
		{"claude-haiku-4-5-20251001", Price{m("1"), m("5"), m("0.10"), m("1.25"), 2 * m("1"), 10_000}},
		{"claude-opus-4-1", Price{m("15"), m("75"), m("1.50"), m("18.75"), 2 * m("15"), 10_000}},
		{"claude-opus-4-1-20250805", Price{m("15"), m("75"), m("1.50"), m("18.75"), 2 * m("15"), 10_000}},
		{"claude-opus-4-20250514", Price{m("15"), m("75"), m("1.50"), m("18.75"), 2 * m("15"), 10_000}},
		{"claude-sonnet-4-20250514", Price{m("3"), m("15"), m("0.30"), m("3.75"), 2 * m("3"), 10_000}},
		{"claude-3-5-haiku-20241022", Price{m("0.80"), m("4"), m("0.08"), m("1"), 2 * m("0.80"), 10_000}},
		{"claude-3-haiku-20240307", Price{m("0.25"), m("1.25"), m("0.03"), m("0.30"), 2 * m("0.25"), 10_000}},
		{"claude-opus-4-6", Price{m("5"), m("25"), m("0.50"), m("6.25"), 2 * m("5"), 10_000}},
		{"claude-sonnet-4-6", Price{m("3"), m("15"), m("0.30"), m("3.75"), 2 * m("3"), 10_000}},
		{"claude-opus-5", Price{m("5"), m("25"), m("0.50"), m("6.25"), 2 * m("5"), 10_000}},
		{"claude-sonnet-5", Price{m("2"), m("10"), m("0.20"), m("2.50"), 2 * m("2"), 10_000}},
		{"claude-fable-5-1", Price{m("10"), m("50"), m("0.25"), m("12.50"), 2 * m("10"), 10_000}},
	}
	for _, tt := range tests {
		got, err := p.Lookup(tt.model)
		if err != nil {
			t.Errorf("Lookup(%q) = %v", tt.model, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Lookup(%q) mismatch (-want +got):\n%s", tt.model, diff)
		}
	}
	for _, model := range p.Models() {
		price, _ := p.Lookup(model)
		if price.InputPerMTok <= 0 || price.OutputPerMTok <= 0 || price.CacheReadPerMTok <= 0 || price.CacheWritePerMTok <= 0 {
			t.Errorf("Lookup(%q) = %+v, want every shipped rate above zero", model, price)
		}
		if price.CacheReadPerMTok > price.InputPerMTok || price.CacheWritePerMTok < price.InputPerMTok {
			t.Errorf("Lookup(%q) = %+v, want cache read <= input <= cache write", model, price)
		}
	}
}

func TestLookupUnknownModel(t *testing.T) {
	t.Parallel()
	p := DefaultPrices()
	for _, model := range []string{"", "gpt-4o", "claude-sonnet-4-5-20990101", "CLAUDE-SONNET-4-5", "claude-sonnet-4-5 ", "claude-haiku-5-5", "claude"} {
		got, err := p.Lookup(model)
		if !errors.Is(err, ErrUnknownModel) || got != (Price{}) {
			t.Errorf("Lookup(%q) = %+v, %v, want ErrUnknownModel", model, got, err)
		}
	}
	var nilPrices *Prices
	if _, err := nilPrices.Lookup("claude-opus-4-5"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("(*Prices)(nil).Lookup = %v, want ErrUnknownModel", err)
	}
}

func TestParsePricesRejects(t *testing.T) {
	t.Parallel()
	const rates = `"input_usd_per_mtok": 3, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75`
	tests := []struct {
		name, data string
	}{
		{"empty", ``},
		{"not an object", `[]`},
		{"no models", `{"_source": "x"}`},
		{"empty models", `{"models": {}}`},
		{"unknown top-level field", `{"models": {"m": {` + rates + `}}, "currency": "EUR"}`},
		{"unknown model field", `{"models": {"m": {` + rates + `, "batch": 1}}}`},
		{"duplicate model", `{"models": {"m": {` + rates + `}, "m": {` + rates + `}}}`},
		{"duplicate field", `{"models": {"m": {` + rates + `, "input_usd_per_mtok": 1}}}`},
		{"alias of another model", `{"models": {"a": {` + rates + `}, "b": {"aliases": ["a"], ` + rates + `}}}`},
		{"alias twice", `{"models": {"a": {"aliases": ["x", "x"], ` + rates + `}}}`},
		{"missing rate", `{"models": {"m": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3}}}`},
		{"zero input", `{"models": {"m": {"input_usd_per_mtok": 0, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"zero output", `{"models": {"m": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 0, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"negative", `{"models": {"m": {"input_usd_per_mtok": -3, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"exponent", `{"models": {"m": {"input_usd_per_mtok": 3e0, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"string rate", `{"models": {"m": {"input_usd_per_mtok": "3", "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"finer than a micro", `{"models": {"m": {"input_usd_per_mtok": 3.0000001, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"absurd rate", `{"models": {"m": {"input_usd_per_mtok": 3000000, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"null rate", `{"models": {"m": {"input_usd_per_mtok": null, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`},
		{"space in name", `{"models": {"claude sonnet": {` + rates + `}}}`},
		{"empty name", `{"models": {"": {` + rates + `}}}`},
		{"comment not a string", `{"_source": 1, "models": {"m": {` + rates + `}}}`},
		{"trailing data", `{"models": {"m": {` + rates + `}}} {}`},
		{"truncated", `{"models": {"m": {` + rates},
	}
	for _, tt := range tests {
		got, err := ParsePrices([]byte(tt.data))
		if !errors.Is(err, ErrInvalidPrices) || got != nil {
			t.Errorf("%s: ParsePrices(%s) = %v, %v, want ErrInvalidPrices", tt.name, tt.data, got, err)
		}
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	base := DefaultPrices()
	override, err := ParsePrices([]byte(`{
		"_source": "operator contract 2026",
		"models": {
			"claude-sonnet-4-5": {"input_usd_per_mtok": 2.5, "output_usd_per_mtok": 12.5, "cache_read_usd_per_mtok": 0.25, "cache_write_usd_per_mtok": 3.125},
			"claude-haiku-5-5": {"aliases": ["claude-haiku-5-5-flat"], "input_usd_per_mtok": 0.5, "output_usd_per_mtok": 2.5, "cache_read_usd_per_mtok": 0.05, "cache_write_usd_per_mtok": 0.625}
		}}`))
	if err != nil {
		t.Fatalf("ParsePrices(override) = %v", err)
	}
	merged := base.Merge(override)

	if got, _ := merged.Lookup("claude-sonnet-4-5"); got.InputPerMTok != 2_500_000 {
		t.Errorf("merged.Lookup(claude-sonnet-4-5).InputPerMTok = %d, want 2500000", got.InputPerMTok)
	}
	// Only the key named is overridden: the dated id keeps the shipped price.
	if got, _ := merged.Lookup("claude-sonnet-4-5-20250929"); got.InputPerMTok != 3_000_000 {
		t.Errorf("merged.Lookup(claude-sonnet-4-5-20250929).InputPerMTok = %d, want 3000000", got.InputPerMTok)
	}
	for _, model := range []string{"claude-haiku-5-5", "claude-haiku-5-5-flat", "claude-opus-4-5"} {
		if _, err := merged.Lookup(model); err != nil {
			t.Errorf("merged.Lookup(%q) = %v", model, err)
		}
	}
	// Immutability: neither input changed.
	if got, _ := base.Lookup("claude-sonnet-4-5"); got.InputPerMTok != 3_000_000 {
		t.Errorf("base changed by Merge: %+v", got)
	}
	if _, err := base.Lookup("claude-haiku-5-5"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("base.Lookup(claude-haiku-5-5) = %v after Merge, want ErrUnknownModel", err)
	}
	if _, err := override.Lookup("claude-opus-4-5"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("override gained base models: %v", err)
	}
	if !strings.Contains(merged.Source(), "operator contract 2026") {
		t.Errorf("merged.Source() = %q, want the override's source", merged.Source())
	}
	if got := base.Merge(nil); got != base {
		t.Errorf("Merge(nil) returned a different table")
	}
	var nilBase *Prices
	if _, err := nilBase.Merge(override).Lookup("claude-haiku-5-5"); err != nil {
		t.Errorf("nil.Merge(override).Lookup = %v", err)
	}
}

func FuzzParsePrices(f *testing.F) {
	f.Add(defaultPricesJSON)
	f.Add([]byte(`{"models": {"m": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15, "cache_read_usd_per_mtok": 0.3, "cache_write_usd_per_mtok": 3.75}}}`))
	f.Add([]byte(`{"models": {"m": {"aliases": ["n"], "input_usd_per_mtok": 0.000001, "output_usd_per_mtok": 100000, "cache_read_usd_per_mtok": 0, "cache_write_usd_per_mtok": 0}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePrices(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidPrices) || p != nil {
				t.Fatalf("ParsePrices = %v, %v: an error must wrap ErrInvalidPrices and return no table", p, err)
			}
			return
		}
		models := p.Models()
		if len(models) == 0 {
			t.Fatalf("ParsePrices accepted a table with no models")
		}
		for _, model := range models {
			price, err := p.Lookup(model)
			if err != nil {
				t.Fatalf("Lookup(%q) = %v for a listed model", model, err)
			}
			if price.InputPerMTok <= 0 || price.OutputPerMTok <= 0 || price.CacheReadPerMTok < 0 || price.CacheWritePerMTok < 0 ||
				max(price.InputPerMTok, price.OutputPerMTok, price.CacheReadPerMTok, price.CacheWritePerMTok) > maxRatePerMTok {
				t.Fatalf("Lookup(%q) = %+v: a rate out of range was accepted", model, price)
			}
			if _, err := Cost(price, Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheReadInputTokens: 1_000_000, CacheCreationInputTokens: 1_000_000}); err != nil {
				t.Fatalf("Cost at an accepted price = %v", err)
			}
		}
	})
}
