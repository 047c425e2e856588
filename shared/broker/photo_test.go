package broker_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/broker"
)

func def(name, desc, schema string) broker.ToolDef {
	return broker.ToolDef{Name: name, Description: desc, InputSchema: json.RawMessage(schema)}
}

func TestNewPhotoCanonical(t *testing.T) {
	t.Parallel()
	a, err := broker.NewPhoto([]broker.ToolDef{
		def("b", "B", `{"type":"object","properties":{"y":{"type":"string"},"x":{"type":"integer","maximum":10.50}}}`),
		def("a", "A", `{"type":"object"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.NewPhoto([]broker.ToolDef{
		def("a", "A", ` { "type" : "object" } `),
		def("b", "B", `{"properties":{"x":{"maximum":10.50,"type":"integer"},"y":{"type":"string"}},"type":"object"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Errorf("digests differ for the same tools in another order/format: %s vs %s", a.Digest, b.Digest)
	}
	if got := string(a.Tools[1].InputSchema); got != `{"properties":{"x":{"maximum":10.50,"type":"integer"},"y":{"type":"string"}},"type":"object"}` {
		t.Errorf("canonical schema = %s", got)
	}
	if a.Tools[0].Name != "a" {
		t.Errorf("tools not sorted: %v", a.Tools)
	}
	d1, err1 := broker.ToolDigest(def("a", "A", `{"type":"object"}`))
	d2, err2 := broker.ToolDigest(def("a", "A", `{ "type":"object" }`))
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Errorf("ToolDigest not canonical: %s %v, %s %v", d1, err1, d2, err2)
	}
	// Annotations count, and an empty annotations object equals none.
	tr := true
	withAnn := def("a", "A", `{"type":"object"}`)
	withAnn.Annotations = &broker.Annotations{DestructiveHint: &tr}
	d3, _ := broker.ToolDigest(withAnn)
	empty := def("a", "A", `{"type":"object"}`)
	empty.Annotations = &broker.Annotations{}
	d4, _ := broker.ToolDigest(empty)
	if d3 == d1 || d4 != d1 {
		t.Errorf("annotation digests: with=%s empty=%s none=%s", d3, d4, d1)
	}
}

func TestNewPhotoRefuses(t *testing.T) {
	t.Parallel()
	for name, tools := range map[string][]broker.ToolDef{
		"duplicate":  {def("a", "", `{}`), def("a", "other", `{}`)},
		"unnamed":    {def("", "", `{}`)},
		"bad schema": {def("a", "", `{"type":`)},
		"trailing":   {def("a", "", `{} {}`)},
	} {
		if _, err := broker.NewPhoto(tools); !errors.Is(err, broker.ErrInvalidResponse) {
			t.Errorf("NewPhoto(%s) = %v, want ErrInvalidResponse", name, err)
		}
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	tr, fa := true, false
	ro := def("r", "R", `{"type":"object"}`)
	ro.Annotations = &broker.Annotations{ReadOnlyHint: &tr}
	rw := def("r", "R", `{"type":"object"}`)
	rw.Annotations = &broker.Annotations{ReadOnlyHint: &fa}
	photo := func(defs ...broker.ToolDef) broker.Photo {
		p, err := broker.NewPhoto(defs)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name     string
		old, new broker.Photo
		want     []broker.Change
	}{
		{"none", photo(def("a", "A", `{}`)), photo(def("a", "A", `{}`)), nil},
		{"empty to some", broker.Photo{}, photo(def("b", "", `{}`), def("a", "", `{}`)),
			[]broker.Change{{Tool: "a", Change: "added"}, {Tool: "b", Change: "added"}}},
		{"all removed", photo(def("a", "", `{}`)), broker.Photo{}, []broker.Change{{Tool: "a", Change: "removed"}}},
		{"description", photo(def("a", "A", `{}`)), photo(def("a", "A2", `{}`)), []broker.Change{{Tool: "a", Change: "changed"}}},
		{"schema", photo(def("a", "A", `{"type":"object"}`)), photo(def("a", "A", `{"type":"array"}`)), []broker.Change{{Tool: "a", Change: "changed"}}},
		{"annotation", photo(ro), photo(rw), []broker.Change{{Tool: "r", Change: "changed"}}},
		{"mixed", photo(def("a", "", `{}`), def("b", "", `{}`), def("c", "", `{}`)), photo(def("b", "", `{}`), def("c", "x", `{}`), def("d", "", `{}`)),
			[]broker.Change{{Tool: "a", Change: "removed"}, {Tool: "c", Change: "changed"}, {Tool: "d", Change: "added"}}},
		// Hand-built photos with an unusable tool: reviewed as changed, never silently equal.
		{"unusable", broker.Photo{Tools: []broker.ToolDef{def("a", "", `{`)}}, broker.Photo{Tools: []broker.ToolDef{def("a", "", `{`)}},
			[]broker.Change{{Tool: "a", Change: "changed"}}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, broker.Diff(tc.old, tc.new)); diff != "" {
			t.Errorf("Diff %s (-want +got):\n%s", tc.name, diff)
		}
	}
}
