// Package capability defines sandbox tool bundles: named, digested sets of
// tools that run inside the sandbox, each with an operator-assigned class and
// an input schema that is known to compile.
//
// A Bundle is a value. NewBundle is the only way to get a valid one: it
// checks every field, compiles every schema through schemaguard (so a bundle
// never carries a tool the gate could not validate), copies its inputs and
// computes the digest over the canonical, name-sorted tool list. The digest
// is what a run freezes; any change to any tool changes it.
package capability

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/fluidbox/fluidbox/shared/schemaguard"
)

// Class is how much a tool can do. Classes come from the operator, never
// from the tool itself. They are persisted and on the wire: never renamed.
type Class string

const (
	ClassRead    Class = "read"
	ClassWrite   Class = "write"
	ClassExecute Class = "execute"
	ClassEgress  Class = "egress"
)

// Valid reports whether c is one of the four classes.
func (c Class) Valid() bool {
	switch c {
	case ClassRead, ClassWrite, ClassExecute, ClassEgress:
		return true
	}
	return false
}

// Tool is one sandbox tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Class       Class           `json:"class"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Bundle is a validated set of tools. Tools are sorted by name and each
// InputSchema is in canonical form.
type Bundle struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Digest string `json:"digest"`
	Tools  []Tool `json:"tools"`
}

// Limits on bundle fields.
const (
	MaxTools          = 256
	MaxIDBytes        = 128
	MaxNameBytes      = 64
	MaxDescriptionLen = 16 << 10
	// MaxToolBytes bounds one tool as stored (name, description, class,
	// canonical schema): a run freezes each tool as one DynamoDB item.
	MaxToolBytes = 64 << 10
	// MaxBundleBytes bounds a bundle's tools as stored: a bundle is one
	// DynamoDB item, at most 400 KB with its other attributes.
	MaxBundleBytes = 300 << 10
)

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	namePattern = regexp.MustCompile(`^[a-z0-9_-]+$`)
)

// toolNamePattern's counted repetition is costly to compile (about 0.15 ms,
// 860 allocations), so it is compiled on first use, not in every function's
// init.
var toolNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// FieldError says which field of a bundle is invalid, e.g.
// Field "tools[1].input_schema".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(field, format string, a ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// NewBundle validates and builds a bundle. Errors are *FieldError naming the
// first invalid field.
func NewBundle(id, name string, tools []Tool) (Bundle, error) {
	switch {
	case id == "":
		return Bundle{}, fieldErr("id", "must not be empty")
	case len(id) > MaxIDBytes || !idPattern.MatchString(id):
		return Bundle{}, fieldErr("id", "must be 1-%d characters of [A-Za-z0-9_-]", MaxIDBytes)
	case name == "":
		return Bundle{}, fieldErr("name", "must not be empty")
	case len(name) > MaxNameBytes || !namePattern.MatchString(name):
		return Bundle{}, fieldErr("name", "%q must be 1-%d characters of [a-z0-9-_]", name, MaxNameBytes)
	case len(tools) == 0:
		return Bundle{}, fieldErr("tools", "at least one tool is required")
	case len(tools) > MaxTools:
		return Bundle{}, fieldErr("tools", "%d tools, over the %d limit", len(tools), MaxTools)
	}
	out := make([]Tool, len(tools))
	seen := make(map[string]int, len(tools))
	for i, t := range tools {
		f := fmt.Sprintf("tools[%d]", i)
		if !toolNamePattern().MatchString(t.Name) {
			return Bundle{}, fieldErr(f+".name", "%q must match ^[A-Za-z0-9_-]{1,64}$", t.Name)
		}
		if j, dup := seen[t.Name]; dup {
			return Bundle{}, fieldErr(f+".name", "%q duplicates tools[%d].name", t.Name, j)
		}
		seen[t.Name] = i
		if len(t.Description) > MaxDescriptionLen {
			return Bundle{}, fieldErr(f+".description", "is %d bytes, over the %d limit", len(t.Description), MaxDescriptionLen)
		}
		if !t.Class.Valid() {
			return Bundle{}, fieldErr(f+".class", "%q must be one of read, write, execute, egress", t.Class)
		}
		if len(t.InputSchema) == 0 {
			return Bundle{}, fieldErr(f+".input_schema", "is required")
		}
		s, err := schemaguard.Compile(t.InputSchema)
		if err != nil {
			reason := err.Error()
			if re, ok := err.(*schemaguard.RejectError); ok {
				reason = re.Reason
			}
			return Bundle{}, fieldErr(f+".input_schema", "%s", reason)
		}
		canon, err := schemaguard.Canonical(t.InputSchema)
		if err != nil || schemaDigest(canon) != s.Digest() {
			return Bundle{}, fieldErr(f+".input_schema", "cannot be canonicalized")
		}
		out[i] = Tool{Name: t.Name, Description: t.Description, Class: t.Class, InputSchema: canon}
	}
	total := 0
	for i, t := range out {
		b, err := encode(t)
		if err != nil {
			return Bundle{}, fieldErr(fmt.Sprintf("tools[%d]", i), "cannot be encoded: %v", err)
		}
		if len(b) > MaxToolBytes {
			return Bundle{}, fieldErr(fmt.Sprintf("tools[%d]", i), "is %d bytes as stored, over the %d-byte limit", len(b), MaxToolBytes)
		}
		total += len(b) + 1
	}
	if total > MaxBundleBytes {
		return Bundle{}, fieldErr("tools", "are %d bytes as stored, over the %d-byte limit of a bundle", total, MaxBundleBytes)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	digest, err := toolsDigest(out)
	if err != nil {
		return Bundle{}, fieldErr("tools", "cannot be digested: %v", err)
	}
	return Bundle{ID: id, Name: name, Digest: digest, Tools: out}, nil
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func schemaDigest(canon []byte) string {
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// toolsDigest is sha256 over the canonical JSON array of the name-sorted
// tools, each {"class","description","input_schema","name"} with the schema
// in canonical form.
func toolsDigest(sorted []Tool) (string, error) {
	type canonTool struct {
		Class       Class           `json:"class"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
		Name        string          `json:"name"`
	}
	list := make([]canonTool, len(sorted))
	for i, t := range sorted {
		list[i] = canonTool{Class: t.Class, Description: t.Description, InputSchema: t.InputSchema, Name: t.Name}
	}
	b, err := encode(list)
	if err != nil {
		return "", err
	}
	return schemaDigest(b), nil
}

// Clone returns a deep copy of b, so a caller cannot change a shared bundle.
func (b Bundle) Clone() Bundle {
	out := b
	out.Tools = make([]Tool, len(b.Tools))
	for i, t := range b.Tools {
		t.InputSchema = append(json.RawMessage(nil), t.InputSchema...)
		out.Tools[i] = t
	}
	return out
}
