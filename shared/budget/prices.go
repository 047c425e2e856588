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
// CacheWritePerMTok is the 5-minute cache-write rate; CacheWrite1hPerMTok the 1-hour one,
// which `usage.cache_creation.ephemeral_1h_input_tokens` is billed at. WebSearchPerUse is the
// fee of one server-side web search, in micro-USD.
type Price struct {
	InputPerMTok        Micros
	OutputPerMTok       Micros
	CacheReadPerMTok    Micros
	CacheWritePerMTok   Micros
	CacheWrite1hPerMTok Micros
	WebSearchPerUse     Micros
}

func (p Price) validate() error {
	if p.InputPerMTok < 0 || p.OutputPerMTok < 0 || p.CacheReadPerMTok < 0 || p.CacheWritePerMTok < 0 ||
		p.CacheWrite1hPerMTok < 0 || p.WebSearchPerUse < 0 {
		return fmt.Errorf("budget: price %+v: %w", p, ErrNegative)
	}
	return nil
}

// Model is one entry of the table: its Price, and what bounds a request to it.
type Model struct {
	// Name is the table's own name for the model; an alias resolves to it,
	// so a response naming the dated id of an admitted alias is the same model.
	Name  string
	Price Price
	// ContextWindow is the most input tokens one sampling step can read.
	ContextWindow int64
	// USMultiplierPermille scales every rate for inference_geo "us" (1100 =
	// 1.1x); 0 means the table does not price US-only inference for it.
	USMultiplierPermille int64
}

// DefaultContextWindow is assumed for a model whose entry names none: the
// largest window Anthropic's models offer, so a bound taken from it is never short.
const DefaultContextWindow = 1_000_000

// Scale returns p with every rate multiplied by permille/1000, rounded up.
func (p Price) Scale(permille int64) Price {
	up := func(m Micros) Micros { return Micros((int64(m)*permille + 999) / 1000) }
	return Price{up(p.InputPerMTok), up(p.OutputPerMTok), up(p.CacheReadPerMTok), up(p.CacheWritePerMTok),
		up(p.CacheWrite1hPerMTok), up(p.WebSearchPerUse)}
}

// Prices is an immutable price table keyed by the exact model id a request names (aliases
// such as "claude-sonnet-4-5" and dated ids such as "claude-sonnet-4-5-20250929" are separate
// keys with the same price). Build one with DefaultPrices, ParsePrices or Merge.
type Prices struct {
	byModel map[string]Model
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
		return &Prices{byModel: map[string]Model{}, source: "invalid embedded prices.json: " + err.Error()}
	}
	return p
})

// Lookup returns the price of model, or an error wrapping ErrUnknownModel. Matching is exact:
// a model the table does not name is refused, never guessed from a prefix.
func (p *Prices) Lookup(model string) (Price, error) {
	m, err := p.Model(model)
	return m.Price, err
}

// Model returns the whole entry of model, or an error wrapping ErrUnknownModel.
func (p *Prices) Model(model string) (Model, error) {
	if p != nil {
		if m, ok := p.byModel[model]; ok {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("budget: price of model %q: %w", model, ErrUnknownModel)
}

// Merge returns a new table: p with every model of override added or replaced by override's
// price. Neither input is modified. A nil override returns p.
func (p *Prices) Merge(override *Prices) *Prices {
	if override == nil {
		return p
	}
	out := &Prices{byModel: make(map[string]Model, p.len()+override.len())}
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
//	      "cache_read_usd_per_mtok": 0.30, "cache_write_usd_per_mtok": 3.75,
//	      "cache_write_1h_usd_per_mtok": 6, "context_window_tokens": 1000000,
//	      "us_inference_multiplier": 1.1
//	    }
//	  },
//	  "server_tools": {"web_search_usd_per_1k": 10}
//	}
//
// Rates are USD per million tokens written as plain decimals with at most six fractional
// digits, parsed exactly. cache_write_1h_usd_per_mtok defaults to twice the input rate (the
// rule Anthropic's pricing states), context_window_tokens to DefaultContextWindow; without
// us_inference_multiplier a request for US-only inference is refused. The web search fee
// applies to every model of the table (default: $10 per 1,000). It is strict: unknown fields, duplicate keys, a missing rate, a zero
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
	rates   [5]*Micros // input, output, cache read, cache write, 1h cache write
	window  int64
	us      int64 // permille
}

var rateFields = [5]string{"input_usd_per_mtok", "output_usd_per_mtok", "cache_read_usd_per_mtok", "cache_write_usd_per_mtok", "cache_write_1h_usd_per_mtok"}

// defaultWebSearchPerUse is $10 per 1,000 searches.
const defaultWebSearchPerUse = 10 * MicrosPerUSD / 1000

func parsePrices(data []byte) (*Prices, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	out := &Prices{byModel: map[string]Model{}}
	sawModels := false
	webSearch := Micros(defaultWebSearchPerUse)
	err := decodeObject(dec, func(key string) error {
		switch {
		case key == "server_tools":
			return decodeObject(dec, func(k string) error {
				if k != "web_search_usd_per_1k" {
					return fmt.Errorf("server_tools: unknown field %q", k)
				}
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return err
				}
				m, err := parseDecimalUSD(string(raw))
				if err != nil {
					return fmt.Errorf("server_tools.%s: %w", k, err)
				}
				if m%1000 != 0 {
					return fmt.Errorf("server_tools.%s: must be a whole number of micro-dollars per search", k)
				}
				webSearch = m / 1000
				return nil
			})
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
				entry := Model{Name: model, Price: Price{*e.rates[0], *e.rates[1], *e.rates[2], *e.rates[3], *e.rates[4], 0},
					ContextWindow: e.window, USMultiplierPermille: e.us}
				for _, name := range append([]string{model}, e.aliases...) {
					if _, dup := out.byModel[name]; dup {
						return fmt.Errorf("model %q is named twice", name)
					}
					out.byModel[name] = entry
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
	for name, m := range out.byModel {
		m.Price.WebSearchPerUse = webSearch
		out.byModel[name] = m
	}
	return out, nil
}

func decodeEntry(dec *json.Decoder) (priceEntry, error) {
	var e priceEntry
	err := decodeObject(dec, func(key string) error {
		switch {
		case key == "aliases":
			return e.decodeAliases(dec)
		case strings.HasPrefix(key, "_"):
			var comment string
			return dec.Decode(&comment)
		case key == "context_window_tokens":
			return e.decodeWindow(dec)
		case key == "us_inference_multiplier":
			return e.decodeUSMultiplier(dec)
		}
		return e.decodeRate(dec, key)
	})
	if err != nil {
		return e, err
	}
	if e.rates[4] == nil && e.rates[0] != nil {
		twice := 2 * *e.rates[0]
		e.rates[4] = &twice
	}
	for i, r := range e.rates {
		if r == nil {
			return e, fmt.Errorf("missing %s", rateFields[i])
		}
	}
	if e.window == 0 {
		e.window = DefaultContextWindow
	}
	if *e.rates[0] == 0 || *e.rates[1] == 0 {
		return e, errors.New("input and output rates must be above zero (an unpriced model is refused, not free)")
	}
	return e, nil
}

func (e *priceEntry) decodeAliases(dec *json.Decoder) error {
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

func (e *priceEntry) decodeWindow(dec *json.Decoder) error {
	if e.window != 0 {
		return errors.New("duplicate context_window_tokens")
	}
	var n int64
	if err := dec.Decode(&n); err != nil || n < 1 || n > 100_000_000 {
		return errors.New("context_window_tokens: want a positive integer")
	}
	e.window = n
	return nil
}

func (e *priceEntry) decodeUSMultiplier(dec *json.Decoder) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	m, err := parseDecimalUSD(string(raw))
	if err != nil || m < MicrosPerUSD || m > 10*MicrosPerUSD || m%1000 != 0 {
		return errors.New("us_inference_multiplier: want a decimal from 1 to 10 with at most three fractional digits")
	}
	e.us = int64(m / 1000)
	return nil
}

// decodeRate reads the rate named key, one of rateFields.
func (e *priceEntry) decodeRate(dec *json.Decoder, key string) error {
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
