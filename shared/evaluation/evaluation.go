// Package evaluation decides one call against a policy as a run would,
// with no run, no approval and nothing written: the answer of POST
// /v1/policies/{id}/evaluate and of `fluidbox policy eval -f FILE`, which
// is computed offline. Both call Decide, so the two cannot disagree. The
// request carries the path context a runner sends (resolved paths, path
// kinds, a Glob's search report) and the answer the input the tool would
// run with (a narrowed search's updated_input), so an evaluation decides
// what the gate decides.
//
// It runs the gate's own stages (gate.Explain) over a run built from the
// request: the tier, autonomy and workspace it names, an available budget
// and the policy given. Tools are Claude Code's built-in ones with their
// frozen schemas and classes; any other tool is judged by the class the
// request gives, with a schema that accepts any object.
package evaluation

import (
	"encoding/json"
	"fmt"
	"path"
	"sync"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// Request is a call to decide without a run.
type Request struct {
	ToolName   string `json:"tool_name"`
	Input      any    `json:"input"`
	TrustTier  string `json:"trust_tier,omitempty"`
	Autonomous bool   `json:"autonomous,omitempty"`
	Workspace  string `json:"workspace,omitempty"`
	Cwd        string `json:"cwd,omitempty"`
	// ResolvedPaths, PathKinds and SearchReport are the sandbox's path
	// context, as the hook sends it with a permission request: the
	// resolved paths, what is at each path ("file", "dir", "absent"), and
	// what exists under the directory a Glob walks.
	ResolvedPaths map[string]string `json:"resolved_paths,omitempty"`
	PathKinds     map[string]string `json:"path_kinds,omitempty"`
	SearchReport  *tree.Report      `json:"search_report,omitempty"`
	// Class is the class of a tool no built-in bundle describes (an MCP
	// tool's, from its bundle); without it the trust tier stage, which
	// needs a class, is skipped for such a tool.
	Class string `json:"class,omitempty"`
}

// Policy is the policy to decide with, and the version it is shown as.
type Policy struct {
	Policy  *policy.Policy
	ID      string // "" for a document not stored (a file)
	Version int
	Digest  string
}

// View is the answer.
type View struct {
	Decision  policy.Verdict `json:"decision"`
	Source    gate.Source    `json:"source,omitempty"`
	RuleID    string         `json:"rule_id,omitempty"`
	Reason    string         `json:"reason"`
	Verdict   policy.Verdict `json:"verdict,omitempty"`
	Rewritten policy.Verdict `json:"rewritten,omitempty"`
	ScopeKey  string         `json:"scope_key,omitempty"`
	Scope     policy.Scope   `json:"scope,omitempty"`
	// UpdatedInput, on an allow, is the input the tool would run with: a
	// search narrowed to leave out what a deny rule matches.
	UpdatedInput  json.RawMessage `json:"updated_input,omitempty"`
	PolicyID      string          `json:"policy_id"`
	PolicyVersion int             `json:"policy_version"`
	Digest        string          `json:"digest"`
	Trace         Trace           `json:"trace"`
}

// Trace is how the answer came about: each stage's outcome, the tool as
// judged, and for Bash what the analyser saw.
type Trace struct {
	Stages []gate.Step       `json:"stages"`
	Tool   Tool              `json:"tool"`
	Bash   *policy.BashTrace `json:"bash,omitempty"`
}

// Tool is the tool as the evaluation judged it.
type Tool struct {
	Name string `json:"name"`
	// Class is "" when neither a built-in bundle nor the request gave one.
	Class capability.Class `json:"class,omitempty"`
	// Builtin: the tool is one of Claude Code's, judged against its
	// built-in schema and class.
	Builtin bool `json:"builtin"`
}

// InvalidError is a request that cannot be decided as given: the API's
// 400, the CLI's usage error. Its text names the field.
type InvalidError struct{ msg string }

func (e *InvalidError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &InvalidError{msg: fmt.Sprintf(format, args...)}
}

// Check refuses a request that cannot be decided: no tool name, an
// unknown tier or class, a workspace or cwd that is not an absolute,
// clean path.
func (r Request) Check() error {
	if r.ToolName == "" {
		return invalid("tool_name: is required")
	}
	if r.TrustTier != "" && !trust.Tier(r.TrustTier).Valid() {
		return invalid("trust_tier: %.40q is not one of %s, %s", r.TrustTier, trust.Trusted, trust.ReadOnly)
	}
	for _, f := range []struct{ name, value string }{{"workspace", r.Workspace}, {"cwd", r.Cwd}} {
		if f.value != "" && (!path.IsAbs(f.value) || path.Clean(f.value) != f.value || len(f.value) > 1024) {
			return invalid("%s: must be an absolute, clean path such as \"/work/app\"", f.name)
		}
	}
	if r.Class != "" && !capability.Class(r.Class).Valid() {
		return invalid("class: %.40q is not one of read, write, execute, egress", r.Class)
	}
	return r.checkPathContext()
}

// checkPathContext refuses a path context the gate would refuse: too
// many fields, a resolved path that is not absolute, an unknown kind, a
// search report it cannot read.
func (r Request) checkPathContext() error {
	if len(r.ResolvedPaths) > maxPathFields || len(r.PathKinds) > maxPathFields {
		return invalid("resolved_paths, path_kinds: at most %d fields each", maxPathFields)
	}
	for _, p := range r.ResolvedPaths {
		if !path.IsAbs(p) || len(p) > 4096 {
			return invalid("resolved_paths: each value must be an absolute path of at most 4096 bytes")
		}
	}
	for _, k := range r.PathKinds {
		if k != policy.KindFile && k != policy.KindDir && k != policy.KindAbsent {
			return invalid(`path_kinds: each value must be "file", "dir" or "absent"`)
		}
	}
	if r.SearchReport != nil {
		if err := r.SearchReport.Check(); err != nil {
			return invalid("search_report: %v", err)
		}
	}
	return nil
}

// maxPathFields is how many path fields a request's path context holds, as
// a permission request's.
const maxPathFields = 8

// Builtin reports whether name is one of the built-in bundles' tools.
func Builtin(name string) bool { return builtinTools()[name] != nil }

// Decide decides req under p as a run would. connectionID is the id of the
// connection whose brokered tool req names, or "" when it names none:
// such a tool is judged as brokered, which a read_only run never calls.
// The request must have passed Check.
func Decide(p Policy, req Request, connectionID string) View {
	tier := trust.Trusted
	if req.TrustTier != "" {
		tier = trust.Tier(req.TrustTier)
	}
	tool := builtinTools()[req.ToolName]
	view := Tool{Name: req.ToolName, Builtin: tool != nil}
	if tool == nil && req.Class != "" {
		tool = &gate.Tool{Name: req.ToolName, Class: capability.Class(req.Class), Callable: true, ConnectionID: connectionID}
	}
	if tool != nil {
		view.Class = tool.Class
	}
	run := &gate.Run{AvailableMicros: 1, TrustTier: tier, Autonomous: req.Autonomous, Policy: p.Policy, Workspace: req.Workspace}
	d, steps := gate.Explain(run, gate.Request{ToolName: req.ToolName, Input: req.Input, Cwd: req.Cwd, Resolved: req.ResolvedPaths, Kinds: req.PathKinds, Report: req.SearchReport}, schemaless(tool))
	out := View{
		Decision: d.Outcome, Source: d.Source, RuleID: d.RuleID, Reason: d.Reason, Verdict: d.Verdict, Rewritten: d.Rewritten,
		ScopeKey: d.ScopeKey, Scope: d.Scope, PolicyID: p.ID, PolicyVersion: p.Version, Digest: p.Digest,
		Trace: Trace{Stages: steps, Tool: view},
	}
	if !d.UpdatedInput.IsZero() {
		out.UpdatedInput, _ = d.UpdatedInput.MarshalJSON()
	}
	if req.ToolName == "Bash" {
		out.Trace.Bash = policy.TraceBash(req.Input)
	}
	return out
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
