package approvals

import (
	"errors"
	"net/http"
	"regexp"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

// The input requests' routes: the requests upstreams made for a person to
// open a link mid-call (shared/elicitation), beside the approvals and
// decided by the same people, but their own rows and their own decisions
// (done, decline).

// inputRequestOf is an input request on the wire (client.InputRequest).
// Link is the upstream's URL reduced to scheme, host and path
// (shared/broker), URL the same with its query, as the person must open
// it; both are the upstream's text, to be shown as text and offered as a
// link only when http or https. Server is the connection's own name, never
// one the upstream gave itself.
func inputRequestOf(r store.InputRequest) client.InputRequest {
	return client.InputRequest{ID: r.ID, SessionID: r.RunID, ToolCallID: r.ToolCallID, ToolName: r.ToolName, ConnectionID: r.ConnectionID,
		Server: r.Server, Mode: r.Mode, Link: r.Link, URL: r.URL, Status: r.Status, RequestedAt: r.RequestedAt, ExpiresAt: r.ExpiresAt,
		DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt}
}

// inputCursorPattern is what a decoded cursor must be: a request's
// position in the pending list (a request time, '#', its id).
var inputCursorPattern = regexp.MustCompile(`^[0-9T:.Z-]{1,40}#inp_[a-z2-7]{1,40}$`)

// listInputRequests is the caller's inbox of input requests: the pending
// ones they may answer (elicitation.Service.Inbox).
func (s *Server) listInputRequests(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	limit, after, err := pageOf(r.URL.Query(), inputCursorPattern)
	if err != nil {
		return err
	}
	page, err := s.inputs.Inbox(r.Context(), who, after, limit)
	if err != nil {
		return err
	}
	out := make([]client.InputRequest, len(page.InputRequests))
	for i, ir := range page.InputRequests {
		out[i] = inputRequestOf(ir)
	}
	writePage(w, "input_requests", out, page.Next)
	return nil
}

func inputRequestID(r *http.Request) (string, error) {
	id := r.PathValue("input_request")
	if !ids.Valid("inp_", id) {
		return "", notFound("input request " + id)
	}
	return id, nil
}

func (s *Server) getInputRequest(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := inputRequestID(r)
	if err != nil {
		return err
	}
	ir, err := s.inputs.View(r.Context(), who, id)
	switch {
	case errors.Is(err, elicitation.ErrNotFound):
		return notFound("input request " + id)
	case errors.Is(err, elicitation.ErrForbidden):
		return errForbidden
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, inputRequestOf(ir))
	return nil
}

// decideInputRequest settles an input request: "done" (the person opened
// the link and finished there; the call's retry runs the tool again) or
// "decline" (the call is refused).
func (s *Server) decideInputRequest(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := inputRequestID(r)
	if err != nil {
		return err
	}
	var req struct {
		Decision string `json:"decision"`
	}
	if e := decode(w, r, &req); e != nil {
		return e
	}
	ir, applied, err := s.inputs.Decide(r.Context(), who, id, req.Decision)
	switch {
	case errors.Is(err, elicitation.ErrNotFound):
		return notFound("input request " + id)
	case errors.Is(err, elicitation.ErrForbidden):
		return errForbidden
	case errors.Is(err, elicitation.ErrInvalid):
		return invalid("decision: must be one of done, decline")
	case err != nil:
		return err
	}
	s.log.InfoContext(r.Context(), "input request decided", "input_request", id, "run", ir.RunID, "by", who.Subject, "status", ir.Status, "applied", applied)
	out := inputRequestOf(ir)
	out.Applied = &applied
	writeJSON(w, http.StatusOK, out)
	return nil
}
