package runner

import (
	"errors"
	"net/http"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// ReadPermissionRequest reads what both ways of asking for a decision take
// (POST /v1/sessions/{id}/permission and .../tools/call): the run id, the
// optional ?wait_seconds= (up to permission.MaxWait) and the request body.
func ReadPermissionRequest(w http.ResponseWriter, r *http.Request) (string, permission.Request, time.Duration, error) {
	id, err := runID(r)
	if err != nil {
		return "", permission.Request{}, 0, err
	}
	wait, e := waitSeconds(r.URL.Query().Get("wait_seconds"), permission.MaxWait)
	if e != nil {
		return "", permission.Request{}, 0, e
	}
	var req permission.Request
	if e := decode(w, r, &req); e != nil {
		return "", permission.Request{}, 0, e
	}
	return id, req, wait, nil
}

func (s *Server) permission(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, req, wait, err := ReadPermissionRequest(w, r)
	if err != nil {
		return err
	}
	start := time.Now()
	ans, err := s.perm.Decide(r.Context(), id, req, wait)
	var inv *permission.InvalidError
	switch {
	case errors.As(err, &inv):
		return invalid("%s", inv.Message)
	case errors.Is(err, permission.ErrConflict):
		return conflict("tool_call_id %q was already asked with a different tool or input", req.ToolCallID)
	case err != nil:
		return err
	}
	s.log.InfoContext(r.Context(), "decision", "run", id, "call", req.ToolCallID, "tool", req.ToolName,
		"decision", ans.Decision, "source", ans.Source, "rule", ans.RuleID)
	s.cfg.Telemetry.Decided(r.Context(), start, telemetry.Decision{Run: id, Call: req.ToolCallID, Tool: req.ToolName,
		Decision: ans.Decision, Source: ans.Source, Rule: ans.RuleID, Approval: ans.ApprovalID})
	writeJSON(w, http.StatusOK, ans)
	return nil
}
