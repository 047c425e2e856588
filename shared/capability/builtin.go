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

//go:embed builtin/claude-code/*.json
var builtinFS embed.FS

var builtins = sync.OnceValues(loadBuiltins)

// Builtin returns the built-in bundles (today: claude-code), freshly copied
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
	files, err := fs.Glob(builtinFS, "builtin/claude-code/*.json")
	if err != nil {
		return nil, err
	}
	tools := make([]Tool, 0, len(files))
	for _, f := range files {
		raw, err := builtinFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var t Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("capability: %s: %w", f, err)
		}
		tools = append(tools, t)
	}
	b, err := NewBundle(ClaudeCodeID, ClaudeCodeName, tools)
	if err != nil {
		return nil, fmt.Errorf("capability: built-in %s: %w", ClaudeCodeName, err)
	}
	return []Bundle{b}, nil
}
