package gate

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// Source says which stage denied a call. Sources are persisted and on the
// wire: never rename them.
type Source string

// Sources of a denial.
const (
	SourceBudget     Source = "budget"
	SourceCapability Source = "capability"
	SourceBinding    Source = "binding"
	SourceSchema     Source = "schema"
	SourceTrustTier  Source = "trust_tier"
	SourcePolicy     Source = "policy"
	// SourceApproval and SourceApprovalExpired are recorded by the caller
	// when a human denies a pending approval or nobody decides in time;
	// Decide itself never returns them.
	SourceApproval        Source = "approval"
	SourceApprovalExpired Source = "approval_expired"
	SourceSession         Source = "session"
	// SourceApprovalLimit: the run already has as many approvals waiting
	// as it may, so a further require_approval is denied instead of
	// filing one more.
	SourceApprovalLimit Source = "approval_limit"
)

// DefaultMaxPendingApprovals is how many approvals a run may have waiting
// at once when the operator sets no other limit.
const DefaultMaxPendingApprovals = 20

// Decision is the gate's answer for one call. It is a value: a denial is an
// answer, not an error.
type Decision struct {
	// Outcome is the policy's verdict as the gate settles it (a denying
	// stage, autonomy and grants included); require_approval asks the
	// caller to file a pending approval with ScopeKey, Scope and TTL.
	Outcome policy.Verdict
	// Source names the stage family that denied (deny only).
	Source Source
	// Reason is human text the model and the operator read. It may quote
	// the schema validator's reason; it never contains credentials.
	Reason string
	// RuleID names the policy rule that decided, when one did.
	RuleID string
	// Verdict is the policy's own verdict, set whenever the policy stage
	// ran. Rewritten is the verdict autonomy turned a require_approval
	// into; empty unless a rewrite happened. Both go to the ledger.
	Verdict   policy.Verdict
	Rewritten policy.Verdict
	// ScopeKey, Scope and TTL describe the approval to create
	// (require_approval only).
	ScopeKey string
	Scope    policy.Scope
	TTL      time.Duration
	// Grant and GrantRule are the scope key and rule of the session grant
	// that turned a require_approval into allow (the first, when several
	// rules asked and each held its own); empty otherwise.
	Grant     string
	GrantRule string
	// Grantable: the policy said require_approval and session grants
	// could answer this call, but those in Run.Grants did not. A caller
	// that decided without reading the run's grants reads them and
	// decides again; deciding without them only ever asks more.
	Grantable bool
	// Panicked: a stage of the gate panicked and the call was denied by
	// it (Stage names it; Reason says so). The caller logs it.
	Panicked bool
	// Stage names the stage that decided, for logs: one of "session",
	// "budget", "tool_set", "schema", "trust_tier", "policy", "approval",
	// or "gate" when no stage could decide.
	Stage string
	// UpdatedInput, on an allow, is the input the tool must run with
	// instead of the one asked about (a search the policy narrowed); nil
	// when the call runs as asked.
	UpdatedInput policy.Input
	// Shadow is what the run's shadow policy would have decided; set only
	// when the policy stage ran in a run that has one. It never changes
	// any other field.
	Shadow *Shadow
}

// Tool is one tool as frozen into a run.
type Tool struct {
	Name  string
	Class capability.Class
	// Schema is the compiled frozen input schema; nil when !Callable.
	Schema *schemaguard.Schema
	// Callable is false when the schema failed the pre-guard at freeze
	// time; Reason then says why.
	Callable bool
	Reason   string
	// ConnectionID is "" for a sandbox tool; a brokered tool names the
	// connection it is called through.
	ConnectionID string
}

// Binding is a run's frozen binding to a connection.
type Binding struct {
	ConnectionID string
	// Generation is the connection's authorization generation at freeze
	// time; a reconnect bumps it and makes the binding stale.
	Generation int
	// Owner is the member whose personal connection this is ("" for a
	// shared connection).
	Owner string
	// ToolSetDigest is the connection's tool-set digest at freeze time.
	ToolSetDigest string
}

// Connection statuses as read by the caller into Live.Status.
const (
	ConnectionActive  = "active"
	ConnectionRevoked = "revoked"
	// ConnectionAuthorizationRequired: an OAuth connection whose grant is
	// gone; refused like any non-active status, with a reason to
	// re-authorize.
	ConnectionAuthorizationRequired = "authorization_required"
)

// Live is a connection as it is now, read by the caller for a brokered call.
// The zero value is a connection that does not exist.
type Live struct {
	Found bool
	// Status is ConnectionActive or ConnectionRevoked; anything other than
	// ConnectionActive is refused.
	Status        string
	Generation    int
	ToolSetDigest string
	// OwnerActive reports that the personal owner's membership is active.
	// The caller sets it to true for a shared connection, which has no
	// owner to lose; false always refuses, so forgetting it fails closed.
	OwnerActive bool
}

// Run is a run's frozen state plus the mutable head fields a decision
// depends on.
type Run struct {
	Ended           bool
	AvailableMicros int64
	TrustTier       trust.Tier
	Autonomous      bool
	// Tools is the frozen tool set, by tool name.
	Tools map[string]*Tool
	// Policy is the frozen policy snapshot.
	Policy *policy.Policy
	// Shadow is the frozen shadow policy, evaluated beside Policy at the
	// policy stage and never enforced; nil for none. ShadowBroken marks a
	// run whose frozen shadow document could not be compiled: its policy
	// stage records a shadow error, and decides as it would without one.
	Shadow       *policy.Policy
	ShadowBroken bool
	// Bindings are the frozen connection bindings, by connection id.
	Bindings map[string]Binding
	// Workspace is the run's declared workspace ("" for none): relative
	// path globs of the policy resolve against it.
	Workspace string
	// PendingApprovals is how many of the run's approvals are waiting for a
	// human; MaxPendingApprovals is how many may (0: the default).
	PendingApprovals    int64
	MaxPendingApprovals int
	// SourceFull: the runs of this run's trigger source (a pull request's
	// repository and author, a schedule) already have MaxPendingApprovals
	// approvals waiting together, as the caller found when it tried to
	// file one. The caller's write holds the cap whatever this says; this
	// only makes the answer a denial the model can act on.
	SourceFull bool
	// Grants are the run's session grants, read by the caller before
	// Decide; the zero value holds none, which only ever asks more.
	Grants policy.Grants
}

// Request is one tool call.
type Request struct {
	ToolName string
	// Input is the call's arguments, decoded with json.Decoder.UseNumber.
	Input any
	// Connections holds the live state of the connections the tool needs,
	// by connection id.
	Connections map[string]Live
	// Cwd is the runner's working directory, when it sent one; relative
	// paths of the input resolve against it.
	Cwd string
	// Resolved maps path-bearing input fields to the paths the sandbox
	// resolved them to (symlinks followed), when the runner sent them. A
	// file call is allowed only if both paths are, denied if either is.
	Resolved map[string]string
	// Kinds maps path-bearing input fields to what the sandbox found there
	// (policy.KindFile, KindDir, KindAbsent), when the runner sent them.
	Kinds map[string]string
	// Report is what the sandbox found under the directory a Glob walks,
	// when the runner sent it (policy.Env.Report).
	Report *tree.Report
	// AgentType is the type of the subagent making the call, as the
	// runner reported it; empty for the run's main agent. Policies match
	// it (match.agent_type).
	AgentType string
}

// stage is one step of the gate. decide returns the decision and true when
// the stage settles the call, or false to pass it to the next stage.
// source is what the stage denies with when it fails unexpectedly.
type stage struct {
	name   string
	source Source
	decide func(c *call) (Decision, bool)
}

// stages is the gate. The order of this literal is the security model: a
// stage may rely on every stage above it having passed, and the first stage
// that decides wins. Do not reorder without rewriting the stage comments.
var stages = []stage{
	{"session", SourceSession, checkSession},
	{"budget", SourceBudget, checkBudget},
	{"tool_set", SourceCapability, checkToolSet},
	{"schema", SourceSchema, checkSchema},
	{"trust_tier", SourceTrustTier, checkTrustTier},
	{"policy", SourcePolicy, checkPolicy},
	{"approval", SourcePolicy, checkApproval},
}

// runStages is how many of the first stages read the run alone (session,
// budget): what they deny, they deny for every call of the run.
const runStages = 2

// RunRefuses is what the gate's first stages answer for any call of run:
// a denial and true when the run itself allows no call any more (it has
// ended, or spent its budget), whatever the call. A decision made earlier
// that would allow a call, a person's approval of a call that waited for
// one, is held to it when it is settled: the run may have ended or run
// out while the call waited.
func RunRefuses(run *Run) (Decision, bool) {
	c := &call{run: run}
	for _, s := range stages[:runStages] {
		if d, done := s.decide(c); done {
			d.Stage = s.name
			return settle(d), true
		}
	}
	return Decision{}, false
}

// call is what the stages learn about one call as it moves down the gate.
type call struct {
	run *Run
	req Request
	// tool is set by the tool_set stage once the tool is known frozen.
	tool *Tool
	// result is set by the policy stage when it defers to approval.
	result    policy.Result
	evaluated bool
	// shadow is set by the policy stage in a run with a shadow policy.
	shadow *Shadow
	// prepared is the call as the policy package reads it; see
	// policyCall.
	prepared *policy.Call
}

// env is where the call happens, as the policy package reads it.
func (c *call) env() policy.Env {
	return policy.Env{Workspace: c.run.Workspace, Cwd: c.req.Cwd, Resolved: c.req.Resolved, Kinds: c.req.Kinds, Report: c.req.Report, AgentType: c.req.AgentType}
}

// policyCall returns the call prepared once for the policy package, so that
// the trust tier, the enforced and the shadow policy and the session grants
// all read one analysis of a Bash line instead of parsing it each.
func (c *call) policyCall() *policy.Call {
	if c.prepared == nil {
		c.prepared = policy.NewCall(c.req.ToolName, c.req.Input)
	}
	return c.prepared
}

// reasonPanic starts the reason of a decision made because a stage
// panicked.
const reasonPanic = "the gate failed internally while deciding this call, so it is denied"

// Decide runs the stages in order and returns the first decision. It never
// returns allow unless every stage passed and the policy (or a session
// grant, or the autonomy fallback) allowed.
func Decide(run *Run, req Request) Decision { return decideWith(stages, run, req) }

// decideWith runs the given stages (the gate's, or a test's); its named
// result lets a panic in a stage be turned into that stage's denial.
func decideWith(stages []stage, run *Run, req Request) (d Decision) {
	c := &call{run: run, req: req}
	i := 0
	defer func() {
		// A stage must not panic; if one does, the call is denied by that
		// stage. Only the gate's own stages (and the policy and schema
		// code they call) run inside Decide: every input is a value the
		// caller read before, so no caller code can panic in here and
		// have its failure turned into a deny that hides it.
		if r := recover(); r != nil {
			s := stages[min(i, len(stages)-1)]
			d = Decision{Outcome: policy.VerdictDeny, Source: s.source, Stage: s.name, Reason: reasonPanic, Panicked: true}
		}
	}()
	for ; i < len(stages); i++ {
		s := stages[i]
		if dec, done := s.decide(c); done {
			dec.Stage = s.name
			dec = settle(dec)
			dec.Shadow = c.shadow
			return dec
		}
	}
	return Decision{Outcome: policy.VerdictDeny, Source: SourcePolicy, Stage: "gate",
		Reason: "no stage of the gate allowed this call, so it is denied"}
}

// settle is the last line of defence: an outcome that is not one of the
// three, or a deny without a source, is turned into a well-formed deny.
func settle(d Decision) Decision {
	switch d.Outcome {
	case policy.VerdictAllow, policy.VerdictRequireApproval:
		d.Source = ""
		return d
	case policy.VerdictDeny:
		if d.Source == "" {
			d.Source = SourcePolicy
		}
		return d
	}
	return Decision{Outcome: policy.VerdictDeny, Source: SourcePolicy, Stage: d.Stage,
		Reason: "the gate produced no valid outcome for this call, so it is denied"}
}

func deny(src Source, format string, a ...any) (Decision, bool) {
	reason := format // a constant reason costs no allocation
	if len(a) > 0 {
		reason = fmt.Sprintf(format, a...)
	}
	return Decision{Outcome: policy.VerdictDeny, Source: src, Reason: reason}, true
}

// next passes the call to the following stage.
func next() (Decision, bool) { return Decision{}, false }

// maxQuoted bounds how much of a caller-supplied name a reason repeats.
const maxQuoted = 128

// quote renders a name for a reason: Go-quoted and cut to maxQuoted bytes,
// so a model cannot make the gate echo an arbitrarily long string.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
