package approvals

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

type approvalView struct {
	ID           string          `json:"id"`
	SessionID    string          `json:"session_id"`
	ToolCallID   string          `json:"tool_call_id"`
	ToolName     string          `json:"tool_name"`
	Input        json.RawMessage `json:"input"`
	RuleID       string          `json:"rule_id,omitempty"`
	ScopeKey     string          `json:"scope_key"`
	DefaultScope string          `json:"default_scope"`
	Status       string          `json:"status"`
	RequestedAt  string          `json:"requested_at"`
	ExpiresAt    string          `json:"expires_at"`
	Decision     string          `json:"decision,omitempty"`
	DecidedBy    string          `json:"decided_by,omitempty"`
	DecidedAt    string          `json:"decided_at,omitempty"`
	ConnectionID string          `json:"connection_id,omitempty"`
	Applied      *bool           `json:"applied,omitempty"`
}

func approvalOut(a store.Approval) approvalView {
	return approvalView{
		ID: a.ID, SessionID: a.RunID, ToolCallID: a.ToolCallID, ToolName: a.ToolName, Input: json.RawMessage(a.Input),
		RuleID: a.RuleID, ScopeKey: a.ScopeKey, DefaultScope: a.DefaultScope, Status: a.Status,
		RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt, Decision: a.Decision, DecidedBy: a.DecidedBy,
		DecidedAt: a.DecidedAt, ConnectionID: a.ConnectionID,
	}
}

func approvalsOut(list []store.Approval) []approvalView {
	out := make([]approvalView, len(list))
	for i, a := range list {
		out[i] = approvalOut(a)
	}
	return out
}

// maxPending bounds one listing of pending approvals.
const maxPending = 500

func (s *Server) listPendingApprovals(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	list, err := s.approvals.Pending(r.Context(), maxPending)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": approvalsOut(list)})
	return nil
}

func approvalID(r *http.Request) (string, error) {
	id := r.PathValue("approval")
	if !ids.Valid("apr_", id) {
		return "", notFound("approval " + id)
	}
	return id, nil
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := approvalID(r)
	if err != nil {
		return err
	}
	a, err := s.approvals.Get(r.Context(), id)
	if errors.Is(err, approval.ErrNotFound) {
		return notFound("approval " + id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, approvalOut(a))
	return nil
}

type decisionRequest struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := approvalID(r)
	if err != nil {
		return err
	}
	var req decisionRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	a, applied, err := s.approvals.Decide(r.Context(), who, id, req.Decision)
	var bad *approval.InvalidError
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return notFound("approval " + id)
	case errors.Is(err, approval.ErrForbidden):
		return errForbidden
	case errors.As(err, &bad):
		return invalid("decision: %s", bad.Message)
	case err != nil:
		return err
	}
	s.log.InfoContext(r.Context(), "approval decided", "approval", id, "run", a.RunID, "by", who.Subject, "status", a.Status, "applied", applied)
	out := approvalOut(a)
	out.Applied = &applied
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listRunApprovals(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	if _, err := s.runs.Get(r.Context(), id); err != nil {
		return err
	}
	list, err := s.approvals.ForRun(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": approvalsOut(list)})
	return nil
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	if _, err := s.runs.Get(r.Context(), id); err != nil {
		return err
	}
	list, err := s.st.Grants(r.Context(), id)
	if err != nil {
		return err
	}
	if list == nil {
		list = []store.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": list})
	return nil
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	key := r.PathValue("scope_key")
	err = s.approvals.RevokeGrant(r.Context(), who, id, key)
	switch {
	case errors.Is(err, call.ErrNoGrant):
		return notFound("grant " + key)
	case errors.Is(err, store.ErrNotFound):
		return notFound("session " + id)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"scope_key": key, "status": "revoked"})
	return nil
}
