package broker

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// ToolDef is one upstream tool as photographed: what a run freezes and a human reviews.
// It holds what the tool means and nothing else: an upstream's cache hints (ttlMs,
// cacheScope), _meta, display extras (title, icons) and list order vary between two
// lists of the same tools, and a digest over them would call every refresh a rug pull.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema is what the tool says its structured result is; absent for most.
	// Omitted when absent, so a tool without one digests as it did before the field.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  *Annotations    `json:"annotations,omitempty"`
}

// Annotations are the upstream's hints about a tool. They are untrusted claims, kept
// because a change in them (a tool that stops claiming to be read-only, or renames
// itself to a reviewer) is drift a human should review; they never lower a tool's class.
type Annotations struct {
	ReadOnlyHint    *bool  `json:"read_only_hint,omitempty"`
	DestructiveHint *bool  `json:"destructive_hint,omitempty"`
	IdempotentHint  *bool  `json:"idempotent_hint,omitempty"`
	OpenWorldHint   *bool  `json:"open_world_hint,omitempty"`
	Title           string `json:"title,omitempty"`
}

// Photo is an upstream's tool list at one moment: tools sorted by name, each schema in
// canonical JSON, and Digest = "sha256:<hex>" of the canonical JSON of Tools.
type Photo struct {
	Tools  []ToolDef `json:"tools"`
	Digest string    `json:"digest"`
}

// NewPhoto builds a Photo from tools in any order. It copies its input, canonicalizes
// every schema, and refuses unnamed or duplicate tools (ErrInvalidResponse), since either
// would make "the tool called X" ambiguous.
func NewPhoto(tools []ToolDef) (Photo, error) {
	defs := make([]ToolDef, 0, len(tools))
	for _, t := range tools {
		c, err := canonicalDef(t)
		if err != nil {
			return Photo{}, err
		}
		defs = append(defs, c)
	}
	slices.SortFunc(defs, func(a, b ToolDef) int { return cmp.Compare(a.Name, b.Name) })
	for i := 1; i < len(defs); i++ {
		if defs[i].Name == defs[i-1].Name {
			return Photo{}, fmt.Errorf("%w: duplicate tool name", ErrInvalidResponse)
		}
	}
	b, err := json.Marshal(defs)
	if err != nil {
		return Photo{}, fmt.Errorf("%w: encode tools: %v", ErrInvalidResponse, err)
	}
	return Photo{Tools: defs, Digest: digest(b)}, nil
}

// ToolDigest is "sha256:<hex>" of def's canonical JSON: equal for equal tools however
// their schema's keys were ordered or spaced.
func ToolDigest(def ToolDef) (string, error) {
	c, err := canonicalDef(def)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("%w: encode tool: %v", ErrInvalidResponse, err)
	}
	return digest(b), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalDef returns a copy of def whose schemas are canonical JSON (object keys sorted,
// no insignificant space, numbers as written), whose output schema is nil when absent
// (or JSON null) and whose annotations are nil when empty.
func canonicalDef(def ToolDef) (ToolDef, error) {
	if def.Name == "" {
		return ToolDef{}, fmt.Errorf("%w: tool without a name", ErrInvalidResponse)
	}
	schema, err := canonicalJSON(def.InputSchema)
	if err != nil {
		return ToolDef{}, fmt.Errorf("%w: tool input schema is not valid JSON", ErrInvalidResponse)
	}
	out := ToolDef{Name: def.Name, Description: def.Description, InputSchema: schema}
	if len(bytes.TrimSpace(def.OutputSchema)) != 0 {
		output, err := canonicalJSON(def.OutputSchema)
		if err != nil {
			return ToolDef{}, fmt.Errorf("%w: tool output schema is not valid JSON", ErrInvalidResponse)
		}
		if string(output) != "null" {
			out.OutputSchema = output
		}
	}
	if a := def.Annotations; a != nil && (*a != Annotations{}) {
		out.Annotations = &Annotations{
			ReadOnlyHint:    copyBool(a.ReadOnlyHint),
			DestructiveHint: copyBool(a.DestructiveHint),
			IdempotentHint:  copyBool(a.IdempotentHint),
			OpenWorldHint:   copyBool(a.OpenWorldHint),
			Title:           a.Title,
		}
	}
	return out, nil
}

func copyBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// canonicalJSON re-encodes raw: encoding/json sorts object keys, and UseNumber keeps
// numbers as written, so equal documents give equal bytes. Empty input is JSON null.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Change is one difference between two photos of the same upstream.
type Change struct {
	Tool   string `json:"tool"`
	Change string `json:"change"`
}

// Change kinds. They are on the wire: never rename.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
	ChangeChanged = "changed"
)

// Diff lists the tools added, removed or changed (description, schemas or annotations)
// from old to new, sorted by tool name. A tool whose digest cannot be computed on either
// side counts as changed, so that it is reviewed rather than silently accepted.
func Diff(old, new Photo) []Change {
	before := digests(old)
	after := digests(new)
	var out []Change
	for name, d := range after {
		prev, ok := before[name]
		switch {
		case !ok:
			out = append(out, Change{Tool: name, Change: ChangeAdded})
		case prev == "" || d == "" || prev != d:
			out = append(out, Change{Tool: name, Change: ChangeChanged})
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			out = append(out, Change{Tool: name, Change: ChangeRemoved})
		}
	}
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Change, b.Change))
	})
	return out
}

// digests maps each tool name to its digest ("" when it cannot be computed). A name listed
// twice maps to "" as well: ambiguity counts as a change.
func digests(p Photo) map[string]string {
	m := make(map[string]string, len(p.Tools))
	for _, t := range p.Tools {
		d, err := ToolDigest(t)
		if _, dup := m[t.Name]; dup || err != nil {
			d = ""
		}
		m[t.Name] = d
	}
	return m
}
