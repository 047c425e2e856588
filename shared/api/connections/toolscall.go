package connections

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// toolsCall is POST /v1/sessions/{id}/tools/call: the gate decides a
// brokered call and, on allow, the broker executes it (connection.Broker).
// When the key service, the table or the upstream's tool list cannot be
// reached before the decision, the answer is 503 and nothing is recorded.
//
// The call runs under API Gateway's cut-off (route.GatewayContext): its
// execution is claimed only while the time left covers the tool's timeout,
// and a wait for a human is shortened to leave that time, so the tool never
// runs after its caller got a 504. Every error says whether the tool ran,
// may have run, or did not run.
func (s *Server) toolsCall(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, req, wait, err := readPermissionRequest(w, r)
	if err != nil {
		return err
	}
	if s.cfg.Sealer == nil {
		return errNoSealer
	}
	ctx, cancel := route.GatewayContext(r)
	defer cancel()
	start := time.Now()
	ans, err := s.broker.Call(ctx, id, req, wait)
	var inv *permission.InvalidError
	var ran *connection.ExecutedError
	switch {
	case err == nil:
	case errors.As(err, &inv):
		return invalid("%s (the tool was not run)", inv.Message)
	case errors.Is(err, permission.ErrConflict):
		return conflict("tool_call_id %q was already asked with a different tool or input; the tool was not run", req.ToolCallID)
	case errors.Is(err, connection.ErrSandboxTool):
		return invalid("tool_name: %q is a sandbox tool of this run; ask POST /v1/sessions/{id}/permission and run it in the sandbox (the tool was not run)", req.ToolName)
	case errors.As(err, &ran) && ran.Known:
		return conflict("tool_call_id %q was executed already (result digest %s, latency %d ms, is_error %t); its result is not kept and the tool is not run twice (use a new tool_call_id to call again)",
			req.ToolCallID, ran.Outcome.ResultDigest, ran.Outcome.LatencyMS, ran.Outcome.IsError)
	case errors.Is(err, connection.ErrAlreadyExecuted):
		return conflict("tool_call_id %q was executed already, but its outcome was not recorded (the broker stopped while the tool ran; once the call's claim lapses, a retry records it as failed); the tool is not run twice (use a new tool_call_id to call again)", req.ToolCallID)
	case errors.Is(err, connection.ErrNoTime):
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the request has too little time left before API Gateway's cut-off for the tool's timeout, so the tool was not run; retry with the same tool_call_id"}
	case errors.Is(err, connection.ErrNoSealer):
		return errNoSealer
	case errors.Is(err, seal.ErrUnavailable):
		s.log.ErrorContext(r.Context(), "key service unavailable", "run", id, "call", req.ToolCallID, "err", err)
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the key service could not open the connection's credential, so the tool was not run; treat this as deny and retry"}
	case errors.Is(err, broker.ErrAddressRefused):
		return conflict("the connection's URL is not https or reaches an address the broker may not (loopback, link-local, private, unique-local or special-purpose), so nothing was sent and the tool was not run; an operator can allow a range with FLUIDBOX_CONNECTION_ALLOW_CIDRS")
	case errors.Is(err, connection.ErrUpstreamUnavailable):
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the upstream MCP server's tools could not be read, so the call was not decided and the tool was not run; treat this as deny and retry"}
	case errors.Is(err, connection.ErrNotRecorded):
		s.log.ErrorContext(r.Context(), "brokered call not recorded", "run", id, "call", req.ToolCallID, "err", err)
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the tool ran, but its record could not be completed, so its result is withheld; the tool is not run again with this tool_call_id (a retry answers 409, and once the call's claim lapses records it as failed)"}
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		s.log.ErrorContext(r.Context(), "table unavailable", "run", id, "call", req.ToolCallID, "err", err)
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the table could not be reached, so the tool was not run; treat this as deny and retry"}
	default:
		// Every error after the execution was claimed is ErrNotRecorded
		// (above): anything else came before it.
		s.log.ErrorContext(r.Context(), "internal error", "route", r.Pattern, "run", id, "call", req.ToolCallID, "err", err)
		return &route.Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the tool was not run"}
	}
	attrs := []any{"run", id, "call", req.ToolCallID, "tool", req.ToolName, "decision", ans.Decision, "source", ans.Source, "rule", ans.RuleID}
	if ans.Result != nil {
		attrs = append(attrs, "brokered", true, "is_error", ans.Result.IsError, "latency_ms", *ans.LatencyMS)
	}
	s.log.InfoContext(r.Context(), "decision", attrs...)
	s.cfg.Telemetry.Decided(r.Context(), start, telemetry.Decision{Run: id, Call: req.ToolCallID, Tool: req.ToolName,
		Decision: ans.Decision, Source: ans.Source, Rule: ans.RuleID, Approval: ans.ApprovalID})
	if ans.Result != nil {
		con, _ := run.BrokeredConnection(req.ToolName)
		outcome := telemetry.OutcomeOK
		if ans.Result.IsError {
			outcome = "tool_error"
		}
		s.cfg.Telemetry.BrokeredCall(r.Context(), start, telemetry.Brokered{Run: id, Call: req.ToolCallID, Tool: req.ToolName, Connection: con, Outcome: outcome})
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}
