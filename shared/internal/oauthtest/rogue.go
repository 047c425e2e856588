package oauthtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Rogue is an attacker's authorization server on its own loopback port: it
// serves RFC 8414 metadata naming itself the issuer, with the authorization
// endpoint of its choice (an honest provider's, for the mix-up attack of
// RFC 9700 section 4.4.1), and its own token and registration endpoints.
// It records every token request it receives: a code or a PKCE verifier
// arriving there is what an attack is after.
type Rogue struct {
	Issuer string
	srv    *httptest.Server
	mu     sync.Mutex
	forms  []url.Values
	regs   []map[string]any
}

// RogueOptions is what the attacker's metadata and registration say.
type RogueOptions struct {
	// AuthorizationEndpoint is the endpoint its metadata names ("" is its
	// own /authorize, which answers 404; one starting with "/" is a path
	// of its own).
	AuthorizationEndpoint string
	// TokenEndpoint is the token endpoint its metadata names ("" is its
	// own /token; one starting with "/" is a path of its own).
	TokenEndpoint string
	// IssuerSuffix is added to its URL to make the issuer its metadata
	// names (and Issuer): a query or a fragment, which an issuer
	// identifier may not have (RFC 8414 section 2).
	IssuerSuffix string
	// ClientID is what its registration endpoint answers with (a client
	// id of the honest provider's, which the attacker read off an
	// authorization URL); "" means no registration endpoint.
	ClientID string
	// IssParameter: the metadata advertises RFC 9207's iss.
	IssParameter bool
	// ClientIDMetadata: the metadata says it takes client ID metadata
	// documents.
	ClientIDMetadata bool
	// ChallengeMethods are its code_challenge_methods_supported (nil is
	// S256).
	ChallengeMethods []string
	// Scopes are its scopes_supported.
	Scopes []string
	// ForwardTo, when set, makes its own /authorize (the endpoint its
	// metadata names) send the browser on to this honest authorization
	// endpoint with the same request, its redirect_uri replaced by
	// ForwardRedirectURI (the one fluidbox registered at the honest
	// server).
	ForwardTo          string
	ForwardRedirectURI string
}

// NewRogue starts the attacker's authorization server.
func NewRogue(t testing.TB, o RogueOptions) *Rogue {
	t.Helper()
	r := &Rogue{}
	mux := http.NewServeMux()
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	r.Issuer = r.srv.URL + o.IssuerSuffix
	methods := o.ChallengeMethods
	if methods == nil {
		methods = []string{"S256"}
	}
	own := func(endpoint, def string) string {
		switch {
		case endpoint == "":
			return r.srv.URL + def
		case strings.HasPrefix(endpoint, "/"):
			return r.srv.URL + endpoint
		}
		return endpoint
	}
	meta := map[string]any{
		"issuer": r.Issuer, "authorization_endpoint": own(o.AuthorizationEndpoint, "/authorize"), "token_endpoint": own(o.TokenEndpoint, "/token"),
		"response_types_supported": []string{"code"}, "code_challenge_methods_supported": methods,
		"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_post"},
		"authorization_response_iss_parameter_supported": o.IssParameter,
		"client_id_metadata_document_supported":          o.ClientIDMetadata,
	}
	if o.Scopes != nil {
		meta["scopes_supported"] = o.Scopes
	}
	if o.ClientID != "" {
		meta["registration_endpoint"] = r.srv.URL + "/register"
	}
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, req *http.Request) {
		if o.ForwardTo == "" {
			http.NotFound(w, req)
			return
		}
		q := req.URL.Query()
		q.Set("redirect_uri", o.ForwardRedirectURI)
		http.Redirect(w, req, o.ForwardTo+"?"+q.Encode(), http.StatusFound)
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(meta)
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, req *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&m)
		r.mu.Lock()
		r.regs = append(r.regs, m)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"client_id": o.ClientID, "token_endpoint_auth_method": "none", "redirect_uris": m["redirect_uris"],
		})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, req *http.Request) {
		_ = req.ParseForm()
		r.mu.Lock()
		r.forms = append(r.forms, req.PostForm)
		r.mu.Unlock()
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
	})
	return r
}

// TokenRequests is every token request's form the attacker received.
func (r *Rogue) TokenRequests() []url.Values {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.forms)
}

// Registrations is every registration request's metadata it received.
func (r *Rogue) Registrations() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.regs)
}
