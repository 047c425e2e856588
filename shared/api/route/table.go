package route

// Function names a Lambda function of template.yaml (<Name>Function, built
// from functions/<name>/). Each serves only the rows of Table that name it.
type Function string

// The HTTP functions. Their privileges differ (template.yaml): only Broker
// may decrypt sealed credentials, only Gate starts expiry timers, GitHub
// holds the webhook secret and no admin token.
const (
	Control   Function = "control"
	Gate      Function = "gate"
	Approvals Function = "approvals"
	Broker    Function = "broker"
	GitHub    Function = "github"
)

// Via says how a route reaches its function.
type Via string

const (
	// APIGateway: an Api event of the function in template.yaml (REST,
	// buffered, cut at 29 s).
	APIGateway Via = "api"
	// FunctionURL: the function's Lambda function URL (response streaming),
	// which exists for the model proxy's server-sent events.
	FunctionURL Via = "url"
)

// Route is one row of the table.
type Route struct {
	// Pattern is the net/http ServeMux pattern: "METHOD /path". Path
	// parameter names are the handler's; template.yaml and
	// docs/openapi.yaml may name them differently (the tests compare
	// paths with names erased).
	Pattern string
	// Access says who may call it.
	Access Access
	// Function serves it, reached Via.
	Function Function
	Via      Via
	// Undocumented, when set, says why the route is not an operation of
	// docs/openapi.yaml (a catch-all, a trailing-slash twin). Every other
	// route must be documented there and in docs/api.md.
	Undocumented string
	// OpenOnlyToWait: a session's request takes one of its run's open
	// request slots (FLUIDBOX_RUN_MAX_OPEN_REQUESTS) only when it is about
	// to wait (ratelimit.Hold), not on entry: a decision answered at once
	// holds no slot, and costs no lease written and given back.
	OpenOnlyToWait bool
}

// Table is every HTTP route fluidbox serves: the one list the mux of each
// function (New), fluidbox dev (everything), template.yaml's Api events and
// docs/openapi.yaml are derived from or checked against (infra's tests, in
// both directions).
//
// Adding a route: add its row here (pattern, access, function), give its
// handler to the package of its resource (shared/api/<package>'s
// Endpoints), add the Api event to that function in template.yaml and the
// operation to docs/openapi.yaml and docs/api.md. `go test ./infra/
// ./shared/api/... ./functions/...` fails until all of them agree. Choose
// the function by privilege, not convenience: a route that opens a sealed
// credential is Broker's; one the runner calls on every tool call is
// Gate's (which links no MCP, OIDC or KMS code); one a person decides with
// is Approvals'; the rest of the operator's API is Control's.
var Table = []Route{
	// Liveness, the approvals page (static files that call this API).
	{Pattern: "GET /healthz", Access: Public, Function: Control, Via: APIGateway},
	{Pattern: "GET /{$}", Access: Public, Function: Control, Via: APIGateway},
	{Pattern: "GET /app.js", Access: Public, Function: Control, Via: APIGateway},
	{Pattern: "GET /app.css", Access: Public, Function: Control, Via: APIGateway},
	{Pattern: "GET /render.js", Access: Public, Function: Control, Via: APIGateway},
	{Pattern: "GET /config.json", Access: Public, Function: Control, Via: APIGateway},

	// Policies and capability bundles.
	{Pattern: "POST /v1/policies", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/policies", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/policies/{id}", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "PUT /v1/policies/{id}", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/policies/{id}/versions/{n}", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/policies/{id}/evaluate", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/policies/{id}/versions/{n}/evaluate", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/policies/{id}/shadow", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/capabilities", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/capabilities", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/capabilities/{id}", Access: Admin, Function: Control, Via: APIGateway},

	// Runs and their ledger.
	{Pattern: "POST /v1/sessions", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/sessions/{id}", Access: RunScoped, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/sessions/{id}/end", Access: Reporters, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/sessions/{id}/events", Access: Reviewers, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/sessions", Access: Admin, Function: Control, Via: APIGateway},
	// A triggered run's tokens, issued once to whoever drives it.
	{Pattern: "POST /v1/sessions/{id}/token", Access: Issuers, Function: Control, Via: APIGateway},

	// The gate and budget admission: what the runner calls on every tool
	// call and model request.
	{Pattern: "POST /v1/sessions/{id}/permission", Access: Runner, Function: Gate, Via: APIGateway, OpenOnlyToWait: true},
	{Pattern: "POST /v1/sessions/{id}/admissions", Access: Admitters, Function: Gate, Via: APIGateway},
	{Pattern: "POST /v1/sessions/{id}/admissions/{request_id}/usage", Access: Reporters, Function: Gate, Via: APIGateway},

	// Approvals and session grants. The approval's id is {approval}, not
	// {id}: {id} is always a run, the one a session token is checked on.
	{Pattern: "GET /v1/approvals", Access: Deciders, Function: Approvals, Via: APIGateway},
	{Pattern: "GET /v1/approvals/{approval}", Access: Deciders, Function: Approvals, Via: APIGateway},
	{Pattern: "POST /v1/approvals/{approval}/decision", Access: Deciders, Function: Approvals, Via: APIGateway},
	{Pattern: "GET /v1/sessions/{id}/approvals", Access: RunScoped, Function: Approvals, Via: APIGateway},
	{Pattern: "GET /v1/input-requests", Access: Deciders, Function: Approvals, Via: APIGateway},
	{Pattern: "GET /v1/input-requests/{input_request}", Access: Deciders, Function: Approvals, Via: APIGateway},
	{Pattern: "POST /v1/input-requests/{input_request}/decision", Access: Deciders, Function: Approvals, Via: APIGateway},
	{Pattern: "GET /v1/sessions/{id}/grants", Access: RunScoped, Function: Approvals, Via: APIGateway},
	{Pattern: "DELETE /v1/sessions/{id}/grants/{scope_key...}", Access: Admin, Function: Approvals, Via: APIGateway},
	// Slack's clicks on an approval message, signed by Slack.
	{Pattern: "POST /v1/integrations/slack/interactions", Access: Signed, Function: Approvals, Via: APIGateway},

	// Connections: sealed here with kms:Encrypt, never opened by Control.
	{Pattern: "POST /v1/connections", Access: People, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/connections", Access: People, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/connections/{id}", Access: People, Function: Control, Via: APIGateway},
	{Pattern: "PUT /v1/connections/{id}/credential", Access: People, Function: Control, Via: APIGateway},
	{Pattern: "DELETE /v1/connections/{id}", Access: People, Function: Control, Via: APIGateway},

	// What opens a sealed credential: the broker, the only kms:Decrypt.
	{Pattern: "POST /v1/connections/{id}/tools/refresh", Access: People, Function: Broker, Via: APIGateway},
	{Pattern: "POST /v1/sessions/{id}/tools/call", Access: Runner, Function: Broker, Via: APIGateway},
	// OAuth connections: the authorization URL and the provider's redirect.
	// Both reach the provider (discovery, registration, the code exchange)
	// and the callback opens the sealed verifier and client secret and
	// seals the tokens: the broker, which dials upstreams anyway; Control
	// never dials a provider. The callback's state is its authentication.
	{Pattern: "POST /v1/connections/{id}/authorize", Access: People, Function: Broker, Via: APIGateway},
	{Pattern: "GET /v1/oauth/callback", Access: Public, Function: Broker, Via: APIGateway},
	// Each authorization server's own redirect URI (mix-up, RFC 9700 4.4).
	{Pattern: "GET /v1/oauth/callback/{issuer}", Access: Public, Function: Broker, Via: APIGateway},
	// The authorize redirect: sets the browser-bound nonce the callback
	// asks for, then sends the browser to the authorization server.
	{Pattern: "GET /v1/oauth/start", Access: Public, Function: Broker, Via: APIGateway},
	// fluidbox's client ID metadata document: its URL is the client_id an
	// authorization server that takes those is given; it fetches it.
	{Pattern: "GET /v1/oauth/client-metadata.json", Access: Public, Function: Broker, Via: APIGateway},
	// The model proxy, on the broker's streaming function URL. Its errors
	// are Anthropic's shape; Claude Code probes the base URL first.
	{Pattern: "POST /v1/sessions/{id}/model/v1/messages", Access: RunKey, Function: Broker, Via: FunctionURL},
	{Pattern: "GET /v1/sessions/{id}/model", Access: Public, Function: Broker, Via: FunctionURL},
	{Pattern: "GET /v1/sessions/{id}/model/{$}", Access: Public, Function: Broker, Via: FunctionURL,
		Undocumented: "the base URL with a trailing slash, answered like GET /v1/sessions/{id}/model"},
	{Pattern: "/v1/sessions/{id}/model/", Access: Public, Function: Broker, Via: FunctionURL,
		Undocumented: "every other Anthropic path: 404 in Anthropic's error shape"},
	{Pattern: "GET /healthz", Access: Public, Function: Broker, Via: FunctionURL},
	// A run's workspace: the frozen commit, fetched with the GitHub App's
	// installation token, which only the broker may open; on the function
	// URL, which carries a binary body of any size API Gateway would cut.
	{Pattern: "GET /v1/sessions/{id}/workspace", Access: Runner, Function: Broker, Via: FunctionURL},
	// The report back to the pull request once the run ended: the
	// control plane's act (the text is the stored result), with a token
	// the broker mints; the runner token only asks for it.
	{Pattern: "POST /v1/sessions/{id}/report", Access: Reporters, Function: Broker, Via: APIGateway},

	// The operator's model upstream: sealed here, opened only by the proxy.
	{Pattern: "PUT /v1/model-upstream", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/model-upstream", Access: Admin, Function: Control, Via: APIGateway},
	// The GitHub App that fetches workspaces: its key sealed here.
	{Pattern: "PUT /v1/github-app", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/github-app", Access: Admin, Function: Control, Via: APIGateway},

	// Triggers: configurations (admin), and GitHub's deliveries, signed,
	// on a function of their own that holds the webhook secret.
	{Pattern: "POST /v1/triggers", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/triggers", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "GET /v1/triggers/{id}", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "PUT /v1/triggers/{id}", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "DELETE /v1/triggers/{id}", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/triggers/github", Access: Signed, Function: GitHub, Via: APIGateway},

	// Members (SSO mode): who has been seen, and the admin's off switch.
	{Pattern: "GET /v1/members", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/members/{sub}/deactivate", Access: Admin, Function: Control, Via: APIGateway},
	{Pattern: "POST /v1/members/{sub}/activate", Access: Admin, Function: Control, Via: APIGateway},
}

// Access says who may call a route. The operator (admin token) and SSO
// users with role admin may call every route that takes a bearer at all,
// except that Runner and Admitters routes never verify a person's JWT.
type Access string

const (
	// Public: no credential (liveness, the approvals page's static files,
	// the model proxy's base-URL probe).
	Public Access = "public"
	// Signed: no bearer; the handler authenticates the request by its
	// signature before it trusts a byte of it (the GitHub webhook).
	Signed Access = "signed"
	// RunKey: the run's session token as an Anthropic API key (x-api-key
	// or bearer), checked by the handler itself so that its errors keep
	// Anthropic's shape (the model proxy).
	RunKey Access = "run_key"
	// Runner: the session token of the run in the path, or the admin
	// token. A person's JWT is never verified here: these are the calls a
	// runner makes, and the gate function links no OIDC code.
	Runner Access = "runner"
	// Admitters: the operator, or the session or runner token of the run
	// in the path (booking a reservation only ever raises a charge). Like
	// Runner, never a person's JWT.
	Admitters Access = "admitters"
	// Reporters: the operator, an SSO admin, or the runner token of the
	// run in the path, never its session token: reports of usage and the
	// end of the run come from the runner, which keeps the runner token
	// out of the sandbox, so a hostile sandbox cannot settle its own spend
	// low or end its run to escape the ledger's tail.
	Reporters Access = "reporters"
	// RunScoped: the operator, an SSO admin, or the session token of the
	// run in the path.
	RunScoped Access = "run_scoped"
	// Reviewers: RunScoped, and SSO approvers: a run's ledger, which holds
	// ids, verdicts, digests and costs but never an input, is what an
	// approver reads beside the call to decide it (the page's timeline).
	Reviewers Access = "reviewers"
	// Admin: the operator, or an SSO admin.
	Admin Access = "admin"
	// Deciders: the operator and every SSO user; the handler then asks
	// approval.MayDecide (for a list, of each row), since the invoker of a
	// run decides the calls on their personal connections whatever their
	// role, and nobody else decides or reads them.
	Deciders Access = "deciders"
	// Issuers: the operator, an SSO admin, the runner key of the trigger
	// that created the run in the path, or that run's launch credential,
	// once (never a session or runner token: a run's own tokens cannot
	// mint more).
	Issuers Access = "issuers"
	// People: the operator and every SSO user (never a session token); the
	// handler decides further (connections: owner or admin).
	People Access = "people"
)

// bearer reports whether the route authenticates a bearer token before its
// handler runs; the others are served by a raw http.Handler that answers
// for itself.
func (a Access) bearer() bool {
	switch a {
	case Public, Signed, RunKey:
		return false
	}
	return true
}

// personless reports whether the route is one a runner calls on the
// gate function, which verifies no person's JWT (and links no OIDC code).
func (a Access) personless() bool { return a == Runner || a == Admitters }

// Target selects the rows one handler serves.
type Target struct {
	Function Function
	Via      Via
}

// Everything is what fluidbox dev serves: every row, on one listener.
var Everything = Target{}

// Serves reports whether t serves r.
func (t Target) Serves(r Route) bool {
	return t == Everything || (r.Function == t.Function && r.Via == t.Via)
}

// Of returns the rows t serves, in table order.
func Of(t Target) []Route {
	var out []Route
	for _, r := range Table {
		if t.Serves(r) {
			out = append(out, r)
		}
	}
	return out
}
