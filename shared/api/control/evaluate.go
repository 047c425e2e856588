package control

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strconv"
	"sync"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// evaluateRequest is a call to decide without a run: the policy's answer,
// and the gate's around it, with nothing written.
type evaluateRequest struct {
	ToolName   string `json:"tool_name"`
	Input      any    `json:"input"`
	TrustTier  string `json:"trust_tier,omitempty"`
	Autonomous bool   `json:"autonomous,omitempty"`
	Workspace  string `json:"workspace,omitempty"`
	Cwd        string `json:"cwd,omitempty"`
	// ResolvedPaths are the sandbox's resolved paths, as the hook sends.
	ResolvedPaths map[string]string `json:"resolved_paths,omitempty"`
	// Class is the class of a tool no built-in bundle describes (an MCP
	// tool's, from its bundle); without it the trust tier stage, which
	// needs a class, is skipped for such a tool.
	Class string `json:"class,omitempty"`
}

type evaluateView struct {
	Decision      gate.Outcome   `json:"decision"`
	Source        gate.Source    `json:"source,omitempty"`
	RuleID        string         `json:"rule_id,omitempty"`
	Reason        string         `json:"reason"`
	Verdict       policy.Verdict `json:"verdict,omitempty"`
	Rewritten     policy.Verdict `json:"rewritten,omitempty"`
	ScopeKey      string         `json:"scope_key,omitempty"`
	Scope         policy.Scope   `json:"scope,omitempty"`
	PolicyID      string         `json:"policy_id"`
	PolicyVersion int            `json:"policy_version"`
	Digest        string         `json:"digest"`
	Trace         evaluateTrace  `json:"trace"`
}

type evaluateTrace struct {
	Stages []gate.Step       `json:"stages"`
	Tool   evaluateTool      `json:"tool"`
	Bash   *policy.BashTrace `json:"bash,omitempty"`
}

type evaluateTool struct {
	Name string `json:"name"`
	// Class is "" when neither a built-in bundle nor the request gave one.
	Class capability.Class `json:"class,omitempty"`
	// Builtin: the tool is one of Claude Code's, judged against its
	// built-in schema and class.
	Builtin bool `json:"builtin"`
}

// builtinTools are the built-in bundles' tools compiled for the gate, by
// name (the first bundle that has a name wins, as in a run's freeze).
var builtinTools = sync.OnceValue(func() map[string]*gate.Tool {
	out := map[string]*gate.Tool{}
	for _, b := range capability.Builtin() {
		for _, t := range b.Tools {
			if _, dup := out[t.Name]; dup {
				continue
			}
			gt := &gate.Tool{Name: t.Name, Class: t.Class, Callable: true}
			s, err := schemaguard.Compile(t.InputSchema)
			if err != nil {
				gt.Callable, gt.Reason = false, "the tool's built-in schema could not be compiled"
			} else {
				gt.Schema = s
			}
			out[t.Name] = gt
		}
	}
	return out
})

func (s *Server) evaluatePolicy(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.evaluate(w, r, 0)
}

func (s *Server) evaluatePolicyVersion(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	n, err := versionParam(r)
	if err != nil {
		return err
	}
	return s.evaluate(w, r, n)
}

// evaluate decides one call against a stored policy version as a run with
// the request's tier, autonomy and workspace would, with no run, no
// approval and no ledger entry: it reads the policy and writes nothing.
func (s *Server) evaluate(w http.ResponseWriter, r *http.Request, n int) error {
	id := r.PathValue("id")
	if !ids.Valid("pol_", id) {
		return notFound("policy " + id)
	}
	var req evaluateRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	if req.ToolName == "" {
		return invalid("tool_name: is required")
	}
	tier := trust.Trusted
	if req.TrustTier != "" {
		tier = trust.Tier(req.TrustTier)
		if !tier.Valid() {
			return invalid("trust_tier: %.40q is not one of %s, %s", req.TrustTier, trust.Trusted, trust.ReadOnly)
		}
	}
	for _, f := range []struct{ name, value string }{{"workspace", req.Workspace}, {"cwd", req.Cwd}} {
		if f.value != "" && (!path.IsAbs(f.value) || path.Clean(f.value) != f.value || len(f.value) > 1024) {
			return invalid("%s: must be an absolute, clean path such as \"/work/app\"", f.name)
		}
	}
	v, err := s.st.GetPolicy(r.Context(), id, n)
	if errors.Is(err, store.ErrNotFound) {
		if n > 0 {
			return notFound("version " + strconv.Itoa(n) + " of policy " + id)
		}
		return notFound("policy " + id)
	}
	if err != nil {
		return err
	}
	p, _, err := policy.Parse([]byte(v.Document))
	if err != nil {
		return err // a stored version always parses; this is an internal failure
	}

	tool := builtinTools()[req.ToolName]
	view := evaluateTool{Name: req.ToolName, Builtin: tool != nil}
	if tool == nil && req.Class != "" {
		c := capability.Class(req.Class)
		if !c.Valid() {
			return invalid("class: %.40q is not one of read, write, execute, egress", req.Class)
		}
		tool = &gate.Tool{Name: req.ToolName, Class: c, Callable: true}
	}
	if tool != nil {
		view.Class = tool.Class
		if !view.Builtin {
			// A name the gate would give a connection's tool is judged as
			// that brokered tool, which a read_only run may never call.
			if tool.ConnectionID, err = s.brokeredBy(r.Context(), req.ToolName); err != nil {
				return err
			}
		}
	}
	run := &gate.Run{
		AvailableMicros: 1, TrustTier: tier, Autonomous: req.Autonomous, Policy: p, Workspace: req.Workspace,
	}
	d, steps := gate.Explain(run, gate.Request{ToolName: req.ToolName, Input: req.Input, Cwd: req.Cwd, Resolved: req.ResolvedPaths}, schemaless(tool))
	out := evaluateView{
		Decision: d.Outcome, Source: d.Source, RuleID: d.RuleID, Reason: d.Reason, Verdict: d.Verdict, Rewritten: d.Rewritten,
		ScopeKey: d.ScopeKey, Scope: d.Scope, PolicyID: v.PolicyID, PolicyVersion: v.Version, Digest: v.Digest,
		Trace: evaluateTrace{Stages: steps, Tool: view},
	}
	if req.ToolName == "Bash" {
		out.Trace.Bash = policy.TraceBash(req.Input)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// brokeredBy returns the id of the connection whose brokered tool name is
// (mcp__<connection>__<tool>, as runs freeze them), or "" when name is not
// one of an existing connection's.
func (s *Server) brokeredBy(ctx context.Context, name string) (string, error) {
	conn, ok := run.BrokeredConnection(name)
	if !ok {
		return "", nil
	}
	id, err := s.st.ConnectionIDByName(ctx, conn)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return id, err
}

// schemaless gives a tool the request named by class a schema that accepts
// any object: the evaluation has no bundle to take one from, and the
// schema stage must not refuse it for that.
func schemaless(t *gate.Tool) *gate.Tool {
	if t == nil || t.Schema != nil || !t.Callable {
		return t
	}
	s, err := anyObject()
	if err != nil {
		return nil
	}
	c := *t
	c.Schema = s
	return &c
}

// anyObject is compiled once: a Schema is immutable and safe to share.
var anyObject = sync.OnceValues(func() (*schemaguard.Schema, error) {
	return schemaguard.Compile([]byte(`{"type":"object"}`))
})
