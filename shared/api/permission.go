package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/permission"
)

func (s *Server) permission(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	var wait time.Duration
	if v := r.URL.Query().Get("wait_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || time.Duration(n)*time.Second > permission.MaxWait {
			return invalid("wait_seconds: must be an integer from 0 to %d", int(permission.MaxWait/time.Second))
		}
		wait = time.Duration(n) * time.Second
	}
	var req permission.Request
	if e := decode(w, r, &req); e != nil {
		return e
	}
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
	writeJSON(w, http.StatusOK, ans)
	return nil
}
