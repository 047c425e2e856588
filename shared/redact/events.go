package redact

import "github.com/fluidbox/fluidbox/shared/vocab"

// SessionCreated opens a run's ledger as event 1.
type SessionCreated struct {
	SessionID     string `json:"session_id"`
	PolicyID      string `json:"policy_id"`
	PolicyVersion int    `json:"policy_version"`
	PolicyDigest  string `json:"policy_digest"`
	ToolSetDigest string `json:"tool_set_digest"`
	Tools         int    `json:"tools"`
	TrustTier     string `json:"trust_tier"`
	Autonomous    bool   `json:"autonomous"`
	BudgetMicros  int64  `json:"budget_limit_micros"`
	Trigger       string `json:"trigger"`
	Invoker       string `json:"invoker"`
	// GitHub is set when a GitHub delivery created the run.
	GitHub *GitHubTrigger `json:"github,omitempty"`
	// The shadow policy frozen beside the enforced one, if any.
	ShadowPolicyID      string `json:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int    `json:"shadow_policy_version,omitempty"`
	ShadowPolicyDigest  string `json:"shadow_policy_digest,omitempty"`
}

func (SessionCreated) eventType() Type { return TypeSessionCreated }

// GitHubTrigger names the GitHub delivery that created a run: ids, names and
// the head commit from the verified payload, never the payload itself.
type GitHubTrigger struct {
	TriggerID      string `json:"trigger_id"`
	DeliveryID     string `json:"delivery_id"`
	Event          string `json:"event"`
	Action         string `json:"action"`
	Repository     string `json:"repository"`
	HeadRepository string `json:"head_repository"`
	PullRequest    int    `json:"pull_request"`
	HeadSHA        string `json:"head_sha"`
	Fork           bool   `json:"fork"`
	// Author is the pull request author's GitHub user id.
	Author string `json:"author,omitempty"`
	// Ref and ScheduledFor: a scheduled run's branch and due time.
	Ref          string `json:"ref,omitempty"`
	ScheduledFor string `json:"scheduled_for,omitempty"`
}

// SessionEnded closes a run. A run ended by its runner also says how its
// agent finished: why, the exit status (-1: none), and the digest of the
// final message, whose text is kept outside the ledger for the report.
type SessionEnded struct {
	EndedBy            string  `json:"ended_by"`
	Reason             string  `json:"reason,omitempty"`
	ExitStatus         *int    `json:"exit_status,omitempty"`
	FinalMessageDigest *Digest `json:"final_message_digest,omitempty"`
}

func (SessionEnded) eventType() Type { return TypeSessionEnded }

// TokenIssued records that the tokens of a run created without usable ones
// (a triggered run) were issued, and to whom: never the tokens.
type TokenIssued struct {
	IssuedBy string `json:"issued_by"`
	// By is the kind of credential that asked: "admin", "user" or
	// "trigger" (the runner key of the trigger that created the run).
	By string `json:"by"`
}

func (TokenIssued) eventType() Type { return TypeTokenIssued }

// WorkspaceFetched records that the control plane fetched a run's frozen
// commit with its GitHub App and served it to the runner: the commit, the
// archive's digest and size, never a file or the installation token.
type WorkspaceFetched struct {
	Repository    string `json:"repository"`
	PullRequest   int    `json:"pull_request,omitempty"`
	Commit        string `json:"commit"`
	ArchiveDigest Digest `json:"archive_digest"`
	ArchiveBytes  int64  `json:"archive_bytes"`
	Files         int    `json:"files"`
}

func (WorkspaceFetched) eventType() Type { return TypeWorkspaceFetched }

// RunLaunched records that a launcher started a runner for the run and
// handed it a single-use launch credential (never the credential).
type RunLaunched struct {
	Launcher string `json:"launcher"`
	By       string `json:"by"`
}

func (RunLaunched) eventType() Type { return TypeRunLaunched }

// LaunchRefused records the first use of a run's launch credential after
// its one good use: someone holds a copy of what should be spent.
type LaunchRefused struct {
	Reason string `json:"reason"`
}

func (LaunchRefused) eventType() Type { return TypeLaunchRefused }

// RunReported records that the control plane posted a run's result to its
// pull request: what (check_run or comment), GitHub's id for it, and the
// digest of the posted body, never the text.
type RunReported struct {
	Kind        string `json:"kind"`
	ID          int64  `json:"id"`
	Repository  string `json:"repository"`
	PullRequest int    `json:"pull_request"`
	BodyDigest  Digest `json:"body_digest"`
}

func (RunReported) eventType() Type { return TypeRunReported }

// ToolRequested records that a tool call was asked about. The input is kept
// only as its digest.
type ToolRequested struct {
	ToolCallID  string `json:"tool_call_id"`
	ToolName    string `json:"tool_name"`
	InputDigest Digest `json:"input_digest"`
	// AgentID and AgentType name the subagent that made the call (Claude
	// Code's hook input); empty for the run's main agent. Identifiers the
	// runner reports, not input: bounded and checked by permission.
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
}

func (ToolRequested) eventType() Type { return TypeToolRequested }

// ToolDecision records the gate's answer. Reasons are not kept: a reason may
// quote the input (a schema error names properties), so the ledger keeps the
// source and rule that decided, which is what an audit needs.
type ToolDecision struct {
	ToolCallID       string         `json:"tool_call_id"`
	ToolName         string         `json:"tool_name"`
	Decision         vocab.Decision `json:"decision"`
	Source           string         `json:"source,omitempty"`
	RuleID           string         `json:"rule_id,omitempty"`
	Verdict          string         `json:"verdict,omitempty"`
	RewrittenVerdict string         `json:"rewritten_verdict,omitempty"`
	ApprovalID       string         `json:"approval_id,omitempty"`
	Grant            string         `json:"grant,omitempty"`
	// UpdatedInputDigest is the digest of the input the tool runs with
	// when the gate narrowed it (tool.requested has the asked one's).
	UpdatedInputDigest Digest `json:"updated_input_digest,omitzero"`
	Shadow
}

// Shadow is what a run's shadow policy would have decided, on the event of
// a decision whose policy stage ran, only when it differs from what the
// enforced policy decided (all empty otherwise). Like the enforced side it
// keeps the verdict and the rule, never a reason (which may name parts of
// the input); Error is a fixed code saying the shadow could not decide.
type Shadow struct {
	ShadowVerdict          string `json:"shadow_verdict,omitempty"`
	ShadowRewrittenVerdict string `json:"shadow_rewritten_verdict,omitempty"`
	ShadowRuleID           string `json:"shadow_rule_id,omitempty"`
	ShadowError            string `json:"shadow_error,omitempty"`
}

func (ToolDecision) eventType() Type { return TypeToolDecision }

// ApprovalRequested records that a call now waits for a human.
type ApprovalRequested struct {
	ApprovalID   string `json:"approval_id"`
	ToolCallID   string `json:"tool_call_id"`
	ToolName     string `json:"tool_name"`
	RuleID       string `json:"rule_id,omitempty"`
	ScopeKey     string `json:"scope_key"`
	DefaultScope string `json:"default_scope"`
	ExpiresAt    string `json:"expires_at"`
	InputDigest  Digest `json:"input_digest"`
	Shadow
}

func (ApprovalRequested) eventType() Type { return TypeApprovalRequested }

// ApprovalDecided records how a pending approval was settled.
type ApprovalDecided struct {
	ApprovalID string               `json:"approval_id"`
	ToolCallID string               `json:"tool_call_id"`
	Status     vocab.ApprovalStatus `json:"status"`
	DecidedBy  string               `json:"decided_by"`
}

func (ApprovalDecided) eventType() Type { return TypeApprovalDecided }

// ToolBrokered records a call the control plane made upstream: latency and
// the digest of the result, never the result.
type ToolBrokered struct {
	ToolCallID   string `json:"tool_call_id"`
	ToolName     string `json:"tool_name"`
	ConnectionID string `json:"connection_id"`
	LatencyMS    int64  `json:"latency_ms"`
	ResultDigest Digest `json:"result_digest"`
	IsError      bool   `json:"is_error"`
	// Elicitations are the upstream's requests for input during the call
	// (MCP elicitation, or 2026-07-28 input_required), as the broker
	// answered them.
	Elicitations []Elicitation `json:"elicitations,omitempty"`
}

func (ToolBrokered) eventType() Type { return TypeToolBrokered }

// BudgetReserved records an admission.
type BudgetReserved struct {
	ReservationID  string `json:"reservation_id"`
	RequestID      string `json:"request_id"`
	Model          string `json:"model"`
	ReservedMicros int64  `json:"reserved_micros"`
	// ServerTools are the anthropic-server-tools a proxied request offered
	// (names only). MaxTokensRequested is set when the proxy lowered the
	// request's max_tokens to MaxTokensForwarded to fit the budget.
	ServerTools        []string `json:"server_tools,omitempty"`
	MaxTokensRequested int64    `json:"max_tokens_requested,omitempty"`
	MaxTokensForwarded int64    `json:"max_tokens_forwarded,omitempty"`
}

func (BudgetReserved) eventType() Type { return TypeBudgetReserved }

// BudgetReconciled records real usage and cost for a reservation.
type BudgetReconciled struct {
	ReservationID            string `json:"reservation_id"`
	RequestID                string `json:"request_id"`
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CostMicros               int64  `json:"cost_micros"`
	Settlement               string `json:"settlement"`
	// Server tools: the 1-hour share of the cache writes, the billed
	// counts, and how many times each server tool ran (names and counts).
	CacheCreation1hInputTokens int64            `json:"cache_creation_1h_input_tokens,omitempty"`
	WebSearchRequests          int64            `json:"web_search_requests,omitempty"`
	WebFetchRequests           int64            `json:"web_fetch_requests,omitempty"`
	ServerToolUses             map[string]int64 `json:"server_tool_uses,omitempty"`
}

// ModelRefused records a model request the proxy refused before anything
// was forwarded: why (a fixed reason code), and for a gate refusal the
// server tool and the stage that denied it. Never the request's content.
type ModelRefused struct {
	RequestID string `json:"request_id"`
	Model     string `json:"model,omitempty"`
	Status    int    `json:"status"`
	Reason    string `json:"reason"`
	Tool      string `json:"tool,omitempty"`
	Stage     string `json:"stage,omitempty"`
	Source    string `json:"source,omitempty"`
	// NeededMicros and AvailableMicros explain a budget refusal.
	NeededMicros    int64 `json:"needed_micros,omitempty"`
	AvailableMicros int64 `json:"available_micros,omitempty"`
}

func (ModelRefused) eventType() Type { return TypeModelRefused }

func (BudgetReconciled) eventType() Type { return TypeBudgetReconciled }

// GrantRevoked records that a session grant was withdrawn mid-run.
type GrantRevoked struct {
	ScopeKey  string `json:"scope_key"`
	RevokedBy string `json:"revoked_by"`
}

func (GrantRevoked) eventType() Type { return TypeGrantRevoked }

// Violation says how a tool result the model proxy saw was not one the gate
// allowed. Violations are persisted and on the wire: never rename one.
type Violation string

// The violations of the model proxy's check.
const (
	// ViolationUnasked: a result (not an error) answers a tool_use the
	// gate was never asked about.
	ViolationUnasked Violation = "unasked"
	// ViolationInputMismatch: the gate allowed the call with another
	// input (or another tool) than the tool_use the result answers.
	ViolationInputMismatch Violation = "input_mismatch"
	// ViolationDeniedResult: the gate did not allow the call (denied, or
	// still pending), and its result is not an error.
	ViolationDeniedResult Violation = "denied_result"
)

// RunHalted records that the model proxy ended a run (verify "halt")
// because a tool result answered a call the gate did not allow with that
// input. ToolCallID is the tool_use id (the proxy admits only the API's
// id alphabet); never the input or the result.
type RunHalted struct {
	ToolCallID string    `json:"tool_call_id"`
	Reason     Violation `json:"reason"`
}

func (RunHalted) eventType() Type { return TypeRunHalted }

// ToolUnverified records the same finding in a run that only records it
// (verify "record"): the request was forwarded and the run goes on.
type ToolUnverified struct {
	ToolCallID string    `json:"tool_call_id"`
	Reason     Violation `json:"reason"`
}

func (ToolUnverified) eventType() Type { return TypeToolUnverified }
