package runner

import (
	"errors"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/budget"
)

// budgetDeps is what the budget endpoints use.
type budgetDeps struct {
	admit *admission.Service
}

type admissionView struct {
	ReservationID string  `json:"reservation_id"`
	RequestID     string  `json:"request_id"`
	Model         string  `json:"model"`
	ReservedUSD   float64 `json:"reserved_usd"`
}

func (s *Server) admit(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	var req admission.Request
	if e := decode(w, r, &req); e != nil {
		return e
	}
	res, err := s.budget.admit.Admit(r.Context(), id, req)
	if err != nil {
		return admissionError(r, err)
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	s.log.InfoContext(r.Context(), "admission", "run", id, "request", res.RequestID, "reservation", res.ID,
		"model", res.Model, "reserved", res.Amount.String(), "new", res.Created)
	if res.Created {
		s.cfg.Telemetry.BudgetReserved(r.Context(), int64(res.Amount))
	}
	writeJSON(w, status, admissionView{ReservationID: res.ID, RequestID: res.RequestID, Model: res.Model, ReservedUSD: res.Amount.USD()})
	return nil
}

// usageRequest is the body of .../admissions/{request_id}/usage.
type usageRequest struct {
	InputTokens                *int64 `json:"input_tokens"`
	OutputTokens               *int64 `json:"output_tokens"`
	CacheReadInputTokens       int64  `json:"cache_read_input_tokens"`
	CacheCreationInputTokens   int64  `json:"cache_creation_input_tokens"`
	CacheCreation1hInputTokens int64  `json:"cache_creation_1h_input_tokens"`
	WebSearchRequests          int64  `json:"web_search_requests"`
	WebFetchRequests           int64  `json:"web_fetch_requests"`
}

type reconcileView struct {
	CostUSD    float64 `json:"cost_usd"`
	Reconciled bool    `json:"reconciled"`
	Settlement string  `json:"settlement"`
}

func (s *Server) reconcile(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	var req usageRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	if req.InputTokens == nil || req.OutputTokens == nil {
		return invalid("input_tokens and output_tokens are required")
	}
	u := budget.Usage{InputTokens: *req.InputTokens, OutputTokens: *req.OutputTokens,
		CacheReadInputTokens: req.CacheReadInputTokens, CacheCreationInputTokens: req.CacheCreationInputTokens,
		CacheCreation1hInputTokens: req.CacheCreation1hInputTokens, WebSearchRequests: req.WebSearchRequests, WebFetchRequests: req.WebFetchRequests}
	reqID := r.PathValue("request_id")
	st, err := s.budget.admit.ReconcileReported(r.Context(), id, reqID, u)
	if err != nil {
		return admissionError(r, err)
	}
	s.log.InfoContext(r.Context(), "reconcile", "run", id, "request", reqID, "cost", st.Cost.String(),
		"settlement", st.Settlement, "applied", st.Applied)
	if st.Applied {
		s.cfg.Telemetry.BudgetSpent(r.Context(), int64(st.Cost))
	}
	writeJSON(w, http.StatusOK, reconcileView{CostUSD: st.Cost.USD(), Reconciled: true, Settlement: string(st.Settlement)})
	return nil
}

var errBudgetExhausted = &route.Error{Status: http.StatusPaymentRequired, Code: "budget_exhausted", Message: "this run's available budget cannot cover the reservation"}

// admissionError maps the admission service's errors to API errors; what
// is not one of them goes to fail (503 for the store, else 500).
func admissionError(r *http.Request, err error) error {
	var inv *admission.InvalidError
	switch {
	case errors.As(err, &inv):
		return invalid("%s", inv.Message)
	case errors.Is(err, admission.ErrUnknownModel):
		return invalid("model: not in the price table; unknown models are refused, never priced at zero")
	case errors.Is(err, admission.ErrBudgetExhausted):
		return errBudgetExhausted
	case errors.Is(err, admission.ErrConflict):
		return conflict("request_id was already admitted with a different model or bounds")
	case errors.Is(err, admission.ErrSessionEnded):
		return conflict("the session has ended; it admits no more model requests")
	case errors.Is(err, admission.ErrRunNotFound):
		return notFound("session " + r.PathValue("id"))
	case errors.Is(err, admission.ErrReservationNotFound):
		return notFound("admission")
	case errors.Is(err, admission.ErrProxyReservation):
		return conflict("this reservation was booked by the model proxy, which settles it from the upstream's own usage; it takes no report")
	}
	return err
}
