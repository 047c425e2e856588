package modelproxy

import (
	"bytes"
	stdjson "encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"
)

// noDuplicates walks a JSON document with the standard library's tokenizer,
// independently of the inspector, and reports whether any object repeats a
// member name.
func noDuplicates(b []byte) bool {
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next token of an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return true // malformed documents are the inspector's to refuse
		}
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.obj && top.key {
				if k, ok := tok.(string); ok {
					if top.keys[k] {
						return false
					}
					top.keys[k] = true
					top.key = false
					continue
				}
			} else if top.obj {
				top.key = true
			}
		}
		switch tok {
		case stdjson.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, key: true})
		case stdjson.Delim('['):
			stack = append(stack, &frame{})
		case stdjson.Delim('}'), stdjson.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].key = true
			}
			if len(stack) == 0 {
				return true
			}
		}
	}
}

// understood checks, with encoding/json and nothing of the inspector, that
// a document only uses allowlisted top-level members, tool types and block
// types, and offers no connector or container.
func understood(t *testing.T, b []byte) {
	var doc map[string]any
	if err := stdjson.Unmarshal(b, &doc); err != nil {
		t.Fatalf("admitted a body encoding/json cannot read: %v", err)
	}
	for k := range doc {
		if !slices.Contains(TopFields(), k) {
			t.Fatalf("admitted top-level member %q", k)
		}
	}
	tools, _ := doc["tools"].([]any)
	for _, tl := range tools {
		m, ok := tl.(map[string]any)
		if !ok {
			t.Fatalf("admitted a tool that is not an object")
		}
		typ, _ := m["type"].(string)
		if typ == "" {
			typ = "custom"
		}
		if !slices.Contains(ToolTypes(), typ) {
			t.Fatalf("admitted tool type %q", typ)
		}
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		blocks, ok := v.([]any)
		if !ok {
			return
		}
		for _, b := range blocks {
			m, ok := b.(map[string]any)
			if !ok {
				t.Fatalf("admitted a block that is not an object")
			}
			typ, _ := m["type"].(string)
			if !slices.Contains(BlockTypes(), typ) {
				t.Fatalf("admitted block type %q", typ)
			}
			if src, ok := m["source"].(map[string]any); ok {
				if src["type"] == "file" || src["file_id"] != nil {
					t.Fatalf("admitted a file source")
				}
				walk(src["content"], depth+1)
			}
			if typ == "tool_result" || typ == "search_result" {
				walk(m["content"], depth+1)
			}
		}
	}
	msgs, _ := doc["messages"].([]any)
	for _, msg := range msgs {
		m, _ := msg.(map[string]any)
		walk(m["content"], 0)
	}
	walk(doc["system"], 0)
}

// FuzzInspect: the inspector never admits a request it did not fully
// understand: whatever it forwards has unique member names, only
// allowlisted members and types, and the model and max_tokens it judged.
func FuzzInspect(f *testing.F) {
	for _, name := range []string{"claude-code-2.1.332-websearch.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	f.Add([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`), "web-fetch-2025-09-10")
	f.Add([]byte(`{"model":"m","max_tokens":10,"messages":[],"tools":[],"tools":[{"type":"mcp_toolset"}]}`), "")
	f.Fuzz(func(t *testing.T, body []byte, beta string) {
		h := http.Header{}
		h.Set("Anthropic-Beta", beta)
		in, ref := Inspect(body, h, "")
		if ref != nil {
			if ref.Status < 400 || ref.Status > 499 || ref.Message == "" {
				t.Fatalf("refusal %+v is not a 4xx with a message", ref)
			}
			return
		}
		out, err := in.Body(body)
		if err != nil {
			t.Fatalf("admitted but cannot forward: %v", err)
		}
		for _, b := range [][]byte{body, out} {
			if !noDuplicates(b) {
				t.Fatalf("admitted a body with a duplicate member: %q", b)
			}
			understood(t, b)
		}
		var head struct {
			Model     string `json:"model"`
			MaxTokens int64  `json:"max_tokens"`
		}
		if err := stdjson.Unmarshal(out, &head); err != nil || head.Model != in.Model || head.MaxTokens != in.MaxTokens || in.MaxTokens < 1 {
			t.Fatalf("forwarded model %q max_tokens %d, judged %q %d", head.Model, head.MaxTokens, in.Model, in.MaxTokens)
		}
		for _, st := range in.ServerTools {
			if st.MaxUses < 1 {
				t.Fatalf("server tool %s without a bound", st.Tool)
			}
		}
	})
}
