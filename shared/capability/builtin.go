package capability

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"
)

// Built-in bundle identity. Persisted and on the wire: never renamed.
const (
	ClaudeCodeID   = "cap_claude_code"
	ClaudeCodeName = "claude-code"
)

//go:embed builtin/claude-code/*.json builtin/anthropic-server-tools/*.json
var builtinFS embed.FS

var builtins = sync.OnceValues(loadBuiltins)

// Builtin returns the built-in bundles (claude-code, then
// anthropic-server-tools), freshly copied
// on every call. It returns nil only if the embedded files are broken, which
// the package tests rule out.
func Builtin() []Bundle {
	bs, err := builtins()
	if err != nil {
		return nil
	}
	out := make([]Bundle, len(bs))
	for i, b := range bs {
		out[i] = b.Clone()
	}
	return out
}

func loadBuiltins() ([]Bundle, error) {
	var out []Bundle
	for _, def := range []struct{ id, name, dir string }{
		{ClaudeCodeID, ClaudeCodeName, "claude-code"},
		{ServerToolsID, ServerToolsName, "anthropic-server-tools"},
	} {
		b, err := loadBuiltin(def.id, def.name, def.dir)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func loadBuiltin(id, name, dir string) (Bundle, error) {
	files, err := fs.Glob(builtinFS, "builtin/"+dir+"/*.json")
	if err != nil {
		return Bundle{}, err
	}
	tools := make([]Tool, 0, len(files))
	for _, f := range files {
		raw, err := builtinFS.ReadFile(f)
		if err != nil {
			return Bundle{}, err
		}
		var t Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return Bundle{}, fmt.Errorf("capability: %s: %w", f, err)
		}
		tools = append(tools, t)
	}
	b, err := NewBundle(id, name, tools)
	if err != nil {
		return Bundle{}, fmt.Errorf("capability: built-in %s: %w", name, err)
	}
	return b, nil
}

// Runners of Claude Code, as builtin/claude-code-excluded.json names them.
const (
	RunnerCLI = "cli" // `claude -p`
	RunnerSDK = "sdk" // the Agent SDK, with a host that answers permission prompts
)

//go:embed builtin/claude-code-excluded.json
var excludedJSON []byte

// ExcludedTool is a tool Claude Code offers that the claude-code bundle
// leaves out on purpose: a run never has it, so the gate denies it.
type ExcludedTool struct {
	Reason    string   `json:"reason"`
	OfferedBy []string `json:"offered_by"`
}

var excluded = sync.OnceValues(func() (map[string]ExcludedTool, error) {
	var doc struct {
		Tools map[string]ExcludedTool `json:"tools"`
	}
	if err := json.Unmarshal(excludedJSON, &doc); err != nil {
		return nil, fmt.Errorf("capability: claude-code-excluded.json: %w", err)
	}
	return doc.Tools, nil
})

// ClaudeCodeExcluded returns the tools runner (RunnerCLI or RunnerSDK)
// offers that the claude-code bundle excludes, each with its reason. The
// end-to-end suites of both runners check the bundle against it.
func ClaudeCodeExcluded(runner string) map[string]string {
	all, err := excluded()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for name, t := range all {
		for _, r := range t.OfferedBy {
			if r == runner {
				out[name] = t.Reason
			}
		}
	}
	return out
}

//go:embed builtin/claude-code-narrowed.json
var narrowedJSON []byte

// Narrowing is one place where a claude-code bundle schema is narrower
// than the schema Claude Code sends: at Pointer (a JSON pointer into the
// schema) the bundle holds Value. The schema stage then denies what
// Reason says fluidbox must not allow, whatever the policy.
type Narrowing struct {
	Pointer string          `json:"pointer"`
	Value   json.RawMessage `json:"value"`
	Reason  string          `json:"reason"`
}

var narrowed = sync.OnceValues(func() (map[string][]Narrowing, error) {
	var doc struct {
		Tools map[string][]Narrowing `json:"tools"`
	}
	if err := json.Unmarshal(narrowedJSON, &doc); err != nil {
		return nil, fmt.Errorf("capability: claude-code-narrowed.json: %w", err)
	}
	return doc.Tools, nil
})

// ClaudeCodeNarrowed returns, per tool, how the claude-code bundle's
// schema narrows the one Claude Code sends (builtin/claude-code-narrowed.json).
// The end-to-end suites apply it to the schema they capture before they
// compare it with the bundle's.
func ClaudeCodeNarrowed() map[string][]Narrowing {
	m, err := narrowed()
	if err != nil {
		return nil
	}
	out := make(map[string][]Narrowing, len(m))
	for k, v := range m {
		out[k] = append([]Narrowing(nil), v...)
	}
	return out
}

// Narrow returns schema with each narrowing applied. A pointer must name
// an existing member of nested objects: a schema that lacks it (a CLI
// that renamed the property) is an error, never passed through unnarrowed.
func Narrow(schema []byte, ns []Narrowing) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, fmt.Errorf("capability: narrow: %w", err)
	}
	for _, n := range ns {
		segs := strings.Split(strings.TrimPrefix(n.Pointer, "/"), "/")
		if !strings.HasPrefix(n.Pointer, "/") || len(segs) == 0 {
			return nil, fmt.Errorf("capability: narrow: pointer %q", n.Pointer)
		}
		obj := doc
		for _, s := range segs[:len(segs)-1] {
			next, ok := obj[s].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("capability: narrow: the schema has no object at %q", n.Pointer)
			}
			obj = next
		}
		last := segs[len(segs)-1]
		if _, ok := obj[last]; !ok {
			return nil, fmt.Errorf("capability: narrow: the schema has nothing at %q", n.Pointer)
		}
		var v any
		if err := json.Unmarshal(n.Value, &v); err != nil {
			return nil, fmt.Errorf("capability: narrow: value at %q: %w", n.Pointer, err)
		}
		obj[last] = v
	}
	return json.Marshal(doc)
}
