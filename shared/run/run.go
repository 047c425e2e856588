// Package run creates, reads and ends runs (the API's sessions).
//
// Creating a run freezes, into the run's own records, everything the gate
// will judge it by: every tool it may call with its class and schema (a
// schema that fails the pre-guard freezes the tool as un-callable, with the
// reason), the tool-set digest, the full policy document (a copy, not a
// reference to something editable) and, when the run names one, the shadow
// policy's document the same way, the trust tier, the autonomy flag and
// the budget, and for each attached connection its binding (generation,
// owner, tool-set digest) and its photographed tools as mcp__<name>__<tool>.
// Nothing edits these afterwards; editing a policy or refreshing a
// connection affects only runs created later.
package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/trust"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// InvalidError is a request the caller must fix; Field names what is wrong.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound: no such run.
var ErrNotFound = errors.New("run: not found")

// Service manages runs.
type Service struct {
	led     *ledger.Ledger
	st      *store.Store
	now     func() time.Time
	schemas *schemaguard.Cache
}

// NewService returns a run service over a ledger. Compiled schemas are
// cached by digest: the built-in bundle's are compiled once per process.
func NewService(led *ledger.Ledger, now func() time.Time) *Service {
	return &Service{led: led, st: led.Store(), now: now, schemas: schemaguard.NewCache(1024)}
}

// CreateRequest is the body of POST /v1/sessions.
type CreateRequest struct {
	PolicyID      string   `json:"policy_id"`
	PolicyVersion int      `json:"policy_version,omitempty"`
	Capabilities  []string `json:"capabilities"`
	Connections   []string `json:"connections,omitempty"`
	Autonomous    bool     `json:"autonomous"`
	Budget        *struct {
		LimitUSD *float64 `json:"limit_usd"`
	} `json:"budget"`
	TrustTier string   `json:"trust_tier,omitempty"`
	Trigger   *Trigger `json:"trigger,omitempty"`
	// Workspace is the absolute directory the agent works in (e.g.
	// "/work/app"); the policy's relative path globs resolve against it.
	Workspace string `json:"workspace,omitempty"`
	// ShadowPolicyID (and optionally ShadowPolicyVersion, else the latest)
	// names a second policy, frozen like the enforced one, evaluated
	// beside it on every call and recorded where it differs, never
	// enforced.
	ShadowPolicyID      string `json:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int    `json:"shadow_policy_version,omitempty"`
	// Verify is what the model proxy does when a tool result answers a
	// call the gate did not allow with that input: VerifyHalt (the
	// default) ends the run, VerifyRecord only records it.
	Verify Verify `json:"verify,omitempty"`
}

// Verify is a run's setting for the model proxy's check of tool results.
// Values are persisted and on the wire: never rename one.
type Verify string

// Verify settings.
const (
	VerifyHalt   Verify = "halt"
	VerifyRecord Verify = "record"
)

// VerifyOf is the setting a run's head holds: anything but "record" (and
// so every run made before the setting existed) halts.
func VerifyOf(h store.Head) Verify {
	if Verify(h.Verify) == VerifyRecord {
		return VerifyRecord
	}
	return VerifyHalt
}

// Trigger says what started a run.
type Trigger struct {
	Type string `json:"type"`
}

// View is a run as the API shows it.
type View struct {
	ID    string `json:"id"`
	Token string `json:"token,omitempty"`
	// RunnerToken is shown once, beside Token, and stays with the runner:
	// it reports model usage and ends the run; the sandbox never gets it.
	RunnerToken   string          `json:"runner_token,omitempty"`
	Status        vocab.RunStatus `json:"status"`
	TrustTier     trust.Tier      `json:"trust_tier"`
	Autonomous    bool            `json:"autonomous"`
	PolicyID      string          `json:"policy_id"`
	PolicyVersion int             `json:"policy_version"`
	PolicyDigest  string          `json:"policy_digest"`
	// The shadow policy frozen beside the enforced one, if any.
	ShadowPolicyID      string   `json:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int      `json:"shadow_policy_version,omitempty"`
	ShadowPolicyDigest  string   `json:"shadow_policy_digest,omitempty"`
	ToolSetDigest       string   `json:"tool_set_digest"`
	Tools               []string `json:"tools"`
	Capabilities        []string `json:"capabilities"`
	Trigger             string   `json:"trigger"`
	// GitHub names the delivery that created the run (trigger "github").
	GitHub    *store.GitHubTrigger `json:"github,omitempty"`
	Invoker   string               `json:"invoker"`
	Workspace string               `json:"workspace,omitempty"`
	CreatedAt string               `json:"created_at"`
	// Warnings are shown once, when the run is created: parts of the
	// frozen policy that cannot do what they seem to in this run.
	Warnings []string   `json:"warnings,omitempty"`
	LastSeq  *int64     `json:"last_seq,omitempty"`
	Budget   BudgetView `json:"budget"`
	// TokenPending: a triggered run whose tokens nobody holds yet (POST
	// /v1/sessions/{id}/token issues them, once).
	TokenPending bool `json:"token_pending,omitempty"`
	// Verify is the run's setting for the model proxy's check.
	Verify Verify `json:"verify"`
}

// BudgetView is a run's budget in USD.
type BudgetView struct {
	LimitUSD     float64 `json:"limit_usd"`
	AvailableUSD float64 `json:"available_usd"`
	ReservedUSD  float64 `json:"reserved_usd"`
	SpentUSD     float64 `json:"spent_usd"`
}

// MaxCapabilities bounds how many bundles one run may attach.
const MaxCapabilities = 32

// Create freezes and writes a new run and returns it with its token, which
// is shown this once and stored only as a hash.
func (s *Service) Create(ctx context.Context, who auth.Principal, req CreateRequest) (View, error) {
	// A manual run derives "trusted"; a caller may only narrow it.
	p, err := s.prepare(ctx, req, trust.Trusted, who.Subject)
	if err != nil {
		return View{}, err
	}
	token, hash, err := auth.NewSessionToken()
	if err != nil {
		return View{}, err
	}
	runner, runnerHash, err := auth.NewRunnerToken()
	if err != nil {
		return View{}, err
	}
	v, err := s.write(ctx, p, origin{id: ids.New("ses_"), invoker: who.Subject, trigger: "manual", tokenHash: hash, runnerHash: runnerHash})
	if err != nil {
		return View{}, err
	}
	v.Token, v.RunnerToken = token.Reveal(), runner.Reveal()
	return v, nil
}

// Check validates req exactly as Create would, resolving the policy and the
// bundles it names, and writes nothing. Trigger configurations are checked
// with it, so a bad one is refused when it is made, not when an event comes.
func (s *Service) Check(ctx context.Context, req CreateRequest) error {
	_, err := s.prepare(ctx, req, trust.Trusted, "")
	return err
}

// Triggered is what a trigger knows about the run it starts.
type Triggered struct {
	// RunID is chosen by the trigger (derived from the delivery id), so a
	// retried delivery creates or finds the same run, never a second one.
	RunID string
	// Type is the trigger's type as runs record it, e.g. "github".
	Type    string
	Invoker string
	// Tier is the tier derived from the event. The configuration's
	// trust_tier may narrow it and nothing widens it (trust.Narrow).
	Tier   trust.Tier
	GitHub *store.GitHubTrigger
}

// ErrExists: a run with the trigger's run id exists already.
var ErrExists = errors.New("run: exists")

// CreateForTrigger freezes and writes a run a trigger starts, from its
// configuration (cfg, validated and frozen as Create does). The run gets no
// usable session token: a random one is hashed and thrown away, so nothing
// a webhook caller sees, and nothing stored, lets anyone act as the run. If
// the run id exists the answer is ErrExists and nothing is written.
func (s *Service) CreateForTrigger(ctx context.Context, cfg CreateRequest, t Triggered) (View, error) {
	if !ids.Valid("ses_", t.RunID) || t.Type == "" || t.Type == "manual" {
		return View{}, fmt.Errorf("run: create for trigger: bad run id %q or trigger type %q", t.RunID, t.Type)
	}
	if cfg.Trigger != nil {
		return View{}, invalid("trigger", "is set by the trigger itself")
	}
	p, err := s.prepare(ctx, cfg, t.Tier, t.Invoker)
	if err != nil {
		return View{}, err
	}
	_, hash, err := auth.NewSessionToken()
	if err != nil {
		return View{}, err
	}
	v, err := s.write(ctx, p, origin{id: t.RunID, invoker: t.Invoker, trigger: t.Type, github: t.GitHub, tokenHash: hash})
	if errors.Is(err, store.ErrExists) {
		return View{}, fmt.Errorf("run: create %s: %w", t.RunID, ErrExists)
	}
	return v, err
}

// prepared is a validated request with what it names resolved: everything
// a run freezes.
type prepared struct {
	policy store.PolicyVersion
	// shadow is the shadow policy's version; nil for none.
	shadow     *store.PolicyVersion
	tools      []store.Tool
	bundles    []string
	bindings   []store.Binding
	limit      budget.Micros
	tier       trust.Tier
	autonomous bool
	workspace  string
	warnings   []string
	verify     Verify
}

// origin is who or what starts a run, and the run's id and token hash.
type origin struct {
	id         string
	invoker    string
	trigger    string
	github     *store.GitHubTrigger
	tokenHash  string
	runnerHash string
}

// prepare validates req and resolves its policy, bundles and connections.
// derived is the tier the trigger derived; the request may only narrow it.
// invoker is who starts the run: only a personal connection's owner may
// attach it ("" attaches none).
func (s *Service) prepare(ctx context.Context, req CreateRequest, derived trust.Tier, invoker string) (prepared, error) {
	p := prepared{autonomous: req.Autonomous, verify: req.Verify}
	var err error
	if p.limit, p.tier, err = checkRequest(req, derived); err != nil {
		return prepared{}, err
	}
	if err := s.preparePolicies(ctx, req, &p); err != nil {
		return prepared{}, err
	}
	if err := s.prepareTools(ctx, req, invoker, &p); err != nil {
		return prepared{}, err
	}
	return p, nil
}

// checkRequest checks the request's own fields, before anything is read:
// the policy's id and version, the budget, the tier, the trigger, verify
// and the number of bundles.
func checkRequest(req CreateRequest, derived trust.Tier) (budget.Micros, trust.Tier, error) {
	if req.PolicyID == "" {
		return 0, "", invalid("policy_id", "is required")
	}
	if req.PolicyVersion < 0 {
		return 0, "", invalid("policy_version", "must be a positive version")
	}
	if req.Budget == nil || req.Budget.LimitUSD == nil {
		return 0, "", invalid("budget.limit_usd", "is required")
	}
	limit, err := budget.FromUSD(*req.Budget.LimitUSD)
	if err != nil {
		return 0, "", invalid("budget.limit_usd", "must be an amount in USD above 0, such as 5 or 0.50")
	}
	if limit <= 0 {
		// Every model call reserves from the budget first, so a run
		// without one could do nothing but be refused.
		return 0, "", invalid("budget.limit_usd", "must be above 0: a run with no budget is refused every tool call and model call (0.000001 is the smallest amount)")
	}
	tier, err := requestedTier(req.TrustTier, derived)
	if err != nil {
		return 0, "", err
	}
	if req.Trigger != nil && req.Trigger.Type != "manual" {
		return 0, "", invalid("trigger.type", "%q is not a trigger a caller can name (only \"manual\")", req.Trigger.Type)
	}
	switch req.Verify {
	case "", VerifyHalt, VerifyRecord:
	default:
		return 0, "", invalid("verify", "must be \"halt\" (the default) or \"record\"")
	}
	if len(req.Capabilities) == 0 {
		return 0, "", invalid("capabilities", "at least one capability bundle is required")
	}
	if len(req.Capabilities) > MaxCapabilities {
		return 0, "", invalid("capabilities", "at most %d bundles", MaxCapabilities)
	}
	return limit, tier, nil
}

// preparePolicies resolves the policy and the shadow policy and checks the
// workspace against each, collecting their warnings.
func (s *Service) preparePolicies(ctx context.Context, req CreateRequest, p *prepared) error {
	pv, err := s.policy(ctx, "policy", req.PolicyID, req.PolicyVersion)
	if err != nil {
		return err
	}
	var shadow *store.PolicyVersion
	switch {
	case req.ShadowPolicyID != "":
		sv, err := s.policy(ctx, "shadow_policy", req.ShadowPolicyID, req.ShadowPolicyVersion)
		if err != nil {
			return err
		}
		shadow = &sv
	case req.ShadowPolicyVersion != 0:
		return invalid("shadow_policy_version", "is set without shadow_policy_id")
	}

	ws, warnings, err := checkWorkspace(req.Workspace, pv.Document)
	if err != nil {
		return err
	}
	if shadow != nil {
		if shadow.Digest == pv.Digest {
			warnings = append(warnings, "the shadow policy is the same document as the enforced one, so it can never differ from it")
		}
		_, more, err := checkWorkspace(req.Workspace, shadow.Document)
		if err != nil {
			return err
		}
		for _, w := range more {
			warnings = append(warnings, "shadow "+w)
		}
	}
	p.policy, p.shadow, p.workspace, p.warnings = pv, shadow, ws, warnings
	return nil
}

// prepareTools resolves the capability bundles and the connections into
// one list of tools, sorted by name, refusing a name given twice.
func (s *Service) prepareTools(ctx context.Context, req CreateRequest, invoker string, p *prepared) error {
	tools, bundles, err := s.resolveTools(ctx, req.Capabilities)
	if err != nil {
		return err
	}
	brokered, bindings, err := s.resolveConnections(ctx, invoker, req.Connections)
	if err != nil {
		return err
	}
	if len(brokered) > 0 {
		names := map[string]bool{}
		for _, t := range tools {
			names[t.Name] = true
		}
		for _, t := range brokered {
			if names[t.Name] {
				return invalid("connections", "tool %q is named twice in this run", t.Name)
			}
			names[t.Name] = true
		}
		tools = append(tools, brokered...)
		slices.SortFunc(tools, func(a, b store.Tool) int { return strings.Compare(a.Name, b.Name) })
	}
	p.tools, p.bundles, p.bindings = tools, bundles, bindings
	return nil
}

// policy resolves the policy version a run freezes: field is "policy" or
// "shadow_policy", the request's field names for id and version.
func (s *Service) policy(ctx context.Context, field, id string, version int) (store.PolicyVersion, error) {
	if version < 0 {
		return store.PolicyVersion{}, invalid(field+"_version", "must be a positive version")
	}
	if !ids.Valid("pol_", id) {
		// Checked before it becomes a key: DynamoDB refuses a key over
		// 2 KiB, and an id of the wrong shape names no policy anyway.
		return store.PolicyVersion{}, invalid(field+"_id", "%.60q is not a policy id (pol_ and up to 64 of a-z, 0-9, _ and -)", id)
	}
	pv, err := s.st.GetPolicy(ctx, id, version)
	if errors.Is(err, store.ErrNotFound) {
		if version > 0 {
			return store.PolicyVersion{}, invalid(field+"_version", "policy %q has no version %d", id, version)
		}
		return store.PolicyVersion{}, invalid(field+"_id", "no policy %q", id)
	}
	return pv, err
}

// maxWorkspace bounds the workspace path.
const maxWorkspace = 1024

// checkWorkspace validates a run's workspace (absolute and clean) and warns
// about the policy's relative path globs in a run without one: they would
// match only relative paths, and Claude Code sends absolute ones.
func checkWorkspace(ws, document string) (string, []string, error) {
	if ws != "" {
		if len(ws) > maxWorkspace || !strings.HasPrefix(ws, "/") || path.Clean(ws) != ws || strings.ContainsAny(ws, "\x00\n\r") {
			return "", nil, invalid("workspace", "must be an absolute, clean path of at most %d bytes, such as \"/work/app\"", maxWorkspace)
		}
		return ws, nil, nil
	}
	p, _, err := policy.Parse([]byte(document))
	if err != nil {
		return "", nil, fmt.Errorf("run: frozen policy does not compile: %w", err)
	}
	var warnings []string
	for _, g := range p.RelativeGlobs() {
		warnings = append(warnings, "policy path glob "+g+" is relative and this run has no workspace, so it matches only relative paths (Claude Code sends absolute ones); set \"workspace\" to resolve it")
	}
	return "", warnings, nil
}

// write freezes p into a new run with o's id and writes it.
func (s *Service) write(ctx context.Context, p prepared, o origin) (View, error) {
	pv, tools := p.policy, p.tools
	now := store.FormatTime(s.now())
	head := store.Head{
		RunID:           o.id,
		Status:          vocab.Running,
		TokenHash:       o.tokenHash,
		RunnerTokenHash: o.runnerHash,
		Invoker:         o.invoker,
		TrustTier:       string(p.tier),
		Autonomous:      p.autonomous,
		PolicyID:        pv.PolicyID,
		PolicyVersion:   pv.Version,
		PolicyDigest:    pv.Digest,
		ToolSetDigest:   toolSetDigest(tools),
		Capabilities:    p.bundles,
		Trigger:         o.trigger,
		GitHub:          o.github,
		CreatedAt:       now,
		BudgetLimit:     int64(p.limit),
		BudgetAvailable: int64(p.limit),
		Workspace:       p.workspace,
	}
	if p.verify == VerifyRecord {
		head.Verify = string(VerifyRecord)
	}
	var shadow *store.PolicySnapshot
	if sv := p.shadow; sv != nil {
		head.ShadowPolicyID, head.ShadowPolicyVersion, head.ShadowPolicyDigest = sv.PolicyID, sv.Version, sv.Digest
		shadow = &store.PolicySnapshot{PolicyID: sv.PolicyID, Version: sv.Version, Digest: sv.Digest, Document: sv.Document}
	}
	for _, t := range tools {
		head.Tools = append(head.Tools, t.Name)
	}
	created, err := redact.New(redact.SessionCreated{
		SessionID:     o.id,
		PolicyID:      pv.PolicyID,
		PolicyVersion: pv.Version,
		PolicyDigest:  pv.Digest,
		ToolSetDigest: head.ToolSetDigest,
		Tools:         len(tools),
		TrustTier:     string(p.tier),
		Autonomous:    p.autonomous,
		BudgetMicros:  int64(p.limit),
		Trigger:       o.trigger,
		Invoker:       o.invoker,
		GitHub:        redactGitHub(o.github),

		ShadowPolicyID:      head.ShadowPolicyID,
		ShadowPolicyVersion: head.ShadowPolicyVersion,
		ShadowPolicyDigest:  head.ShadowPolicyDigest,
	})
	if err != nil {
		return View{}, err
	}
	err = s.st.CreateRun(ctx, store.NewRun{
		Head:     head,
		Tools:    tools,
		Policy:   store.PolicySnapshot{PolicyID: pv.PolicyID, Version: pv.Version, Digest: pv.Digest, Document: pv.Document},
		Shadow:   shadow,
		Bindings: p.bindings,
		Created:  created,
	})
	if err != nil {
		return View{}, fmt.Errorf("run: create: %w", err)
	}
	head.LastSeq = 1
	v := view(head)
	v.Warnings = p.warnings
	return v, nil
}

func redactGitHub(g *store.GitHubTrigger) *redact.GitHubTrigger {
	if g == nil {
		return nil
	}
	r := redact.GitHubTrigger(*g)
	return &r
}

// requestedTier combines the tier a request names with the derived one.
func requestedTier(s string, derived trust.Tier) (trust.Tier, error) {
	t := trust.Tier(s)
	if s != "" && !t.Valid() {
		return "", invalid("trust_tier", "%.40q is not one of %s, %s", s, trust.Trusted, trust.ReadOnly)
	}
	return trust.Narrow(t, derived), nil
}

// resolveTools loads the named bundles and freezes their tools. Every schema
// goes through the pre-guard again at freeze time: a tool whose schema fails
// it is frozen un-callable, with the reason, rather than dropped.
func (s *Service) resolveTools(ctx context.Context, names []string) ([]store.Tool, []string, error) {
	var tools []store.Tool
	var bundles []string
	seen := map[string]string{}
	for i, name := range names {
		b, err := s.bundle(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, invalid(fmt.Sprintf("capabilities[%d]", i), "no capability bundle %q", name)
		}
		if err != nil {
			return nil, nil, err
		}
		if slices.Contains(bundles, b.ID) {
			return nil, nil, invalid(fmt.Sprintf("capabilities[%d]", i), "bundle %q is listed twice", name)
		}
		bundles = append(bundles, b.ID)
		for _, t := range b.Tools {
			if other, dup := seen[t.Name]; dup {
				return nil, nil, invalid(fmt.Sprintf("capabilities[%d]", i), "tool %q is in both %q and %q", t.Name, other, b.Name)
			}
			seen[t.Name] = b.Name
			tools = append(tools, s.freeze(t, "capability:"+b.ID))
		}
	}
	slices.SortFunc(tools, func(a, b store.Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools, bundles, nil
}

func (s *Service) freeze(t capability.Tool, origin string) store.Tool {
	ft := store.Tool{Name: t.Name, Class: string(t.Class), Description: t.Description, Schema: string(t.InputSchema), Origin: origin}
	digest, err := schemaguard.Digest(t.InputSchema)
	if err == nil {
		ft.SchemaDigest = digest
		_, err = s.schemas.Get(digest, t.InputSchema)
	}
	var rej *schemaguard.RejectError
	switch {
	case err == nil:
		ft.Callable = true
	case errors.As(err, &rej):
		ft.Reason = "the tool's input schema was refused: " + rej.Reason
	default:
		ft.Reason = "the tool's input schema could not be checked"
	}
	return ft
}

// bundle finds a capability bundle by id or name, built-in ones first.
func (s *Service) bundle(ctx context.Context, ref string) (capability.Bundle, error) {
	for _, b := range capability.Builtin() {
		if b.ID == ref || b.Name == ref {
			return b, nil
		}
	}
	id := ref
	if !ids.Valid("cap_", ref) {
		var err error
		if id, err = s.st.CapabilityIDByName(ctx, ref); err != nil {
			return capability.Bundle{}, err
		}
	}
	c, err := s.st.GetCapability(ctx, id)
	if err != nil {
		return capability.Bundle{}, err
	}
	var tools []capability.Tool
	if err := json.Unmarshal([]byte(c.Tools), &tools); err != nil {
		return capability.Bundle{}, fmt.Errorf("run: decode bundle %s: %w", c.ID, err)
	}
	return capability.Bundle{ID: c.ID, Name: c.Name, Digest: c.Digest, Tools: tools}, nil
}

// toolSetDigest is sha256 over the canonical, name-sorted list of what was
// frozen for each tool.
func toolSetDigest(tools []store.Tool) string {
	type entry struct {
		Name         string `json:"name"`
		Class        string `json:"class"`
		SchemaDigest string `json:"schema_digest"`
		Origin       string `json:"origin"`
		Callable     bool   `json:"callable"`
	}
	list := make([]entry, len(tools))
	for i, t := range tools {
		list[i] = entry{t.Name, t.Class, t.SchemaDigest, t.Origin, t.Callable}
	}
	b, _ := json.Marshal(list) // a slice of plain structs always encodes
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Get reads a run.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	// Settled: the view's last_seq counts every event appended so far.
	h, err := s.led.Settled(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, err
	}
	v := view(h)
	v.LastSeq = &h.LastSeq
	return v, nil
}

// End ends a run; the gate denies everything afterwards. Ending an ended
// run changes nothing.
func (s *Service) End(ctx context.Context, who auth.Principal, id string) error {
	_, err := s.end(ctx, who, id, nil)
	return err
}

// HaltedBy is who a halted run's session.ended names.
const HaltedBy = "fluidbox:model-proxy"

// Halt ends a run the model proxy caught with a tool result the gate did
// not allow: run.halted and session.ended in one append, by End's path.
// halted reports whether this call ended it (false: it had ended already,
// and nothing was written).
func (s *Service) Halt(ctx context.Context, id, toolCallID string, reason redact.Violation) (halted bool, err error) {
	ev, err := redact.New(redact.RunHalted{ToolCallID: toolCallID, Reason: reason})
	if err != nil {
		return false, err
	}
	// The halt's own item: the table's stream notifies run.halted from it.
	op, err := s.st.PutNew(store.HaltedKey(id), store.Halted{RunID: id, ToolCallID: toolCallID, Reason: string(reason), At: store.FormatTime(s.now())}, errAlreadyEnded)
	if err != nil {
		return false, err
	}
	return s.end(ctx, auth.Principal{Subject: HaltedBy}, id, []store.Op{op}, ev)
}

// end appends events (if any) and session.ended with ops, and marks the run
// ended, unless it has ended already.
func (s *Service) end(ctx context.Context, who auth.Principal, id string, ops []store.Op, events ...redact.Envelope) (bool, error) {
	ended, err := redact.New(redact.SessionEnded{EndedBy: who.Subject})
	if err != nil {
		return false, err
	}
	_, err = s.led.Append(ctx, id, func(h store.Head) (store.Batch, error) {
		if h.Status == vocab.Ended {
			return store.Batch{}, errAlreadyEnded
		}
		return store.Batch{Events: append(slices.Clip(events), ended), Head: store.HeadChange{Status: vocab.Ended}, Ops: ops}, nil
	})
	switch {
	case errors.Is(err, errAlreadyEnded):
		return false, nil
	case errors.Is(err, store.ErrNotFound):
		return false, ErrNotFound
	case err != nil:
		return false, err
	}
	return true, nil
}

var errAlreadyEnded = errors.New("run: already ended")

func view(h store.Head) View {
	return View{
		ID:            h.RunID,
		Status:        h.Status,
		TrustTier:     trust.Tier(h.TrustTier),
		Autonomous:    h.Autonomous,
		PolicyID:      h.PolicyID,
		PolicyVersion: h.PolicyVersion,
		PolicyDigest:  h.PolicyDigest,

		ShadowPolicyID:      h.ShadowPolicyID,
		ShadowPolicyVersion: h.ShadowPolicyVersion,
		ShadowPolicyDigest:  h.ShadowPolicyDigest,

		ToolSetDigest: h.ToolSetDigest,
		Tools:         nonNil(h.Tools),
		Capabilities:  nonNil(h.Capabilities),
		Trigger:       h.Trigger,
		GitHub:        h.GitHub,
		Invoker:       h.Invoker,
		Workspace:     h.Workspace,
		CreatedAt:     h.CreatedAt,
		TokenPending:  h.TokensPending(),
		Verify:        VerifyOf(h),
		Budget: BudgetView{
			LimitUSD:     budget.Micros(h.BudgetLimit).USD(),
			AvailableUSD: budget.Micros(h.BudgetAvailable).USD(),
			ReservedUSD:  budget.Micros(h.BudgetReserved).USD(),
			SpentUSD:     budget.Micros(h.BudgetSpent).USD(),
		},
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
