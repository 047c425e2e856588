// Package admission books and settles a run's model spending: the durable,
// request-keyed reservations behind stage 1 of the gate (docs/architecture.md, "Budget").
//
// What it guarantees:
//   - No overdraft by admission. A reservation is booked in the same ledger
//     append (one TransactWriteItems) as the run's head change, conditioned
//     on available >= amount, so two concurrent requests can never both pass
//     on the same remaining money. What does not fit writes nothing.
//   - One reservation per request id. The reservation is put with
//     attribute_not_exists; the same request id again is answered with the
//     same reservation and appends nothing; with a different model or
//     bounds it is a conflict.
//   - One settlement per reservation. Closing writes the usage entry under
//     the reservation's own key (attribute_not_exists) and flips the
//     reservation from open in the same transaction, so a retried, late or
//     concurrent reconciliation, and the sweep, change nothing once one of
//     them has won; the loser is answered with the recorded cost.
//   - The real cost is booked even when it exceeds the reservation, taking
//     available below zero; stage 1 then denies every further tool call.
//   - Unknown models are refused, never priced at zero, and a reservation
//     keeps the price it was booked at.
//   - One meter: a reservation the model proxy booked is settled only by the
//     proxy (Reconcile/Settle) and the sweep; a runner's report
//     (ReconcileReported) on it is refused, so nothing a sandbox holds can
//     lower what its requests cost. A settlement that fails on the request
//     path is retried in the background before the sweep books it in full.
//   - Only ids, the model name, token counts and money reach the ledger.
package admission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrBudgetExhausted: the reservation does not fit the run's available budget.
	ErrBudgetExhausted = errors.New("admission: budget exhausted")
	// ErrUnknownModel: the model has no price; it is refused.
	ErrUnknownModel = fmt.Errorf("admission: %w", budget.ErrUnknownModel)
	// ErrConflict: the request id was already admitted with other parameters.
	ErrConflict = errors.New("admission: request_id reused with different parameters")
	// ErrRunNotFound: there is no such run.
	ErrRunNotFound = errors.New("admission: run not found")
	// ErrReservationNotFound: no reservation has that request id.
	ErrReservationNotFound = errors.New("admission: reservation not found")
	// ErrSessionEnded: the run has ended and admits nothing more.
	ErrSessionEnded = errors.New("admission: session ended")
	// ErrProxyReservation: a runner reported usage for a reservation the
	// model proxy booked, which only the proxy settles.
	ErrProxyReservation = errors.New("admission: reservation booked by the model proxy")
)

// InvalidError is a malformed request; Message names the field, never a value.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return e.Message }

// Settlement says how a reservation was closed. Values are persisted and on
// the wire (the budget.reconciled event): never rename.
type Settlement string

const (
	// SettlementUsage: closed at the cost of the usage the upstream reported.
	SettlementUsage Settlement = "usage"
	// SettlementPartial: a stream ended early (cut, failed or abandoned by
	// the client) after reporting usage; closed at what was seen.
	SettlementPartial Settlement = "partial"
	// SettlementPessimistic: no usage could be seen; closed at the full
	// reservation.
	SettlementPessimistic Settlement = "pessimistic"
	// SettlementReleased: the upstream refused the request outright (an
	// error answer, or the connection could not even be opened), which is
	// not billed; closed at zero.
	SettlementReleased Settlement = "released"
	// SettlementSwept: never reconciled in time; the sweep closed it at the
	// full reservation.
	SettlementSwept Settlement = "swept"
)

// Request is the body of POST /v1/sessions/{id}/admissions.
type Request struct {
	RequestID             string `json:"request_id"`
	Model                 string `json:"model"`
	MaxOutputTokens       int64  `json:"max_output_tokens"`
	InputTokensUpperBound int64  `json:"input_tokens_upper_bound"`
}

// Proxied is an admission the model proxy books: the price already scaled
// for the request's options (inference_geo), the web searches its server
// tools may run, and what the ledger shows of it.
type Proxied struct {
	Request
	Price              budget.Price
	WebSearches        int64
	ServerTools        []string
	MaxTokensRequested int64 // set when the proxy lowered max_tokens
	// No1hCacheWrite: the request asks for no 1-hour cache write, so its
	// input is reserved at the 5-minute write rate at most (budget.Bound).
	No1hCacheWrite bool
}

// Reservation is an admitted request.
type Reservation struct {
	ID        string
	RequestID string
	Model     string
	Amount    budget.Micros
	// Created is false when the request id had been admitted before and
	// this is that same reservation.
	Created bool
}

// Settled is the outcome of closing a reservation.
type Settled struct {
	Cost       budget.Micros
	Settlement Settlement
	// Applied is false when the reservation had been closed before; Cost
	// and Settlement are then the recorded ones.
	Applied bool
}

// Service admits and settles model requests.
type Service struct {
	bg     sync.WaitGroup
	led    *ledger.Ledger
	st     *store.Store
	prices func() *budget.Prices
	now    func() time.Time
}

// New returns a service pricing requests with prices; nil is the shipped
// table (budget.DefaultPrices), parsed when first used rather than in every
// cold start (it takes about 0.3 ms).
func New(led *ledger.Ledger, prices *budget.Prices, now func() time.Time) *Service {
	table := budget.DefaultPrices
	if prices != nil {
		table = func() *budget.Prices { return prices }
	}
	return &Service{led: led, st: led.Store(), prices: table, now: now}
}

// LoadPrices returns the shipped price table merged with the override file
// at path (the format of budget.ParsePrices); an empty path means no
// override.
func LoadPrices(path string) (*budget.Prices, error) {
	def := budget.DefaultPrices()
	if path == "" {
		return def, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("admission: price file: %w", err)
	}
	over, err := budget.ParsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("admission: price file %s: %w", path, err)
	}
	return def.Merge(over), nil
}

// maxRequestID bounds a request id; it becomes part of a key.
const maxRequestID = 256

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e { // printable ASCII, no space
			return false
		}
	}
	return true
}

// Admit books a reservation for req on runID, as a runner reports it.
func (s *Service) Admit(ctx context.Context, runID string, req Request) (Reservation, error) {
	price, err := s.prices().Lookup(req.Model)
	if err != nil && req.Model != "" {
		return Reservation{}, ErrUnknownModel
	}
	return s.admit(ctx, runID, Proxied{Request: req, Price: price}, "")
}

// AdmitProxied books the model proxy's reservation for p: only the proxy
// and the sweep can settle it.
func (s *Service) AdmitProxied(ctx context.Context, runID string, p Proxied) (Reservation, error) {
	return s.admit(ctx, runID, p, store.ReservationByProxy)
}

// Prices is the table the service prices with.
func (s *Service) Prices() *budget.Prices { return s.prices() }

func (s *Service) admit(ctx context.Context, runID string, p Proxied, origin string) (Reservation, error) {
	req, price := p.Request, p.Price
	switch {
	case !validRequestID(req.RequestID):
		return Reservation{}, &InvalidError{"request_id: must be 1 to 256 printable ASCII characters"}
	case req.Model == "":
		return Reservation{}, &InvalidError{"model: is required"}
	case req.MaxOutputTokens < 0:
		return Reservation{}, &InvalidError{"max_output_tokens: must not be negative"}
	case req.InputTokensUpperBound < 0:
		return Reservation{}, &InvalidError{"input_tokens_upper_bound: must not be negative"}
	}
	amount, err := budget.ReserveBound(price, budget.Bound{MaxOutputTokens: req.MaxOutputTokens, InputTokens: req.InputTokensUpperBound, WebSearches: p.WebSearches, No1hCacheWrite: p.No1hCacheWrite})
	if err != nil {
		return Reservation{}, &InvalidError{"max_output_tokens, input_tokens_upper_bound: the reservation would overflow"}
	}
	res := store.Reservation{
		ID:                    ids.New("res_"),
		RunID:                 runID,
		RequestID:             req.RequestID,
		Model:                 req.Model,
		MaxOutputTokens:       req.MaxOutputTokens,
		InputTokensUpperBound: req.InputTokensUpperBound,
		Amount:                int64(amount),
		InputPerMTok:          int64(price.InputPerMTok),
		OutputPerMTok:         int64(price.OutputPerMTok),
		CacheReadPerMTok:      int64(price.CacheReadPerMTok),
		CacheWritePerMTok:     int64(price.CacheWritePerMTok),
		CacheWrite1hPerMTok:   int64(price.CacheWrite1hPerMTok),
		WebSearchPerUse:       int64(price.WebSearchPerUse),
		WebSearches:           p.WebSearches,
		Origin:                origin,
		CreatedAt:             store.FormatTime(s.now()),
	}
	op, err := s.st.PutReservation(res)
	if err != nil {
		return Reservation{}, err
	}
	reserved := redact.BudgetReserved{ReservationID: res.ID, RequestID: res.RequestID, Model: res.Model, ReservedMicros: res.Amount,
		ServerTools: p.ServerTools}
	if p.MaxTokensRequested > 0 {
		reserved.MaxTokensRequested, reserved.MaxTokensForwarded = p.MaxTokensRequested, req.MaxOutputTokens
	}
	ev, err := redact.New(reserved)
	if err != nil {
		return Reservation{}, err
	}
	// Even a zero-cost request needs something left: the same rule as stage 1.
	need := max(res.Amount, 1)
	_, err = s.led.Append(ctx, runID, func(h store.Head) (store.Batch, error) {
		if h.Status == vocab.Ended {
			return store.Batch{}, ErrSessionEnded
		}
		return store.Batch{
			Events: []redact.Envelope{ev},
			Head:   store.HeadChange{Reserved: res.Amount, MinAvailable: &need},
			Ops:    []store.Op{op},
		}, nil
	})
	switch {
	case err == nil:
		return Reservation{ID: res.ID, RequestID: res.RequestID, Model: res.Model, Amount: amount, Created: true}, nil
	case errors.Is(err, store.ErrReservationExists):
		return s.replay(ctx, runID, req)
	case errors.Is(err, store.ErrNotFound):
		return Reservation{}, ErrRunNotFound
	case errors.Is(err, store.ErrConditionFailed):
		// The head's condition failed. DynamoDB reports the head first, so a
		// retry of an admitted request on a run now short of money lands
		// here too: it is answered with its reservation, not a 402.
		r, rerr := s.replay(ctx, runID, req)
		if errors.Is(rerr, ErrReservationNotFound) {
			return Reservation{}, ErrBudgetExhausted
		}
		return r, rerr
	}
	return Reservation{}, err
}

// replay answers a request id that was admitted before.
func (s *Service) replay(ctx context.Context, runID string, req Request) (Reservation, error) {
	r, err := s.st.GetReservation(ctx, runID, req.RequestID)
	if errors.Is(err, store.ErrNotFound) {
		return Reservation{}, ErrReservationNotFound
	}
	if err != nil {
		return Reservation{}, err
	}
	if r.Model != req.Model || r.MaxOutputTokens != req.MaxOutputTokens || r.InputTokensUpperBound != req.InputTokensUpperBound {
		return Reservation{}, ErrConflict
	}
	return Reservation{ID: r.ID, RequestID: r.RequestID, Model: r.Model, Amount: budget.Micros(r.Amount)}, nil
}

// ReconcileReported closes a runner's own reservation at the cost of the
// usage it reports. A reservation the model proxy booked is refused with
// ErrProxyReservation: the proxy read its usage from the upstream itself.
func (s *Service) ReconcileReported(ctx context.Context, runID, requestID string, u budget.Usage) (Settled, error) {
	return s.reconcile(ctx, runID, requestID, u, nil, false)
}

// Reconcile closes runID's reservation for requestID at the cost of u,
// priced at the rates the reservation was booked at; uses are the server
// tools' run counts for the ledger. Only the model proxy calls it.
func (s *Service) Reconcile(ctx context.Context, runID, requestID string, u budget.Usage, uses map[string]int64) (Settled, error) {
	return s.reconcile(ctx, runID, requestID, u, uses, true)
}

func (s *Service) reconcile(ctx context.Context, runID, requestID string, u budget.Usage, uses map[string]int64, proxy bool) (Settled, error) {
	if err := u.Validate(); err != nil {
		return Settled{}, &InvalidError{"token counts must not be negative"}
	}
	return s.close(ctx, runID, requestID, uses, !proxy, func(r store.Reservation) (budget.Usage, budget.Micros, Settlement, error) {
		cost, err := budget.Cost(priceOf(r), u)
		if err != nil {
			return budget.Usage{}, 0, "", &InvalidError{"token counts are too large to price"}
		}
		return u, cost, SettlementUsage, nil
	})
}

// Settle closes a reservation that cannot be reconciled from complete usage:
// with usage seen (ok) at its cost and the given settlement, otherwise at
// the full amount (pessimistic) or, for SettlementReleased, at zero.
func (s *Service) Settle(ctx context.Context, runID, requestID string, settlement Settlement, u budget.Usage, ok bool, uses map[string]int64) (Settled, error) {
	return s.close(ctx, runID, requestID, uses, false, func(r store.Reservation) (budget.Usage, budget.Micros, Settlement, error) {
		switch {
		case settlement == SettlementReleased:
			return budget.Usage{}, 0, SettlementReleased, nil
		case ok:
			if cost, err := budget.Cost(priceOf(r), u); err == nil {
				return u, cost, settlement, nil
			}
		}
		return budget.Usage{}, budget.Micros(r.Amount), SettlementPessimistic, nil
	})
}

func priceOf(r store.Reservation) budget.Price {
	oneHour := r.CacheWrite1hPerMTok
	if oneHour == 0 {
		// Booked before the 1-hour rate was kept: Anthropic's rule, twice input.
		oneHour = max(2*r.InputPerMTok, r.CacheWritePerMTok)
	}
	search := r.WebSearchPerUse
	if search == 0 {
		search = 10_000 // $10 per 1,000 searches, for items booked before fees were kept
	}
	return budget.Price{
		InputPerMTok:        budget.Micros(r.InputPerMTok),
		OutputPerMTok:       budget.Micros(r.OutputPerMTok),
		CacheReadPerMTok:    budget.Micros(r.CacheReadPerMTok),
		CacheWritePerMTok:   budget.Micros(r.CacheWritePerMTok),
		CacheWrite1hPerMTok: budget.Micros(oneHour),
		WebSearchPerUse:     budget.Micros(search),
	}
}

type costFunc func(store.Reservation) (budget.Usage, budget.Micros, Settlement, error)

// close is the one way a reservation ends: usage entry, reservation flip,
// head change and budget.reconciled event in one append.
// reported is true when a runner's usage report asks.
func (s *Service) close(ctx context.Context, runID, requestID string, uses map[string]int64, reported bool, price costFunc) (Settled, error) {
	if !validRequestID(requestID) {
		return Settled{}, &InvalidError{"request_id: must be 1 to 256 printable ASCII characters"}
	}
	r, err := s.st.GetReservation(ctx, runID, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return Settled{}, ErrReservationNotFound
	}
	if err != nil {
		return Settled{}, err
	}
	if reported && r.Origin == store.ReservationByProxy {
		// Open or closed: a runner's word never touches the proxy's meter.
		return Settled{}, ErrProxyReservation
	}
	if r.Status != store.ReservationOpen {
		return recorded(r), nil
	}
	u, cost, settlement, err := price(r)
	if err != nil {
		return Settled{}, err
	}
	status := store.ReservationReconciled
	if settlement == SettlementSwept {
		status = store.ReservationSwept
	}
	at := store.FormatTime(s.now())
	use, err := s.st.PutUsage(runID, store.Usage{
		ReservationID: r.ID, RequestID: r.RequestID,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
		CacheCreation1hInputTokens: u.CacheCreation1hInputTokens, WebSearchRequests: u.WebSearchRequests,
		WebFetchRequests: u.WebFetchRequests, ServerToolUses: nonEmpty(uses),
		Cost: int64(cost), Settlement: string(settlement), At: at,
	})
	if err != nil {
		return Settled{}, err
	}
	ev, err := redact.New(redact.BudgetReconciled{
		ReservationID: r.ID, RequestID: r.RequestID,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
		CostMicros: int64(cost), Settlement: string(settlement),
		CacheCreation1hInputTokens: u.CacheCreation1hInputTokens, WebSearchRequests: u.WebSearchRequests,
		WebFetchRequests: u.WebFetchRequests, ServerToolUses: nonEmpty(uses),
	})
	if err != nil {
		return Settled{}, err
	}
	_, err = s.led.Append(ctx, runID, func(store.Head) (store.Batch, error) {
		return store.Batch{
			Events: []redact.Envelope{ev},
			Head:   store.HeadChange{Reserved: -r.Amount, Spent: int64(cost)},
			Ops:    []store.Op{use, s.st.CloseReservation(runID, requestID, status, int64(cost), string(settlement), at)},
		}, nil
	})
	switch {
	case err == nil:
		return Settled{Cost: cost, Settlement: settlement, Applied: true}, nil
	case errors.Is(err, store.ErrUsageExists), errors.Is(err, store.ErrReservationClosed):
		// Someone else closed it first: answer with what they recorded.
		r, err := s.st.GetReservation(ctx, runID, requestID)
		if err != nil {
			return Settled{}, err
		}
		return recorded(r), nil
	case errors.Is(err, store.ErrNotFound):
		return Settled{}, ErrRunNotFound
	}
	return Settled{}, err
}

// nonEmpty keeps empty maps out of the store and the ledger.
func nonEmpty(m map[string]int64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	return m
}

func recorded(r store.Reservation) Settled {
	return Settled{Cost: budget.Micros(r.Cost), Settlement: Settlement(r.Settlement)}
}

// SweepReservations settles every reservation still open that was booked
// before olderThan as spent in full (pessimistic: its request may have been
// billed without anyone reporting it), with a budget.reconciled event whose
// settlement is "swept". It returns how many it settled. A reservation
// closed meanwhile by a reconciliation is left as that closed it. It pages
// through every open reservation; one that fails to close is reported and
// the sweep goes on.
func (s *Service) SweepReservations(ctx context.Context, olderThan time.Time) (int, error) {
	n := 0
	var errs []error
	err := s.st.EachOpenReservation(ctx, store.FormatTime(olderThan), func(r store.Reservation) error {
		st, err := s.close(ctx, r.RunID, r.RequestID, nil, false, func(r store.Reservation) (budget.Usage, budget.Micros, Settlement, error) {
			return budget.Usage{}, budget.Micros(r.Amount), SettlementSwept, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("admission: sweep %s/%s: %w", r.RunID, r.RequestID, err))
			return ctx.Err()
		}
		if st.Applied {
			n++
		}
		return nil
	})
	return n, errors.Join(append(errs, err)...)
}

// Available returns what runID can still book, and whether it has ended.
func (s *Service) Available(ctx context.Context, runID string) (int64, bool, error) {
	h, err := s.led.Head(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, ErrRunNotFound
	}
	if err != nil {
		return 0, false, err
	}
	return h.BudgetAvailable, h.Status == vocab.Ended, nil
}

// Refused records a model request the proxy refused: one event, no money.
func (s *Service) Refused(ctx context.Context, runID string, ev redact.ModelRefused) error {
	env, err := redact.New(ev)
	if err != nil {
		return err
	}
	_, err = s.led.Append(ctx, runID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{env}}, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return ErrRunNotFound
	}
	return err
}
