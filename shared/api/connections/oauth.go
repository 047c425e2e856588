package connections

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// The paths of fluidbox's OAuth client under the API's base URL: the
// callback (the client ID metadata document's redirect URI; each
// authorization server's own is CallbackPath/<issuer key>), the client ID
// metadata document, and the authorize redirect.
const (
	CallbackPath       = "/v1/oauth/callback"
	ClientMetadataPath = "/v1/oauth/client-metadata.json"
	StartPath          = "/v1/oauth/start"
)

// site is where fluidbox's OAuth client lives for requests reaching r's
// API: under the configured base URL, else the request's host.
func (s *Server) site(r *http.Request) oauth.Site {
	var base string
	if s.cfg.BaseURL != nil {
		base = s.cfg.BaseURL(r)
	} else {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	base = strings.TrimRight(base, "/")
	return oauth.Site{RedirectURI: base + CallbackPath, MetadataURL: base + ClientMetadataPath, StartURL: base + StartPath}
}

// withRedirect fills in the redirect URI an operator registers for the
// OAuth client of v at its issuer: that server's own, under this API.
func (s *Server) withRedirect(r *http.Request, v connection.View) connection.View {
	if v.OAuth != nil && v.OAuth.RedirectURI == "" && v.OAuth.Issuer != "" {
		o := *v.OAuth
		o.RedirectURI = s.site(r).RedirectURIFor(o.Issuer)
		v.OAuth = &o
	}
	return v
}

// clientMetadata is GET /v1/oauth/client-metadata.json: fluidbox's client
// ID metadata document, which an authorization server that takes those
// fetches when fluidbox presents its URL as the client_id. Nothing in it
// is secret; it names the client and its one redirect URI.
func (s *Server) clientMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, http.StatusOK, oauth.MetadataDocument(s.site(r)))
}

// authorizeConnection is POST /v1/connections/{id}/authorize.
func (s *Server) authorizeConnection(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	if r.ContentLength > 0 {
		var none struct{}
		if e := decode(w, r, &none); e != nil {
			return e
		}
	}
	res, err := s.conns.Authorize(r.Context(), who, r.PathValue("id"), s.site(r))
	if err != nil {
		return s.oauthError(r, err)
	}
	s.log.InfoContext(r.Context(), "connection authorization started", "connection", r.PathValue("id"), "by", who.Subject)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// oauthError maps the flow's errors; the oauth package's texts hold no
// token, code or provider text.
func (s *Server) oauthError(r *http.Request, err error) error {
	var oe *oauth.Error
	switch {
	case errors.Is(err, connection.ErrAuthorizationRequired):
		return conflict("the connection needs authorization: its owner (an admin for a shared connection) calls POST /v1/connections/%s/authorize", r.PathValue("id"))
	case errors.As(err, &oe):
		s.log.WarnContext(r.Context(), "oauth provider exchange failed", "route", r.Pattern, "connection", r.PathValue("id"), "err", oe)
		if errors.Is(oe, oauth.ErrDiscovery) || errors.Is(oe, oauth.ErrRegistration) {
			return conflict("%s", oe.Error())
		}
		return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: oe.Error() + "; retry later"}
	}
	return s.connectionError(r, err)
}

// callbackPage is all a browser is shown: what happened, never why in
// detail (the reason goes to the log).
var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fluidbox</title>
<meta name="referrer" content="no-referrer"></head>
<body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

type page struct{ Title, Text string }

// notCompleted is the page of a refused or failed authorization response.
var notCompleted = page{"Not connected", "The authorization was not completed. Ask for a new authorization URL and try again."}

// callbackParams are the authorization response's parameters fluidbox reads.
var callbackParams = []string{"code", "state", "iss", "error"}

// htmlHeaders are the headers of every page of the flow.
func htmlHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'")
}

// nonceCookie is the cookie, named after name (connection.CookieName),
// that holds an authorization's nonce in the browser of site's member.
// Over HTTPS it is a __Host- cookie (Secure, Path=/, no Domain), which a
// browser lets no other host set or overwrite: a page on a sibling
// subdomain (same site, so neither SameSite nor Fetch Metadata tells it
// apart) cannot plant its own authorization's nonce for the member's
// browser to bring to the callback. Over http (fluidbox dev, on loopback)
// the prefix is not allowed, and the cookie is scoped to the callback's
// path under the API's base path (API Gateway's stage), which the
// browser's URL has and the handler's path does not.
func nonceCookie(site oauth.Site, name string) *http.Cookie {
	c := &http.Cookie{Name: name, Path: CallbackPath, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	u, err := url.Parse(site.RedirectURI)
	switch {
	case err != nil:
	case u.Scheme == "https":
		c.Name, c.Path, c.Secure = "__Host-"+name, "/", true
	case u.Path != "":
		c.Path = u.Path
	}
	return c
}

// oauthStart is GET /v1/oauth/start?key=: the authorize redirect. The
// first browser to open it gets the authorization's nonce in a cookie
// (nonceCookie: HttpOnly, SameSite=Lax so that the provider's redirect back
// brings it) and is sent on to the authorization server; the key is spent,
// so nobody else's browser can get the nonce.
//
// A browser that says the navigation came from another site (Fetch
// Metadata: Sec-Fetch-Site cross-site or same-site) is refused, the key left
// unspent: the link is meant to be opened by the member who asked for it
// (pasted, or by `fluidbox connections authorize --open`), and a page that
// sends a member's browser there is an attacker making that browser the one
// the authorization is bound to. Clients that send no Fetch Metadata are
// not browsers an attacker's page can drive.
func (s *Server) oauthStart(w http.ResponseWriter, r *http.Request) {
	htmlHeaders(w)
	q := r.URL.Query()
	if len(q["key"]) != 1 {
		s.page(w, http.StatusBadRequest, notCompleted)
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		s.log.WarnContext(r.Context(), "oauth authorize redirect refused", "reason", "opened from another site")
		s.page(w, http.StatusBadRequest, page{"Not started", "This authorization link was opened from another site. Paste it into the address bar yourself (or run fluidbox connections authorize --open)."})
		return
	}
	st, err := s.conns.Start(r.Context(), q.Get("key"))
	if err != nil {
		status, p := s.callbackFailure(r, err)
		s.page(w, status, p)
		return
	}
	c := nonceCookie(s.site(r), st.Cookie)
	c.Value, c.Expires = st.Nonce, st.Expires
	http.SetCookie(w, c)
	w.Header().Set("Location", st.URL)
	w.WriteHeader(http.StatusFound)
}

// oauthCallback is GET /v1/oauth/callback and GET
// /v1/oauth/callback/{issuer}: the provider's redirect with code and state
// (or error). It takes no bearer: the single-use state is the
// authentication, bound to the connection, its generation, the member who
// asked for the URL and the authorization server (whose redirect URI this
// must be), and the browser's nonce cookie to the browser that started it.
func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) {
	htmlHeaders(w)
	q := r.URL.Query()
	if s.cfg.Sealer == nil {
		s.page(w, http.StatusServiceUnavailable, page{"Not connected", "fluidbox cannot complete authorizations right now. Try again later."})
		return
	}
	for _, name := range callbackParams {
		if len(q[name]) > 1 {
			// RFC 6749 3.1: a parameter is never sent twice. Which copy
			// counts is a parser's guess, and a lenient server that lets a
			// redirect_uri carry parameters appends its own iss after one
			// put there for it: the state is left unspent.
			s.log.WarnContext(r.Context(), "oauth callback refused", "reason", "the "+name+" parameter appears more than once")
			s.page(w, http.StatusBadRequest, notCompleted)
			return
		}
	}
	redirect := s.site(r).RedirectURI
	if key := r.PathValue("issuer"); key != "" {
		redirect += "/" + key
	}
	state := q.Get("state")
	cookie := nonceCookie(s.site(r), connection.CookieName(state))
	var nonce string
	if c, err := r.Cookie(cookie.Name); err == nil {
		nonce = c.Value
	}
	a, err := s.conns.Callback(r.Context(), connection.CallbackQuery{
		Code: q.Get("code"), State: state, Iss: q.Get("iss"), Error: q.Get("error"), RedirectURI: redirect, Nonce: nonce,
	})
	if nonce != "" {
		// Spent either way: the state is consumed.
		cookie.MaxAge = -1
		http.SetCookie(w, cookie)
	}
	if err != nil {
		status, p := s.callbackFailure(r, err)
		s.page(w, status, p)
		return
	}
	v := a.View
	s.log.InfoContext(r.Context(), "connection authorized", "connection", v.ID, "generation", v.AuthorizationGeneration, "owner", v.Owner, "refreshable", a.Refreshable)
	text := "The connection " + v.Name + " is authorized. You can close this page."
	if !a.Refreshable {
		text = "The connection " + v.Name + " is authorized, but the provider gave no refresh token: fluidbox uses the access token until it expires"
		if !a.ExpiresAt.IsZero() {
			text += " (" + a.ExpiresAt.UTC().Format(time.RFC3339) + ")"
		}
		text += ", and then the connection needs authorizing again. You can close this page."
	}
	s.page(w, http.StatusOK, page{"Connected", text})
}

func (s *Server) callbackFailure(r *http.Request, err error) (int, page) {
	failed := notCompleted
	var oe *oauth.Error
	switch {
	case errors.Is(err, connection.ErrState), errors.Is(err, connection.ErrAuthorizationDenied), errors.Is(err, oauth.ErrIssuer),
		errors.Is(err, connection.ErrBrowser),
		errors.Is(err, connection.ErrChanged), errors.Is(err, connection.ErrForbidden),
		errors.Is(err, connection.ErrRevoked), errors.Is(err, connection.ErrNotFound):
		s.log.WarnContext(r.Context(), "oauth callback refused", "reason", reasonOf(err))
		return http.StatusBadRequest, failed
	case errors.As(err, &oe):
		s.log.WarnContext(r.Context(), "oauth callback failed", "err", oe)
		return http.StatusBadGateway, failed
	case errors.Is(err, seal.ErrUnavailable), errors.Is(err, store.ErrUnavailable):
		s.log.ErrorContext(r.Context(), "oauth callback: a dependency is unavailable", "err", err)
		return http.StatusServiceUnavailable, failed
	}
	s.log.ErrorContext(r.Context(), "oauth callback failed", "err", err)
	return http.StatusInternalServerError, failed
}

// reasonOf names a refused callback for the log: sentinel texts only.
func reasonOf(err error) string {
	for _, e := range []error{oauth.ErrIssuer, connection.ErrBrowser, connection.ErrState, connection.ErrAuthorizationDenied, connection.ErrChanged, connection.ErrForbidden, connection.ErrRevoked, connection.ErrNotFound} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "refused"
}

func (s *Server) page(w http.ResponseWriter, status int, p page) {
	w.WriteHeader(status)
	if err := callbackPage.Execute(w, p); err != nil {
		s.log.Error("oauth callback page", "err", err)
	}
}
