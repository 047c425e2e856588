package modelproxy

import (
	"bytes"
	"encoding/base64"
	stdjson "encoding/json"
	"image"
	"image/color"
	pngenc "image/png"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
)

func ccHeader() http.Header {
	h := http.Header{}
	h.Add("Anthropic-Beta", "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,effort-2025-11-24")
	return h
}

// TestInspectClaudeCode: the requests Claude Code 2.1.332 actually sends
// (captured by the scripted model in make e2e-claude) are understood as
// they are, and its WebSearch sub-request offers exactly one server tool.
func TestInspectClaudeCode(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"claude-code-2.1.332-messages.json", "claude-code-2.1.332-tool-result.json", "claude-code-2.1.332-websearch.json"} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		in, ref := Inspect(b, ccHeader(), "beta=true")
		if ref != nil {
			t.Errorf("%s: refused: %+v", f, ref)
			continue
		}
		if in.Model != "claude-opus-5-5" || in.MaxTokens != 128000 {
			t.Errorf("%s: model %s max_tokens %d", f, in.Model, in.MaxTokens)
		}
		// Claude Code names no service tier: "standard_only" is imposed,
		// and every other byte goes as it sent it.
		want := append(bytes.TrimSuffix(bytes.TrimRight(slices.Clone(b), "\n "), []byte("}")), `,"service_tier":"standard_only"}`...)
		if out, _ := in.Body(b); !bytes.Equal(out, want) {
			t.Errorf("%s: the forwarded body is not the request with service_tier standard_only imposed", f)
		}
		wantTools := []string(nil)
		if strings.Contains(f, "websearch") {
			wantTools = []string{"anthropic__web_search"}
		}
		if got := in.Offered(); !slices.Equal(got, wantTools) {
			t.Errorf("%s: offered %v, want %v", f, got, wantTools)
		}
	}
}

// TestInspectToolSearch: the requests Claude Code 2.1.332 sends with tool
// search on (ENABLE_TOOL_SEARCH unset: deferred tools behind ToolSearch,
// captured by the scripted model in make e2e-claude) are admitted as they
// are: the first (the advanced-tool-use beta, a deferred placeholder) and
// the one after a ToolSearch call (its result two tool_reference blocks,
// the tools they name now offered with defer_loading). Each reference is
// reserved as its tool's definition once more: the API expands it into
// the context.
func TestInspectToolSearch(t *testing.T) {
	t.Parallel()
	h := ccHeader()
	h.Set("Anthropic-Beta", h.Get("Anthropic-Beta")+",advanced-tool-use-2025-11-20")
	for _, f := range []string{"claude-code-2.1.332-toolsearch.json", "claude-code-2.1.332-toolsearch-result.json"} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		in, ref := Inspect(b, h, "beta=true")
		if ref != nil {
			t.Errorf("%s: refused: %+v", f, ref)
			continue
		}
		want := append(bytes.TrimSuffix(bytes.TrimRight(slices.Clone(b), "\n "), []byte("}")), `,"service_tier":"standard_only"}`...)
		if out, _ := in.Body(b); !bytes.Equal(out, want) {
			t.Errorf("%s: the forwarded body is not the request with service_tier standard_only imposed", f)
		}
		if strings.Contains(f, "result") && in.ReferencedBytes < 1000 {
			t.Errorf("%s: ReferencedBytes = %d, want the two referenced tools' definitions (WebSearch, NotebookEdit)", f, in.ReferencedBytes)
		}
	}
	one := func(n int) int64 {
		refs := strings.TrimSuffix(strings.Repeat(`{"type":"tool_reference","tool_name":"x"},`, n), ",")
		body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"ToolSearch","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[` + refs + `]}]}],` +
			`"tools":[{"name":"x","description":"` + strings.Repeat("d", 5000) + `","input_schema":{},"defer_loading":true}]}`
		in, ref := Inspect([]byte(body), http.Header{}, "")
		if ref != nil {
			t.Fatalf("%d references: refused: %+v", n, ref)
		}
		return in.ReferencedBytes
	}
	if a, b := one(1), one(3); a < 5000 || b != 3*a {
		t.Errorf("ReferencedBytes = %d for one reference, %d for three; want the definition's size, and three times it", a, b)
	}
	in := &Inspection{ReferencedBytes: 30_000}
	if got, _ := inputBound(in, 1000, 200_000); got < 1000+30_000 {
		t.Errorf("inputBound with 30000 referenced bytes in a 1000-byte body = %d, want at least both", got)
	}
}

// TestInspectAllowlists is the allowlists' table: each row is one member,
// type, source or beta, admitted or refused with its reason.
func TestInspectAllowlists(t *testing.T) {
	t.Parallel()
	base := func(extra string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	blocks := func(b string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[` + b + `]}]}`
	}
	tools := func(tl string) string { return base(`,"tools":[` + tl + `]`) }
	// refs is a tool search's result: ref blocks in a tool_result, with tl
	// offered.
	refs := func(ref, tl string) string {
		return `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"ToolSearch","input":{"query":"select:x"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[` + ref + `]}]}],"tools":[` + tl + `]}`
	}
	tests := []struct {
		name, body string
		beta       string
		want       Reason // "" = admitted
	}{
		{"minimal", base(""), "", ""},
		{"system string", base(`,"system":"s"`), "", ""},
		{"system blocks with cache_control 1h", base(`,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}]`), "", ""},
		{"system image", base(`,"system":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]`), "", ReasonBlockType},
		{"metadata user_id", base(`,"metadata":{"user_id":"u"}`), "", ""},
		{"metadata other", base(`,"metadata":{"x":"u"}`), "", ReasonField},
		{"sampling", base(`,"temperature":0.5,"top_p":0.9,"top_k":5,"stop_sequences":["x"]`), "", ""},
		{"stream", base(`,"stream":true`), "", ""},
		{"thinking enabled", base(`,"thinking":{"type":"enabled","budget_tokens":5}`), "", ""},
		{"thinking adaptive", base(`,"thinking":{"type":"adaptive","display":"omitted"}`), "", ""},
		{"thinking unknown", base(`,"thinking":{"type":"turbo"}`), "", ReasonField},
		{"context clear edits", base(`,"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":1}}]}`), "", ""},
		{"context compaction", base(`,"context_management":{"edits":[{"type":"compact_20260112"}]}`), "", ReasonField},
		{"context edit all settings", base(`,"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":1},"keep":{"type":"tool_uses","value":1},"clear_at_least":{"type":"input_tokens","value":1},"exclude_tools":["x"],"clear_tool_inputs":true}]}`), "", ""},
		{"context edit unknown setting", base(`,"context_management":{"edits":[{"type":"clear_tool_uses_20250919","cache_control":{"type":"ephemeral","ttl":"1h"}}]}`), "", ReasonField},
		{"context edit other's setting", base(`,"context_management":{"edits":[{"type":"clear_thinking_20251015","exclude_tools":["x"]}]}`), "", ReasonField},
		{"context edit escaped unknown", base(`,"context_management":{"edits":[{"typ\u0065":"clear_thinking_20251015","k\u0065ep":"all","x":1}]}`), "", ReasonField},
		{"output_config", base(`,"output_config":{"effort":"high","format":{"type":"json_schema","schema":{}}}`), "", ""},
		{"output_config other", base(`,"output_config":{"task_budget":1}`), "", ReasonField},
		{"tool_choice", base(`,"tool_choice":{"type":"tool","name":"x","disable_parallel_tool_use":true}`), "", ""},
		{"service_tier standard_only", base(`,"service_tier":"standard_only"`), "", ""},
		{"service_tier priority", base(`,"service_tier":"priority"`), "", ReasonUnpriced},
		{"service_tier auto", base(`,"service_tier":"auto"`), "", ReasonUnpriced},
		{"inference_geo us", base(`,"inference_geo":"us"`), "", ""},
		{"inference_geo eu", base(`,"inference_geo":"eu"`), "", ReasonMalformed},
		{"speed fast", base(`,"speed":"fast"`), "", ReasonUnpriced},
		{"mcp_servers", base(`,"mcp_servers":[]`), "", ReasonConnector},
		{"container", base(`,"container":"c"`), "", ReasonContainer},
		{"unknown top-level", base(`,"extra":1`), "", ReasonField},
		{"duplicate nested member", blocks(`{"type":"text","text":"a","text":"b"}`), "", ReasonMalformed},
		{"not an object", `[1]`, "", ReasonMalformed},
		{"trailing data", base("") + `{}`, "", ReasonMalformed},
		{"no max_tokens", `{"model":"m","messages":[]}`, "", ReasonMalformed},
		{"role other", `{"model":"m","max_tokens":1,"messages":[{"role":"tool","content":"x"}]}`, "", ReasonMalformed},
		{"system role with an image", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}`, "", ReasonBlockType},
		{"message member other", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x","name":"n"}]}`, "", ReasonField},
		{"text block", blocks(`{"type":"text","text":"a","citations":[]}`), "", ""},
		{"text with a number", blocks(`{"type":"text","text":1}`), "", ReasonMalformed},
		{"image base64", blocks(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}`), "", ""},
		{"image url", blocks(`{"type":"image","source":{"type":"url","url":"https://x/y.png"}}`), "", ""},
		{"image file", blocks(`{"type":"image","source":{"type":"file","file_id":"f"}}`), "", ReasonSource},
		{"image text source", blocks(`{"type":"image","source":{"type":"text","media_type":"text/plain","data":"x"}}`), "", ReasonSource},
		{"document pdf", blocks(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x"},"title":"t"}`), "", ""},
		{"document content", blocks(`{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}}`), "", ""},
		{"document content with a document", blocks(`{"type":"document","source":{"type":"content","content":[{"type":"document","source":{"type":"file","file_id":"f"}}]}}`), "", ReasonBlockType},
		{"document file_id member", blocks(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"x","file_id":"f"}}`), "", ReasonSource},
		{"search_result", blocks(`{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"x"}]}`), "", ""},
		{"tool_use", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}]}`, "", ""},
		{"tool_use in a user message", blocks(`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}`), "", ReasonMalformed},
		{"tool_use id off the alphabet", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t.1","name":"Bash","input":{}}]}]}`, "", ReasonMalformed},
		{"tool_use input not an object", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":"ls"}]}]}`, "", ReasonMalformed},
		{"tool_result in an assistant message", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`, "", ReasonMalformed},
		{"tool_result is_error not a boolean", blocks(`{"type":"tool_result","tool_use_id":"t","content":"x","is_error":"yes"}`), "", ReasonMalformed},
		{"tool_result with an image", blocks(`{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x"}}],"is_error":false}`), "", ""},
		{"tool_result with a tool_use", blocks(`{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_use","id":"x","name":"y","input":{}}]}`), "", ReasonBlockType},
		{"thinking blocks", blocks(`{"type":"thinking","thinking":"x","signature":"s"},{"type":"redacted_thinking","data":"d"}`), "", ""},
		{"server tool history", blocks(`{"type":"server_tool_use","id":"s","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"s","content":[]}`), "", ""},
		{"search results history", blocks(`{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"https://a","title":"t","encrypted_content":"e","page_age":null}]}`), "", ""},
		{"search error history", blocks(`{"type":"web_search_tool_result","tool_use_id":"s","content":{"type":"web_search_tool_result_error","error_code":"unavailable"}}`), "", ""},
		{"search result other member", blocks(`{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"u","source":{"type":"file","file_id":"f"}}]}`), "", ReasonField},
		{"fetch history", blocks(`{"type":"web_fetch_tool_result","tool_use_id":"s","content":{"type":"web_fetch_result","url":"https://a","retrieved_at":"x","content":{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"},"title":"t"}}}`), "", ""},
		{"fetch error history", blocks(`{"type":"web_fetch_tool_result","tool_use_id":"s","content":{"type":"web_fetch_tool_result_error","error_code":"url_not_accessible"}}`), "", ""},
		{"fetch history with a file", blocks(`{"type":"web_fetch_tool_result","tool_use_id":"s","content":{"type":"web_fetch_result","url":"https://a","content":{"type":"document","source":{"type":"file","file_id":"f"}}}}`), "", ReasonSource},
		{"fetch history of an image", blocks(`{"type":"web_fetch_tool_result","tool_use_id":"s","content":{"type":"web_fetch_result","url":"https://a","content":{"type":"image","source":{"type":"url","url":"https://b"}}}}`), "", ReasonBlockType},
		{"fetch history unread", blocks(`{"type":"web_fetch_tool_result","tool_use_id":"s","content":"x"}`), "", ReasonField},
		{"code execution history", blocks(`{"type":"server_tool_use","id":"s","name":"code_execution","input":{}}`), "", ReasonBlockType},
		{"mcp_tool_use block", blocks(`{"type":"mcp_tool_use","id":"m"}`), "", ReasonConnector},
		{"unknown block", blocks(`{"type":"video"}`), "", ReasonBlockType},
		{"block member of another type", blocks(`{"type":"text","text":"a","source":{}}`), "", ReasonField},
		{"cache_control persistent", blocks(`{"type":"text","text":"a","cache_control":{"type":"persistent"}}`), "", ReasonField},
		{"custom tool", tools(`{"name":"x","description":"d","input_schema":{"type":"object"},"strict":true}`), "", ""},
		{"custom tool without a schema", tools(`{"name":"x"}`), "", ReasonMalformed},
		{"custom tool extra", tools(`{"name":"x","input_schema":{},"eager_input_streaming":true}`), "", ReasonField},
		{"bash tool", tools(`{"type":"bash_20250124","name":"bash"}`), "", ""},
		{"text editor", tools(`{"type":"text_editor_20250728","name":"str_replace_based_edit_tool","max_characters":100}`), "", ""},
		{"web search", tools(`{"type":"web_search_20250305","name":"web_search","max_uses":3,"allowed_domains":["a.b"],"user_location":{"type":"approximate","city":"x"}}`), "", ""},
		{"web search other member", tools(`{"type":"web_search_20250305","name":"web_search","max_content_tokens":3}`), "", ReasonField},
		{"web search max_uses 0", tools(`{"type":"web_search_20250305","name":"web_search","max_uses":0}`), "", ReasonMalformed},
		{"web fetch", tools(`{"type":"web_fetch_20250910","name":"web_fetch","citations":{"enabled":true}}`), "web-fetch-2025-09-10", ""},
		{"code execution", tools(`{"type":"code_execution_20250825","name":"code_execution"}`), "", ""},
		{"dynamic filtering search", tools(`{"type":"web_search_20260209","name":"web_search"}`), "", ReasonToolType},
		{"computer use", tools(`{"type":"computer_20250124","name":"computer","display_width_px":1}`), "", ReasonField},
		{"memory tool", tools(`{"type":"memory_20250818","name":"memory"}`), "", ReasonToolType},
		{"mcp_toolset", tools(`{"type":"mcp_toolset","mcp_server_name":"x"}`), "", ReasonConnector},
		{"beta allowed", base(""), "prompt-caching-2024-07-31, extended-cache-ttl-2025-04-11", ""},
		{"beta 1m", base(""), "context-1m-2025-08-07", ReasonBeta},
		{"beta files", base(""), "files-api-2025-04-14", ReasonBeta},
		{"beta code execution", base(""), "code-execution-2025-08-25", ReasonBeta},
		{"beta skills", base(""), "skills-2025-10-02", ReasonBeta},
		// Tool search (Claude Code's default): the beta admits defer_loading
		// and tool_reference; the rest it enables stays refused.
		{"beta advanced tool use", base(""), "advanced-tool-use-2025-11-20", ""},
		{"deferred tool", tools(`{"name":"x","input_schema":{},"defer_loading":true}`), "", ""},
		{"deferred not a boolean", tools(`{"name":"x","input_schema":{},"defer_loading":"yes"}`), "", ReasonMalformed},
		{"deferred server tool", tools(`{"type":"web_search_20250305","name":"web_search","defer_loading":true}`), "", ReasonField},
		{"tool search server tool", tools(`{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}`), "", ReasonToolType},
		{"programmatic calling", tools(`{"name":"x","input_schema":{},"allowed_callers":["code_execution_20250825"]}`), "", ReasonField},
		{"input examples", tools(`{"name":"x","input_schema":{},"input_examples":[{}]}`), "", ReasonField},
		{"tool_reference", refs(`{"type":"tool_reference","tool_name":"x"}`, `{"name":"x","input_schema":{},"defer_loading":true}`), "", ""},
		{"tool_reference to no tool", refs(`{"type":"tool_reference","tool_name":"y"}`, `{"name":"x","input_schema":{},"defer_loading":true}`), "", ReasonMalformed},
		{"tool_reference to a loaded tool", refs(`{"type":"tool_reference","tool_name":"x"}`, `{"name":"x","input_schema":{}}`), "", ReasonMalformed},
		{"tool_reference name not a string", refs(`{"type":"tool_reference","tool_name":1}`, `{"name":"x","input_schema":{},"defer_loading":true}`), "", ReasonMalformed},
		{"tool_reference with more", refs(`{"type":"tool_reference","tool_name":"x","cache_control":{"type":"ephemeral"}}`, `{"name":"x","input_schema":{},"defer_loading":true}`), "", ReasonField},
		{"tool_reference in a message", blocks(`{"type":"tool_reference","tool_name":"x"}`), "", ReasonBlockType},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.beta != "" {
			h.Set("Anthropic-Beta", tt.beta)
		}
		in, ref := Inspect([]byte(tt.body), h, "")
		switch {
		case tt.want == "" && ref != nil:
			t.Errorf("%s: refused %s: %s", tt.name, ref.Reason, ref.Message)
		case tt.want != "" && ref == nil:
			t.Errorf("%s: admitted, want refused for %s", tt.name, tt.want)
		case tt.want != "" && ref.Reason != tt.want:
			t.Errorf("%s: refused for %s (%s), want %s", tt.name, ref.Reason, ref.Message, tt.want)
		case ref != nil && (ref.Status < 400 || ref.Status > 499 || !strings.HasPrefix(ref.Message, "fluidbox: ")):
			t.Errorf("%s: refusal %+v, want a 4xx with fluidbox's message", tt.name, ref)
		case ref == nil && in == nil:
			t.Errorf("%s: no inspection", tt.name)
		}
	}
}

// TestInspectImposesLimits: a server tool without limits is forwarded with
// fluidbox's, and only what was read is forwarded.
// TestInspectVersion: only the API versions the inspector reads pass, one value.
func TestInspectVersion(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"claude-haiku-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	for _, vs := range [][]string{nil, {"2023-06-01"}, {"2026-10-21"}, {"2023-06-01", "2023-06-01"}} {
		h := http.Header{}
		for _, v := range vs {
			h.Add("Anthropic-Version", v)
		}
		if _, ref := Inspect(body, h, ""); ref != nil {
			t.Errorf("anthropic-version %q refused: %s", vs, ref.Message)
		}
	}
	for _, vs := range [][]string{{"2099-01-01"}, {""}, {"2023-06-01", "2099-01-01"}, {"2026-10-21", "2023-06-01"}} {
		h := http.Header{}
		for _, v := range vs {
			h.Add("Anthropic-Version", v)
		}
		if _, ref := Inspect(body, h, ""); ref == nil || ref.Reason != ReasonField {
			t.Errorf("anthropic-version %q = %+v, want a field refusal", vs, ref)
		}
	}
}

func TestInspectImposesLimits(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"web_search_20250305","name":"web_search","max_uses":2}]}`)
	in, ref := Inspect(body, http.Header{}, "")
	if ref != nil {
		t.Fatal(ref.Message)
	}
	in.SetMaxTokens(7)
	out, err := in.Body(body)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		MaxTokens int64 `json:"max_tokens"`
		Tools     []map[string]any
	}
	if err := stdjson.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.MaxTokens != 7 || got.Tools[0]["max_uses"] != float64(DefaultMaxUses) || got.Tools[0]["max_content_tokens"] != float64(DefaultMaxContentTokens) || got.Tools[1]["max_uses"] != 2.0 {
		t.Errorf("forwarded %s", out)
	}
	if in.ServerTools[0].MaxUses != DefaultMaxUses || in.ServerTools[1].MaxUses != 2 {
		t.Errorf("server tools %+v", in.ServerTools)
	}
}

// TestInputBoundImages: an image's tokens follow its pixels, not its bytes:
// a 1-bit PNG of 1092x1092 pixels (some 1,590 tokens) is a few hundred
// bytes of base64, so a hundred of them must not be reserved as the bytes
// of the body; neither may a base64 document whose media_type is not
// spelled application/pdf.
func TestInputBoundImages(t *testing.T) {
	t.Parallel()
	const side, window = 1092, 1_000_000
	var png bytes.Buffer
	img := image.NewPaletted(image.Rect(0, 0, side, side), color.Palette{color.White, color.Black})
	if err := (&pngenc.Encoder{CompressionLevel: pngenc.BestCompression}).Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	block := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + base64.StdEncoding.EncodeToString(png.Bytes()) + `"}}`
	const images = 100
	for name, body := range map[string]string{
		"message":     `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[` + strings.TrimSuffix(strings.Repeat(block+",", images), ",") + `]}]}`,
		"tool_result": `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[` + strings.TrimSuffix(strings.Repeat(block+",", images), ",") + `]}]}]}`,
		"document":    `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/PDF","data":"JVBERi0="}}]}]}`,
	} {
		in, ref := Inspect([]byte(body), http.Header{}, "")
		if ref != nil {
			t.Fatalf("%s: refused: %s", name, ref.Message)
		}
		want := int64(window)
		if name != "document" {
			want = images * side * side / 750 // Anthropic's tokens of an image
		}
		if input, _ := inputBound(in, len(body), window); input < want {
			t.Errorf("%s: %d bytes reserved as %d input tokens, under the %d they are billed", name, len(body), input, want)
		}
	}
}

// TestInputBoundLimitsSaturate: max_uses and max_content_tokens are the
// client's; bounds built from huge ones saturate (and no budget covers
// them) instead of wrapping to a small or negative bound, and are reached
// without a loop as long as max_uses.
func TestInputBoundLimitsSaturate(t *testing.T) {
	t.Parallel()
	const window = 200_000
	huge := strconv.FormatInt(1<<62, 10)
	for name, tools := range map[string]string{
		"fetch":  `{"type":"web_fetch_20250910","name":"a","max_uses":` + huge + `,"max_content_tokens":` + huge + `},{"type":"web_fetch_20250910","name":"b","max_uses":` + huge + `,"max_content_tokens":` + huge + `}`,
		"search": `{"type":"web_search_20250305","name":"a","max_uses":` + huge + `},{"type":"web_search_20250305","name":"b","max_uses":` + huge + `}`,
		"one":    `{"type":"web_fetch_20250910","name":"a","max_uses":` + huge + `,"max_content_tokens":1}`,
	} {
		body := `{"model":"m","max_tokens":10,"messages":[],"tools":[` + tools + `]}`
		in, ref := Inspect([]byte(body), http.Header{}, "")
		if ref != nil {
			t.Fatalf("%s: refused: %s", name, ref.Message)
		}
		input, searches := inputBound(in, len(body), window)
		if input != math.MaxInt64 || searches < 0 || (name == "search" && searches != math.MaxInt64) {
			t.Errorf("%s: input %d, searches %d; want both saturated, not wrapped", name, input, searches)
		}
	}
	// Within int64 the bound is the same step by step: 3 fetches of at most
	// 2x100 tokens each on a 1,000-token first read, in a 1,200 window.
	in := &Inspection{ServerTools: []ServerTool{{Tool: capability.ToolWebFetch, MaxUses: 3, MaxContentTokens: 100}}}
	if input, _ := inputBound(in, 1000-promptOverhead, 1200); input != 1000+1200+1200+1200 {
		t.Errorf("input %d, want %d", input, 1000+1200+1200+1200)
	}
}
