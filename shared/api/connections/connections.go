package connections

import (
	"errors"
	"net/http"
	"strings"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/seal"
)

var errNoSealer = &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "this server has no key service configured, so it cannot seal or open credentials (nothing was run); treat this as deny and retry"}

// connectionError maps the connection service's errors to API errors. Every
// message is built here or by packages whose error texts never hold a
// credential (seal, broker); anything else goes to fail.
func (s *Server) connectionError(r *http.Request, err error) error {
	var inv *connection.InvalidError
	var ue *broker.UpstreamError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return invalid("%s", inv.Error())
	case errors.Is(err, connection.ErrNotFound):
		return notFound("connection " + r.PathValue("id"))
	case errors.Is(err, connection.ErrForbidden):
		return &route.Error{Status: http.StatusForbidden, Code: "forbidden", Message: strings.TrimPrefix(err.Error(), connection.ErrForbidden.Error()+": ")}
	case errors.Is(err, connection.ErrNameTaken):
		return conflict("a connection with that name exists")
	case errors.Is(err, connection.ErrRevoked):
		return conflict("the connection is revoked")
	case errors.Is(err, connection.ErrChanged):
		return conflict("the connection changed while this request ran (a concurrent credential replacement or revocation); read it and retry")
	case errors.Is(err, connection.ErrAuthorizationRequired):
		return conflict("the connection needs authorization: its owner (an admin for a shared connection) calls POST /v1/connections/%s/authorize", r.PathValue("id"))
	case errors.Is(err, connection.ErrStepUp):
		return conflict("the upstream asks for scopes the connection's authorization lacks (insufficient_scope; the connection lists them as step_up_scopes): its owner (an admin for a shared connection) calls POST /v1/connections/%s/authorize", r.PathValue("id"))
	case errors.Is(err, connection.ErrUpstreamUnavailable):
		s.log.WarnContext(r.Context(), "oauth provider unavailable", "route", r.Pattern, "connection", r.PathValue("id"), "err", err)
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the connection's OAuth provider could not refresh its token; retry later"}
	case errors.Is(err, connection.ErrNoSealer):
		return errNoSealer
	case errors.Is(err, seal.ErrTooLarge):
		return invalid("credential: too large")
	case errors.Is(err, seal.ErrUnavailable):
		s.log.ErrorContext(r.Context(), "key service unavailable", "route", r.Pattern, "err", err)
		return errUnavailable
	case errors.As(err, &ue):
		s.log.WarnContext(r.Context(), "upstream failed", "route", r.Pattern, "connection", r.PathValue("id"), "err", ue)
		switch {
		case errors.Is(ue, broker.ErrUnauthorized):
			return conflict("the upstream refused the connection's credential; replace it with PUT /v1/connections/{id}/credential (%s)", ue.Error())
		case errors.Is(ue, broker.ErrForbidden), errors.Is(ue, broker.ErrInsufficientScope):
			return conflict("the upstream refused the request although it did not reject the credential (HTTP 403): the credential may lack a permission or scope the upstream wants (%s)", ue.Error())
		case errors.Is(ue, broker.ErrAddressRefused):
			return conflict("the connection's URL is not https or reaches an address the broker may not (loopback, link-local, private, unique-local or special-purpose); nothing was sent to it. An operator can allow a range with FLUIDBOX_CONNECTION_ALLOW_CIDRS")
		case errors.Is(ue, broker.ErrInvalidResponse), errors.Is(ue, broker.ErrCredentialEcho), errors.Is(ue, broker.ErrInvalidRequest), errors.Is(ue, broker.ErrProtocol):
			return conflict("the upstream's answer cannot be used (%s)", ue.Error())
		}
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the upstream MCP server could not be reached (" + ue.Error() + "); retry later"}
	}
	return err
}

func (s *Server) createConnection(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	var req connection.CreateRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	v, err := s.conns.Create(r.Context(), who, req)
	if err != nil {
		return s.connectionError(r, err)
	}
	s.log.InfoContext(r.Context(), "connection created", "connection", v.ID, "name", v.Name, "kind", v.Kind, "owner", v.Owner)
	writeJSON(w, http.StatusCreated, s.withRedirect(r, v))
	return nil
}

// listConnections serves GET /v1/connections: the connections the caller
// may see, newest first, one page at a time (the listing parameters of GET
// /v1/sessions).
func (s *Server) listConnections(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	q, err := route.ParseList(r)
	if err != nil {
		return err
	}
	page, err := s.conns.List(r.Context(), who, q)
	if err != nil {
		return s.connectionError(r, err)
	}
	writeJSON(w, http.StatusOK, route.WithCursor(map[string]any{"connections": page.Connections}, page.Next))
	return nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	v, err := s.conns.Get(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return s.connectionError(r, err)
	}
	writeJSON(w, http.StatusOK, s.withRedirect(r, v))
	return nil
}

func (s *Server) replaceCredential(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	var req connection.CredentialRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	v, err := s.conns.ReplaceCredential(r.Context(), who, r.PathValue("id"), req.Credential)
	if err != nil {
		return s.connectionError(r, err)
	}
	s.log.InfoContext(r.Context(), "connection credential replaced", "connection", v.ID, "generation", v.AuthorizationGeneration, "by", who.Subject)
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) revokeConnection(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	v, err := s.conns.Revoke(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return s.connectionError(r, err)
	}
	s.log.InfoContext(r.Context(), "connection revoked", "connection", v.ID, "by", who.Subject)
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) refreshConnection(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	res, err := s.conns.Refresh(r.Context(), who, r.PathValue("id"))
	if err != nil {
		return s.connectionError(r, err)
	}
	s.log.InfoContext(r.Context(), "connection refreshed", "connection", r.PathValue("id"), "digest", res.Digest, "tools", len(res.Tools), "changes", len(res.Changes))
	writeJSON(w, http.StatusOK, res)
	return nil
}
