package budget

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
)

// ErrUnknownModel reports a model that has no price. fluidbox refuses such a model rather
// than pricing it at zero.
var ErrUnknownModel = errors.New("budget: unknown model")

// ErrInvalidPrices reports a price file that ParsePrices rejects.
var ErrInvalidPrices = errors.New("budget: invalid price table")

// Price is what one model costs, in micro-USD per million tokens ($3/MTok = 3_000_000).
// CacheWritePerMTok is the 5-minute cache-write rate, the one `cache_creation_input_tokens`
// is billed at unless the request asked for a 1-hour cache.
type Price struct {
	InputPerMTok      Micros
	OutputPerMTok     Micros
	CacheReadPerMTok  Micros
	CacheWritePerMTok Micros
}

func (p Price) validate() error {
	if p.InputPerMTok < 0 || p.OutputPerMTok < 0 || p.CacheReadPerMTok < 0 || p.CacheWritePerMTok < 0 {
		return fmt.Errorf("budget: price %+v: %w", p, ErrNegative)
	}
	return nil
}

// Prices is an immutable price table keyed by the exact model id a request names (aliases
// such as "claude-sonnet-4-5" and dated ids such as "claude-sonnet-4-5-20250929" are separate
// keys with the same price). Build one with DefaultPrices, ParsePrices or Merge.
type Prices struct {
	byModel map[string]Price
	source  string
}

//go:embed prices.json
var defaultPricesJSON []byte

// DefaultPrices returns the table shipped in prices.json (its "_source" names where each rate
// was checked). The file is validated by the package's tests, so an error here means the
// binary was built from a broken file; DefaultPrices then returns an empty table, which
// refuses every model rather than pricing any at zero.
func DefaultPrices() *Prices { return defaultPrices() }

// defaultPrices parses the embedded file once; sharing the result is safe as a table is
// never modified after it is built.
var defaultPrices = sync.OnceValue(func() *Prices {
	p, err := ParsePrices(defaultPricesJSON)
	if err != nil {
		return &Prices{byModel: map[string]Price{}, source: "invalid embedded prices.json: " + err.Error()}
	}
	return p
})

// Lookup returns the price of model, or an error wrapping ErrUnknownModel. Matching is exact:
// a model the table does not name is refused, never guessed from a prefix.
func (p *Prices) Lookup(model string) (Price, error) {
	if p != nil {
		if price, ok := p.byModel[model]; ok {
			return price, nil
		}
	}
	return Price{}, fmt.Errorf("budget: price of model %q: %w", model, ErrUnknownModel)
}

// Merge returns a new table: p with every model of override added or replaced by override's
// price. Neither input is modified. A nil override returns p.
func (p *Prices) Merge(override *Prices) *Prices {
	if override == nil {
		return p
	}
	out := &Prices{byModel: make(map[string]Price, p.len()+override.len())}
	if p != nil {
		maps.Copy(out.byModel, p.byModel)
		out.source = p.source
	}
	maps.Copy(out.byModel, override.byModel)
	if override.source != "" {
		out.source = strings.TrimSpace(out.source + "; override: " + override.source)
	}
	return out
}

// Models returns every model id the table prices, sorted.
func (p *Prices) Models() []string {
	if p == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.byModel))
}

// Source returns the table's "_source" text (with overrides appended by Merge).
func (p *Prices) Source() string {
	if p == nil {
		return ""
	}
	return p.source
}

func (p *Prices) len() int {
	if p == nil {
		return 0
	}
	return len(p.byModel)
}

// maxRatePerMTok bounds a single rate so that a typo (an extra few zeros) fails to parse
// rather than booking absurd amounts: $100,000 per million tokens.
const maxRatePerMTok = 100_000 * MicrosPerUSD

// ParsePrices parses a price table in the format of prices.json:
//
//	{
//	  "_source": "where the rates come from",
//	  "models": {
//	    "claude-sonnet-4-5": {
//	      "aliases": ["claude-sonnet-4-5-20250929"],
//	      "input_usd_per_mtok": 3, "output_usd_per_mtok": 15,
//	      "cache_read_usd_per_mtok": 0.30, "cache_write_usd_per_mtok": 3.75
//	    }
//	  }
//	}
//
// Rates are USD per million tokens written as plain decimals with at most six fractional
// digits, parsed exactly. It is strict: unknown fields, duplicate keys, a missing rate, a zero
// input or output rate, a negative or absurd rate, a name or alias given twice, and trailing
// data are errors (wrapping ErrInvalidPrices). Keys starting with "_" are comments and must
// hold strings.
func ParsePrices(data []byte) (*Prices, error) {
	p, err := parsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPrices, err)
	}
	return p, nil
}

type priceEntry struct {
	aliases []string
	rates   [4]*Micros // input, output, cache read, cache write
}

var rateFields = [4]string{"input_usd_per_mtok", "output_usd_per_mtok", "cache_read_usd_per_mtok", "cache_write_usd_per_mtok"}

func parsePrices(data []byte) (*Prices, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out := &Prices{byModel: map[string]Price{}}
	sawModels := false
	err := decodeObject(dec, func(key string) error {
		switch {
		case key == "models":
			sawModels = true
			return decodeObject(dec, func(model string) error {
				if err := checkModelName(model); err != nil {
					return err
				}
				e, err := decodeEntry(dec)
				if err != nil {
					return fmt.Errorf("model %q: %w", model, err)
				}
				price := Price{*e.rates[0], *e.rates[1], *e.rates[2], *e.rates[3]}
				for _, name := range append([]string{model}, e.aliases...) {
					if _, dup := out.byModel[name]; dup {
						return fmt.Errorf("model %q is named twice", name)
					}
					out.byModel[name] = price
				}
				return nil
			})
		case key == "_source":
			return dec.Decode(&out.source)
		case strings.HasPrefix(key, "_"):
			var comment string
			return dec.Decode(&comment)
		default:
			return fmt.Errorf("unknown field %q", key)
		}
	})
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the table")
	}
	if !sawModels || len(out.byModel) == 0 {
		return nil, errors.New(`no "models"`)
	}
	return out, nil
}

func decodeEntry(dec *json.Decoder) (priceEntry, error) {
	var e priceEntry
	err := decodeObject(dec, func(key string) error {
		if key == "aliases" {
			if e.aliases != nil {
				return errors.New(`duplicate "aliases"`)
			}
			var aliases []string
			if err := dec.Decode(&aliases); err != nil {
				return fmt.Errorf("aliases: %w", err)
			}
			for _, a := range aliases {
				if err := checkModelName(a); err != nil {
					return err
				}
			}
			e.aliases = append([]string{}, aliases...)
			return nil
		}
		if strings.HasPrefix(key, "_") {
			var comment string
			return dec.Decode(&comment)
		}
		i := slices.Index(rateFields[:], key)
		if i < 0 {
			return fmt.Errorf("unknown field %q", key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		// parseDecimalUSD accepts only digits and one '.', so a string, null or exponent
		// form is refused here rather than coerced.
		m, err := parseDecimalUSD(string(raw))
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if m > maxRatePerMTok {
			return fmt.Errorf("%s: %s per million tokens is above the sanity limit %s", key, m, Micros(maxRatePerMTok))
		}
		e.rates[i] = &m
		return nil
	})
	if err != nil {
		return e, err
	}
	for i, r := range e.rates {
		if r == nil {
			return e, fmt.Errorf("missing %s", rateFields[i])
		}
	}
	if *e.rates[0] == 0 || *e.rates[1] == 0 {
		return e, errors.New("input and output rates must be above zero (an unpriced model is refused, not free)")
	}
	return e, nil
}

// decodeObject reads one JSON object from dec, calling field for each key with the decoder
// positioned at the key's value; field must consume exactly that value. Duplicate keys are an
// error, unlike encoding/json's last-one-wins.
func decodeObject(dec *json.Decoder, field func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("want an object, got %v", tok)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("want a key, got %v", tok)
		}
		if seen[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		if err := field(key); err != nil {
			return err
		}
	}
	_, err = dec.Token() // the closing '}'; More returned false, so it is there or an error
	return err
}

func checkModelName(name string) error {
	if name == "" || len(name) > 200 {
		return fmt.Errorf("model name %q: want 1 to 200 characters", name)
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return fmt.Errorf("model name %q: want printable ASCII without spaces", name)
		}
	}
	return nil
}
