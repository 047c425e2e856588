package budget

import (
	"fmt"
	"math"
	"math/bits"
)

// tokensPerPriceUnit is the number of tokens a Price rate is quoted for (one million).
const tokensPerPriceUnit = 1_000_000

// Usage is what a model response reports it consumed, in the field names of the Anthropic
// Messages API `usage` object (and of our usage endpoint). CacheCreation1hInputTokens is the
// part of CacheCreationInputTokens written with the 1-hour TTL
// (usage.cache_creation.ephemeral_1h_input_tokens); WebSearchRequests and WebFetchRequests
// are usage.server_tool_use's counts.
type Usage struct {
	InputTokens                int64 `json:"input_tokens"`
	OutputTokens               int64 `json:"output_tokens"`
	CacheReadInputTokens       int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens   int64 `json:"cache_creation_input_tokens"`
	CacheCreation1hInputTokens int64 `json:"cache_creation_1h_input_tokens,omitempty"`
	WebSearchRequests          int64 `json:"web_search_requests,omitempty"`
	WebFetchRequests           int64 `json:"web_fetch_requests,omitempty"`
}

// Validate reports ErrNegative if any count is negative.
func (u Usage) Validate() error {
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadInputTokens < 0 || u.CacheCreationInputTokens < 0 ||
		u.CacheCreation1hInputTokens < 0 || u.WebSearchRequests < 0 || u.WebFetchRequests < 0 {
		return fmt.Errorf("budget: usage %+v: %w", u, ErrNegative)
	}
	return nil
}

// Cost prices u at p: the sum over the token kinds of tokens × rate / 1e6 (cache writes split
// into the 1-hour part at the 1-hour rate and the rest at the 5-minute rate; a 1-hour count
// above the total counts in full), plus the web search fee per search, computed exactly in
// 128 bits and rounded up to the next micro-dollar once, on the total. It is monotone in every
// field of u. It rejects negative counts and rates (ErrNegative) and a total
// that does not fit in Micros (ErrOverflow).
func Cost(p Price, u Usage) (Micros, error) {
	if err := u.Validate(); err != nil {
		return 0, err
	}
	if err := p.validate(); err != nil {
		return 0, err
	}
	oneHour := u.CacheCreation1hInputTokens
	fiveMin := max(u.CacheCreationInputTokens-oneHour, 0)
	var acc uint128
	acc.addMul(u.InputTokens, p.InputPerMTok)
	acc.addMul(u.OutputTokens, p.OutputPerMTok)
	acc.addMul(u.CacheReadInputTokens, p.CacheReadPerMTok)
	acc.addMul(fiveMin, p.CacheWritePerMTok)
	acc.addMul(oneHour, p.CacheWrite1hPerMTok)
	acc.addMul(u.WebSearchRequests, p.WebSearchPerUse*tokensPerPriceUnit)
	m, ok := acc.ceilDivToMicros()
	if !ok {
		return 0, fmt.Errorf("budget: cost of %+v: %w", u, ErrOverflow)
	}
	return m, nil
}

// Reserve is the pessimistic amount to book before a request is forwarded: maxOutputTokens at
// the output rate plus inputTokensUpperBound at the highest of the input and both cache-write
// rates (an input token can be billed as a cache write, never above that), rounded up. With a
// genuine upper bound on input (e.g. the request's byte length) and the declared max_tokens,
// the real Cost of the response cannot exceed it.
func Reserve(p Price, maxOutputTokens, inputTokensUpperBound int64) (Micros, error) {
	return ReserveBound(p, Bound{MaxOutputTokens: maxOutputTokens, InputTokens: inputTokensUpperBound})
}

// Bound is an upper bound on everything one request may consume.
type Bound struct {
	MaxOutputTokens int64
	InputTokens     int64
	WebSearches     int64
	// No1hCacheWrite: the request asks for no 1-hour cache write (no
	// cache_control with ttl "1h"), so no input token can be billed at the
	// 1-hour write rate, and input is bounded at the higher of the input and
	// the 5-minute write rates. The zero value assumes the worst: a caller
	// that does not know the request (a runner reporting its own) reserves
	// at the 1-hour rate.
	No1hCacheWrite bool
}

// ReserveBound is Reserve with server-tool fees: b.WebSearches searches at the search fee.
func ReserveBound(p Price, b Bound) (Micros, error) {
	maxOutputTokens, inputTokensUpperBound := b.MaxOutputTokens, b.InputTokens
	if maxOutputTokens < 0 || inputTokensUpperBound < 0 || b.WebSearches < 0 {
		return 0, fmt.Errorf("budget: reserve(max_output_tokens=%d, input_tokens_upper_bound=%d): %w",
			maxOutputTokens, inputTokensUpperBound, ErrNegative)
	}
	if err := p.validate(); err != nil {
		return 0, err
	}
	in := max(p.InputPerMTok, p.CacheWritePerMTok)
	if !b.No1hCacheWrite {
		in = max(in, p.CacheWrite1hPerMTok)
	}
	var acc uint128
	acc.addMul(inputTokensUpperBound, in)
	acc.addMul(maxOutputTokens, p.OutputPerMTok)
	acc.addMul(b.WebSearches, p.WebSearchPerUse*tokensPerPriceUnit)
	m, ok := acc.ceilDivToMicros()
	if !ok {
		return 0, fmt.Errorf("budget: reserve(max_output_tokens=%d, input_tokens_upper_bound=%d): %w",
			maxOutputTokens, inputTokensUpperBound, ErrOverflow)
	}
	return m, nil
}

// uint128 accumulates products of two non-negative int64s; the few of them summed here (each
// < 2^126) cannot overflow 128 bits, so addMul needs no overflow check.
type uint128 struct{ hi, lo uint64 }

func (a *uint128) addMul(tokens int64, rate Micros) {
	hi, lo := bits.Mul64(uint64(tokens), uint64(rate))
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi, _ = bits.Add64(a.hi, hi, carry)
}

// ceilDivToMicros returns ceil(a / 1e6) if it fits in a non-negative int64.
func (a uint128) ceilDivToMicros() (Micros, bool) {
	const d = tokensPerPriceUnit
	if a.hi >= d { // quotient would not fit in 64 bits (and bits.Div64 would panic)
		return 0, false
	}
	q, r := bits.Div64(a.hi, a.lo, d)
	if r != 0 {
		if q == math.MaxUint64 {
			return 0, false
		}
		q++
	}
	if q > math.MaxInt64 {
		return 0, false
	}
	return Micros(q), true
}
