//go:build e2e

package claudecode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
)

func TestZZCapture(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body><h1>Hello page</h1><p>"+strings.Repeat("content here and more words. ", 5000)+"</p></body></html>")
	}))
	defer page.Close()
	const allowAll = `{"name":"allow-all","default_verdict":"allow","rules":[]}`
	s := newStack(t,
		call("toolu_search", "WebSearch", map[string]any{"query": "golang release"}),
		scriptedmodel.SayText("search done"),
		scriptedmodel.SayText("after search"),
		scriptedmodel.SayText("done"),
		scriptedmodel.SayText("done"),
		scriptedmodel.SayText("done"),
	)
	// a bundle with WebSearch so the hook lets it through
	ctx := context.Background()
	cap := map[string]any{"name": "websearch-cap", "tools": []map[string]any{{"name": "WebSearch", "class": "egress", "description": "search", "input_schema": map[string]any{"type": "object"}}}}
	if err := s.admin.Do(ctx, "POST", "/v1/capabilities", cap, nil); err != nil {
		t.Fatal(err)
	}
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(allowAll), &pol); err != nil {
		t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code", "websearch-cap"}, "budget": map[string]any{"limit_usd": 100}}, &ses); err != nil {
		t.Fatal(err)
	}
	r := run{id: ses.ID, token: ses.Token}
	dir := project(t, nil)
	res := s.claude(t, r, dir, "fetch and search", cliOpts{})
	t.Logf("result %+v", res)
	for _, req := range s.model.Requests() {
		for _, m := range req.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					t.Logf("TOOLRESULT %s err=%v %.300s", b.ToolUseID, b.IsError, b.Content)
				}
			}
		}
	}
	out := os.Getenv("CAPTURE_DIR")
	for i, req := range s.model.Requests() {
		var top map[string]json.RawMessage
		_ = json.Unmarshal(req.Body, &top)
		keys := []string{}
		for k := range top {
			keys = append(keys, k)
		}
		types := []string{}
		var tools []map[string]any
		_ = json.Unmarshal(top["tools"], &tools)
		for _, tl := range tools {
			ty, _ := tl["type"].(string)
			nm, _ := tl["name"].(string)
			if ty != "" {
				b, _ := json.Marshal(tl)
				types = append(types, string(b))
			} else {
				types = append(types, nm)
			}
		}
		t.Logf("REQ %d %s ?%s beta=%q ver=%q keys=%v tools=%s", i, req.Path, req.RawQuery, req.Header.Values("Anthropic-Beta"), req.AnthropicVersion, keys, strings.Join(types, ","))
		hdrs := []string{}
		for k := range req.Header {
			hdrs = append(hdrs, k)
		}
		t.Logf("   headers=%v", hdrs)
		if out != "" {
			_ = os.WriteFile(filepath.Join(out, fmt.Sprintf("req%02d.json", i)), req.Body, 0o644)
		}
	}
}
