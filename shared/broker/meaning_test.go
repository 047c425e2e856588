package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// toolSet is an upstream's tools as a test varies them: what each field
// holds, in the order the server lists them.
type toolSet struct {
	order      []string
	desc       string
	output     string
	meta       mcp.Meta
	idempotent bool
	annTitle   string
}

func (ts toolSet) add(s *mcp.Server) {
	for _, name := range ts.order {
		tool := &mcp.Tool{
			Name: name, Description: ts.desc + " " + name, Meta: ts.meta,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			Annotations: &mcp.ToolAnnotations{IdempotentHint: ts.idempotent, Title: ts.annTitle, DestructiveHint: boolPtr(false)},
		}
		if ts.output != "" {
			tool.OutputSchema = json.RawMessage(ts.output)
		}
		s.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		})
	}
}

// TestDigestCoversMeaningOnly: the digest a run freezes changes with what a
// tool means (name, description, input and output schemas, annotations)
// and with nothing else an upstream may vary between two lists: the cache
// hints of 2026-07-28 (ttlMs, cacheScope), _meta, the order it lists tools
// in, its page size, the revision it speaks. Otherwise a routine refresh
// would look like a rug pull, or a real one would not.
func TestDigestCoversMeaningOnly(t *testing.T) {
	t.Parallel()
	base := toolSet{order: []string{"a", "b", "c"}, desc: "Finds", output: `{"type":"object","properties":{"n":{"type":"integer"}}}`, annTitle: "Find"}
	photo := func(ts toolSet, o upstreamOpts) broker.Photo {
		t.Helper()
		o.tools = ts.add
		u := newUpstream(t, o)
		p, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ref := photo(base, upstreamOpts{})
	if ref.Tools[0].OutputSchema == nil || ref.Tools[0].Annotations == nil || ref.Tools[0].Annotations.Title != "Find" {
		t.Fatalf("photographed tool = %+v, want its output schema and annotations", ref.Tools[0])
	}

	noise := base
	noise.order = []string{"c", "a", "b"}
	noise.meta = mcp.Meta{"example.com/build": "2026-12-02T01:00:00Z"}
	for name, o := range map[string]upstreamOpts{
		"cache hints, _meta, order, pages": {pageSize: 1, versions: []string{"2026-07-28"}, stateless: true, cache: &mcp.Cacheable{TTLMs: 3_600_000, CacheScope: "private"}},
		"another ttl over 2025-11-25":      {versions: []string{"2025-11-25"}, cache: &mcp.Cacheable{TTLMs: 1, CacheScope: "public"}},
	} {
		if p := photo(noise, o); p.Digest != ref.Digest {
			t.Errorf("%s: digest %s, want %s (nothing a tool means changed); diff %v", name, p.Digest, ref.Digest, broker.Diff(ref, p))
		}
	}

	desc, output, idem, title := base, base, base, base
	desc.desc = "Finds and sends"
	output.output = `{"type":"object","properties":{"n":{"type":"string"}}}`
	idem.idempotent = true
	title.annTitle = "Delete"
	all := []broker.Change{{Tool: "a", Change: "changed"}, {Tool: "b", Change: "changed"}, {Tool: "c", Change: "changed"}}
	for name, ts := range map[string]toolSet{"description": desc, "output schema": output, "idempotentHint": idem, "annotations title": title} {
		p := photo(ts, upstreamOpts{versions: []string{"2026-07-28"}, stateless: true})
		if p.Digest == ref.Digest {
			t.Errorf("%s changed: digest unchanged", name)
		}
		if diff := cmp.Diff(all, broker.Diff(ref, p)); diff != "" {
			t.Errorf("%s changed: Diff (-want +got):\n%s", name, diff)
		}
	}
}

// TestSessionListsOnce: a session refuses a second tools/list, which the
// SDK would answer from the upstream's ttlMs without asking it: a caller
// that looks again connects anew and reaches the upstream.
func TestSessionListsOnce(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{versions: []string{"2026-07-28"}, stateless: true, cache: &mcp.Cacheable{TTLMs: 86_400_000, CacheScope: "public"}})
	s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListTools(t.Context()); !errors.Is(err, broker.ErrInvalidRequest) {
		t.Errorf("second ListTools on a session = %v, want ErrInvalidRequest", err)
	}
	if _, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred); err != nil {
		t.Fatal(err)
	}
	if n := u.listCalls.Load(); n != 2 {
		t.Errorf("upstream saw %d tools/list, want 2 (one per session)", n)
	}
}
