// Package web is the approvals page: one HTML document, one stylesheet and
// two scripts (the page, and render.js, its mirror of shared/render),
// embedded in the binary and served by the API handler at "/", so
// `fluidbox dev` and the control function serve the same page. Its
// configuration (how people sign in) is served beside it as config.json.
//
// What it guarantees:
//   - The page talks only to the public API of the origin it came from
//     and, with SSO on, to the issuer's token endpoint; nothing else.
//   - With SSO on, it signs the reviewer in with the issuer (authorization
//     code with PKCE, in the browser) and never asks for a pasted token;
//     tokens are kept in the tab's sessionStorage and sent only in the
//     Authorization header, never put in a URL (the code the issuer sends
//     back is taken out of the address bar before anything else runs).
//     The admin token form exists only without SSO (single-admin).
//   - It never turns API data into markup: the scripts set textContent on
//     elements they create (web_test.go checks them for the HTML sinks),
//     and a strict Content-Security-Policy allows no inline script or
//     style, no other origin (but the token endpoint's, for connections),
//     no framing and no form posts.
package web

import (
	"embed"
	"encoding/json"
	"net/http"
	"net/url"
)

//go:embed static/index.html static/app.js static/render.js static/app.css
var static embed.FS

// OIDC is how the page signs people in with SSO on.
type OIDC struct {
	Issuer                string `json:"issuer"`
	ClientID              string `json:"client_id"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	// RolesClaim names the claim the page reads roles from, to show them.
	RolesClaim string `json:"roles_claim"`
}

// Config is the page's configuration. Without OIDC the deployment is
// single-admin and the page asks for the admin token.
type Config struct {
	OIDC *OIDC
}

// Sign-in modes of config.json.
const (
	SignInToken       = "token"       // single-admin: the admin token form
	SignInSSO         = "sso"         // the issuer's sign-in
	SignInUnavailable = "unavailable" // SSO on, but its endpoints are unusable
)

// Site serves the page's files for one configuration.
type Site struct {
	csp    string
	config []byte
}

// New builds the site. An SSO configuration whose endpoints are not
// absolute https URLs (http only when the issuer itself is http, as a
// local issuer is) gives a page that cannot sign in and says so, rather
// than one that sends a code or a token somewhere unexpected.
func New(cfg Config) *Site {
	page := struct {
		SignIn string `json:"sign_in"`
		OIDC   *OIDC  `json:"oidc,omitempty"`
	}{SignIn: SignInToken}
	connect := "'self'"
	if o := cfg.OIDC; o != nil {
		page.SignIn = SignInUnavailable
		origin, ok := endpointOrigin(o.Issuer, o.TokenEndpoint)
		if _, authOK := endpointOrigin(o.Issuer, o.AuthorizationEndpoint); ok && authOK && o.ClientID != "" {
			page.SignIn, page.OIDC = SignInSSO, o
			connect += " " + origin
		}
	}
	body, err := json.Marshal(page)
	if err != nil {
		body = []byte(`{"sign_in":"unavailable"}`)
	}
	return &Site{config: body, csp: "default-src 'none'; script-src 'self'; style-src 'self'; connect-src " + connect + "; " +
		"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}
}

// endpointOrigin is the scheme://host of an issuer's endpoint, if it is
// one a browser may be sent to: absolute, https (or http like the issuer),
// no user info.
func endpointOrigin(issuer, endpoint string) (string, bool) {
	iu, err := url.Parse(issuer)
	if err != nil {
		return "", false
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	if u.Scheme != "https" && (u.Scheme != "http" || iu.Scheme != "http") {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}

// ContentSecurityPolicy is sent with every file of the site.
func (s *Site) ContentSecurityPolicy() string { return s.csp }

// Page serves the HTML document.
func (s *Site) Page() http.Handler { return s.asset("static/index.html", "text/html; charset=utf-8") }

// Script serves app.js.
func (s *Site) Script() http.Handler {
	return s.asset("static/app.js", "text/javascript; charset=utf-8")
}

// Render serves render.js.
func (s *Site) Render() http.Handler {
	return s.asset("static/render.js", "text/javascript; charset=utf-8")
}

// Style serves app.css.
func (s *Site) Style() http.Handler { return s.asset("static/app.css", "text/css; charset=utf-8") }

// ConfigJSON serves config.json: how this deployment signs people in.
func (s *Site) ConfigJSON() http.Handler { return s.serve(s.config, "application/json") }

func (s *Site) asset(name, contentType string) http.Handler {
	body, err := static.ReadFile(name)
	if err != nil {
		// The files are embedded at build time: a missing one is a build
		// that cannot have compiled, so this is unreachable.
		body = nil
	}
	return s.serve(body, contentType)
}

func (s *Site) serve(body []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", s.csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// Small and versioned with the binary: always revalidate, so a new
		// deploy is picked up at once.
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
