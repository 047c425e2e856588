//go:build e2e

package claudecode

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// serverToolsPolicy allows the WebSearch tool call, and the web_search
// server tool its sub-request offers when allowSearch says so (by the
// max_uses Claude Code sets, matched by JSON pointer).
func serverToolsPolicy(allowSearch bool) string {
	rules := `{"id":"search-tool","tool":"WebSearch","verdict":"allow"}`
	if allowSearch {
		rules += `,{"id":"server-search","tool":"anthropic__web_search","match":{"input":{"/max_uses":["1","2","3","4","5","6","7","8"]}},"verdict":"allow"}`
	}
	return `{"name":"server-tools","default_verdict":"deny","rules":[` + rules + `]}`
}

// offersWebSearch is Claude Code's WebSearch sub-request: a second model
// request whose only tool is the web_search server tool.
func offersWebSearch(r scriptedmodel.Request) bool {
	t, ok := r.Tool("web_search")
	return ok && t.Type == "web_search_20250305"
}

// TestWebSearchThroughTheGate: Claude Code's WebSearch runs as a
// sub-request offering Anthropic's web_search server tool. Where the
// policy allows anthropic__web_search, the proxy forwards it (with the
// max_uses it was judged by) and the ledger names the tool offered; where
// it does not, the proxy refuses the sub-request before anything reaches
// the upstream, and the ledger records the refusal with the tool and the
// stage.
func TestWebSearchThroughTheGate(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		s := newStack(t,
			call("toolu_search", "WebSearch", map[string]any{"query": "golang release"}),
			scriptedmodel.SayText("done"),
		)
		s.Model.Route(offersWebSearch, scriptedmodel.SayText("Go 1.26 is the latest release."))
		r := s.NewRun(t, serverToolsPolicy(allow), map[string]any{"capabilities": []string{"claude-code", "anthropic-server-tools"}})
		res := s.claude(t, r, project(t, nil), "search the web", cliOpts{})
		v := s.Ledger(t, r)
		if d := v.Decisions["toolu_search"]; d.Decision != vocab.Allow || d.RuleID != "search-tool" {
			t.Errorf("allow=%v: WebSearch decision %+v, want allow by search-tool", allow, d)
		}

		var forwarded []scriptedmodel.Request
		for _, req := range s.Model.Requests() {
			if req.Path == "/v1/messages" && offersWebSearch(req) {
				forwarded = append(forwarded, req)
			}
		}
		refused, offered := modelToolEvents(t, s, r)
		if !allow {
			if len(forwarded) != 0 {
				t.Errorf("the upstream received %d web_search sub-requests the policy denies", len(forwarded))
			}
			if len(refused) == 0 || refused[0]["reason"] != "gate" || refused[0]["tool"] != "anthropic__web_search" || refused[0]["stage"] != "policy" {
				t.Errorf("model.refused = %v, want the web_search sub-request refused by the policy stage", refused)
			}
			if tr := s.ToolResult(t, "toolu_search"); !tr.IsError && !strings.Contains(tr.Content, "fluidbox") {
				t.Logf("WebSearch's tool_result after the refusal: %+v", tr)
			}
			continue
		}
		if len(forwarded) == 0 {
			t.Fatalf("no web_search sub-request reached the upstream; result %+v", res)
		}
		var tools []map[string]any
		if err := json.Unmarshal(forwarded[0].ToolsJSON, &tools); err != nil || len(tools) != 1 || tools[0]["max_uses"] == nil {
			t.Errorf("forwarded tools %s, want web_search with its max_uses", forwarded[0].ToolsJSON)
		}
		if len(refused) != 0 {
			t.Errorf("model.refused = %v on a run whose policy allows the search", refused)
		}
		if !offered["anthropic__web_search"] {
			t.Errorf("no budget.reserved names anthropic__web_search among its server_tools")
		}
		s.CheckModelTraffic(t, r, v)
	}
}

// modelToolEvents returns the run's model.refused events and the server
// tools its budget.reserved events name.
func modelToolEvents(t *testing.T, s *stack, r run) (refused []map[string]any, offered map[string]bool) {
	t.Helper()
	offered = map[string]bool{}
	for _, e := range s.Events(t, r) {
		var d struct {
			Tools []string `json:"server_tools"`
		}
		switch e.Type {
		case "model.refused":
			var m map[string]any
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatal(err)
			}
			refused = append(refused, m)
		case "budget.reserved":
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			for _, n := range d.Tools {
				offered[n] = true
			}
		}
	}
	return refused, offered
}

// TestWebFetchThroughTheProxy: Claude Code's WebFetch fetches the page
// itself (a tool call the gate allowed) and has a model summarize it in a
// sub-request without server tools, which the proxy admits and forwards
// like any other; the summary comes back as the tool's result.
func TestWebFetchThroughTheProxy(t *testing.T) {
	t.Parallel()
	// WebFetch upgrades http to https, so the page is served over TLS
	// with the test server's own certificate, which the CLI is told to
	// trust (NODE_EXTRA_CA_CERTS).
	page := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body><h1>Release notes</h1><p>"+strings.Repeat("fluidbox-page-canary ", 200)+"</p></body></html>")
	}))
	defer page.Close()
	const policy = `{"name":"fetch","default_verdict":"deny","rules":[{"id":"fetch-local","tool":"WebFetch","verdict":"allow"}]}`
	s := newStack(t,
		call("toolu_fetch", "WebFetch", map[string]any{"url": page.URL + "/notes", "prompt": "summarize the release notes"}),
		scriptedmodel.SayToolResult(),
	)
	s.Model.Route(func(r scriptedmodel.Request) bool {
		return len(r.Tools) == 0 && strings.Contains(r.LastUserText(), "fluidbox-page-canary")
	}, scriptedmodel.SayText("summary: the release notes"))
	r := s.NewRun(t, policy, nil)
	dir := project(t, nil)
	// Claude Code asks claude.ai whether a domain is safe before it
	// fetches, outside the model channel; a sandbox that reaches only
	// fluidbox turns that off, as the README says.
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.local.json"), []byte(`{"skipWebFetchPreflight":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "page-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: page.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	res := s.claude(t, r, dir, "read the release notes", cliOpts{env: map[string]string{"NODE_EXTRA_CA_CERTS": ca}})
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_fetch"]; d.Decision != vocab.Allow || d.RuleID != "fetch-local" {
		t.Errorf("WebFetch decision %+v, want allow by fetch-local", d)
	}
	if tr := s.ToolResult(t, "toolu_fetch"); tr.IsError || !strings.Contains(tr.Content, "summary: the release notes") {
		t.Errorf("WebFetch tool_result %+v, want the summary the sub-request got; result %q", tr, res.Result)
	}
	s.CheckModelTraffic(t, r, v)
}
