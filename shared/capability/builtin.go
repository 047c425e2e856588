package capability

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
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
