package expiry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Task is the expire function's input: the Payload the state machine's
// Task state sends.
type Task struct {
	ApprovalID string `json:"approval_id"`
}

// Result is the expire function's output, kept in the execution's history.
type Result struct {
	ApprovalID string `json:"approval_id"`
	// Expired: this call settled the approval as expired.
	Expired bool `json:"expired"`
	// Status is the approval's status after the call.
	Status vocab.ApprovalStatus `json:"status,omitempty"`
	// NotFound: there is no such approval, so there is nothing to expire.
	NotFound bool `json:"not_found,omitempty"`
}

// ErrNotDue: the timer fired while the approval was still pending and not
// yet past its time (the function's clock is behind the state machine's).
// It is an error so that the state machine retries.
var ErrNotDue = errors.New("expiry: approval is not yet due")

// Handler runs the expire function over the approval service.
type Handler struct {
	svc *approval.Service
	log *slog.Logger
}

// NewHandler returns the handler of the expire function.
func NewHandler(svc *approval.Service, log *slog.Logger) *Handler {
	return &Handler{svc: svc, log: log}
}

// Expire settles t's approval as expired if it is pending and overdue. An
// approval that does not exist is logged and answered, not failed: retrying
// cannot make it appear.
func (h *Handler) Expire(ctx context.Context, t Task) (Result, error) {
	if !ids.Valid("apr_", t.ApprovalID) {
		return Result{}, fmt.Errorf("expiry: %q is not an approval id", t.ApprovalID)
	}
	res := Result{ApprovalID: t.ApprovalID}
	applied, err := h.svc.Expire(ctx, t.ApprovalID)
	if errors.Is(err, approval.ErrNotFound) {
		h.log.WarnContext(ctx, "expire: no such approval", "approval", t.ApprovalID)
		res.NotFound = true
		return res, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("expiry: expire %s: %w", t.ApprovalID, err)
	}
	if applied {
		h.log.InfoContext(ctx, "approval expired", "approval", t.ApprovalID)
		res.Expired, res.Status = true, vocab.ApprovalExpired
		return res, nil
	}
	// Settled already, or not yet due: read it (which expires it if it has
	// become overdue meanwhile) to tell the two apart.
	a, err := h.svc.Get(ctx, t.ApprovalID)
	if err != nil {
		return Result{}, fmt.Errorf("expiry: read %s: %w", t.ApprovalID, err)
	}
	if a.Status == vocab.ApprovalPending {
		return Result{}, fmt.Errorf("%w: %s expires at %s", ErrNotDue, t.ApprovalID, a.ExpiresAt)
	}
	res.Status = a.Status
	h.log.InfoContext(ctx, "expire: approval already settled", "approval", t.ApprovalID, "status", a.Status)
	return res, nil
}
