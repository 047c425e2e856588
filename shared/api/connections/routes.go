package connections

import (
	_ "embed"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// operations holds the rest of each row's OpenAPI operation, by operation
// id (route.DocIn).
//
//go:embed operations.yaml
var operations string

var doc = route.DocIn(operations)

// Routes gives the connection rows, all the broker's: it seals, opens and
// dials. Each row says who may call it and the function that serves it, and
// holds its handler and its documentation (the rest of it in
// operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// Connections are the broker's, all of them: it seals a credential
		// when it is given, opens it to call an upstream, and dials the
		// upstream and its authorization server. Control links no MCP or
		// OAuth code and holds no KMS permission (infra's
		// TestFunctionImports).
		{Pattern: "POST /v1/connections", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.createConnection),
			Doc:     doc("createConnection", "connections", "Register an upstream MCP server; the credential is sealed at once and never returned.", 400, 401, 403, 409, 413, 500, 503)},
		{Pattern: "GET /v1/connections", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.listConnections),
			Doc:     doc("listConnections", "connections", "The connections the caller may see, newest first, one page at a time.", 400, 401, 403, 500, 503)},
		{Pattern: "GET /v1/connections/{id}", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.getConnection),
			Doc:     doc("getConnection", "connections", "", 401, 403, 404, 500, 503)},
		{Pattern: "PUT /v1/connections/{id}/credential", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.replaceCredential),
			Doc:     doc("replaceConnectionCredential", "connections", "Replace the credential (a reconnect); authorization_generation + 1, so runs bound to the old generation refuse.", 400, 401, 403, 404, 409, 413, 500, 503)},
		{Pattern: "DELETE /v1/connections/{id}", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.revokeConnection),
			Doc:     doc("revokeConnection", "connections", "Revoke; runs bound to it are denied from then on.", 401, 403, 404, 500, 503)},
		// What opens a sealed credential: the only kms:Decrypt.
		{Pattern: "POST /v1/connections/{id}/tools/refresh", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.refreshConnection),
			Doc:     doc("refreshConnectionTools", "connections", "Photograph the upstream's tool list and report drift against the previous photograph.", 401, 403, 404, 500, 503)},
		{Pattern: "POST /v1/sessions/{id}/tools/call", Access: route.Runner, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.toolsCall),
			Doc:     doc("callTool", "gate", "Ask the gate and, if allowed, broker the call to the upstream with the sealed credential.", 400, 401, 403, 404, 409, 413, 500, 503)},
		// OAuth connections: the authorization URL and the provider's redirect.
		// Both reach the provider (discovery, registration, the code exchange)
		// and the callback opens the sealed verifier and client secret and
		// seals the tokens. The callback's state is its authentication.
		{Pattern: "POST /v1/connections/{id}/authorize", Access: route.People, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.authorizeConnection),
			Doc:     doc("authorizeConnection", "connections", "Start the OAuth authorization of an oauth connection (its owner for a personal one, an admin for a shared one): discovery, client registration if needed, and a single-use state valid for 10 minutes. The URL is fluidbox's authorize redirect (/v1/oauth/start); the member opens it in the browser that is to complete the authorization, and the provider redirects back to its own redirect URI (/v1/oauth/callback/{issuer}).", 400, 401, 403, 404, 409, 500, 503)},
		{Pattern: "GET /v1/oauth/callback", Access: route.Public, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Raw(http.HandlerFunc(s.oauthCallback)),
			Doc:     doc("oauthCallback", "connections", "The redirect URI of fluidbox's client ID metadata document (used only with servers that advertise RFC 9207 iss, which is then required); every other client has its server's own, /v1/oauth/callback/{issuer}. No bearer: the state authenticates, and the browser must hold the nonce the authorize redirect set. On success the tokens are sealed, the connection's authorization_generation moves by one and its status is active.")},
		// Each authorization server's own redirect URI (mix-up, RFC 9700 4.4).
		{Pattern: "GET /v1/oauth/callback/{issuer}", Access: route.Public, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Raw(http.HandlerFunc(s.oauthCallback)),
			Doc:     doc("oauthIssuerCallback", "connections", "The redirect URI of one authorization server ({issuer} is the first 128 bits of the SHA-256 of its issuer without a trailing slash, in hex; a connection's oauth.redirect_uri names it). Answered as /v1/oauth/callback, and only for states made for that server (RFC 9700 4.4).")},
		// The authorize redirect: sets the browser-bound nonce the callback
		// asks for, then sends the browser to the authorization server.
		{Pattern: "GET /v1/oauth/start", Access: route.Public, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Raw(http.HandlerFunc(s.oauthStart)),
			Doc:     doc("oauthStart", "connections", "The authorize redirect, opened once: it sets the authorization's browser-bound nonce (an HttpOnly, SameSite=Lax cookie; over HTTPS a __Host- cookie, which no sibling subdomain can set) and redirects to the authorization server. The callback is taken only from the browser holding it. A navigation another site started (Sec-Fetch-Site cross-site or same-site) is refused, the key left unspent.")},
		// fluidbox's client ID metadata document: its URL is the client_id an
		// authorization server that takes those is given; it fetches it.
		{Pattern: "GET /v1/oauth/client-metadata.json", Access: route.Public, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Raw(http.HandlerFunc(s.clientMetadata)),
			Doc:     doc("oauthClientMetadata", "connections", "fluidbox's OAuth client ID metadata document. When an authorization server advertises client_id_metadata_document_supported and the API is served over HTTPS, fluidbox presents this document's URL as its client_id (no registration); the server fetches it. A public client (token_endpoint_auth_method none, PKCE) whose one redirect URI is <ApiUrl>/v1/oauth/callback.")},
	}
}
