package route

// Function names a Lambda function of template.yaml (<Name>Function, built
// from functions/<name>/). Each serves only the rows that name it.
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

// Route is one row of the surface: a route, who may call it, the function
// that serves it, its handler and its documentation, in one value (as
// Vault's framework.Path). Each handler package lists its own rows
// (Routes); shared/api gathers every package's into the surface, from
// which `go generate ./shared/api` writes docs/openapi.yaml's paths and
// template.yaml's Api events.
type Route struct {
	// Pattern is the net/http ServeMux pattern: "METHOD /path". Path
	// parameter names are the handler's ({id} is always a run: the one a
	// session token is checked on); Doc.Path spells the documented path
	// where its names differ.
	Pattern string
	// Access says who may call it.
	Access Access
	// Function serves it, reached Via.
	Function Function
	Via      Via
	// Handler serves it: Authenticated for an access that takes a bearer,
	// Raw for the others (New refuses a mismatch).
	Handler Endpoint
	// Doc is its OpenAPI operation. Every row has one, except a row that
	// says why it is Undocumented (a catch-all, a trailing-slash twin, a
	// second function answering the same liveness probe).
	Doc          Doc
	Undocumented string
	// OpenOnlyToWait: a session's request takes one of its run's open
	// request slots (FLUIDBOX_RUN_MAX_OPEN_REQUESTS) only when it is about
	// to wait (ratelimit.Hold), not on entry: a decision answered at once
	// holds no slot, and costs no lease written and given back.
	OpenOnlyToWait bool
}

// Doc is a route's OpenAPI operation, less what the row already says:
// the method and path come from Pattern (or Path), `security` from
// Access, and `x-fluidbox-access` says who may call it. Schemas live in
// docs/openapi.yaml's components, which OpenAPI refers to.
type Doc struct {
	// ID is the operationId, and (capitalised) the name of the route's
	// Api event in template.yaml.
	ID      string
	Tag     string
	Summary string
	// Path is the documented path where its parameter names differ from
	// Pattern's ({id} for an approval's {approval}): the same path with
	// names erased.
	Path string
	// Errors are the statuses answered in the API's error envelope, each
	// documented by the shared response of docs/openapi.yaml's components
	// (400 BadRequest, 401 Unauthenticated, ...).
	Errors []int
	// OpenAPI is the rest of the operation as OpenAPI 3.1 YAML: its
	// description, parameters, requestBody and the responses Errors does
	// not cover.
	OpenAPI string
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

// Of returns the rows t serves, in their order.
func Of(rows []Route, t Target) []Route {
	var out []Route
	for _, r := range rows {
		if t.Serves(r) {
			out = append(out, r)
		}
	}
	return out
}
