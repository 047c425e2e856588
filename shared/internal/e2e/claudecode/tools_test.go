//go:build e2e

package claudecode

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/internal/e2e/controlplane"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// excluded lists the tools Claude Code (pinned version) offers its model
// that the built-in claude-code bundle deliberately leaves out, with a
// reason each (shared/capability/builtin/claude-code-excluded.json, which
// the Agent SDK suite checks too). A run freezes the bundle's tools, so the
// gate denies each of these at the capability stage whatever the policy
// says. An operator who wants one registers a bundle of their own
// (POST /v1/capabilities) with a class.
var excluded = capability.ClaudeCodeExcluded(capability.RunnerCLI)

// firstTools runs the CLI once, the model answering "ok" without a tool
// call, and returns the tools array of its first request as it reached the
// model proxy. In the CLI's default mode (tool search on) that request
// offers the deferred tools by name only, so their schemas are checked
// where they arrive (TestToolSearchOn) and in the mode without.
func firstTools(t *testing.T, toolSearch string) []scriptedmodel.Tool {
	t.Helper()
	var mu sync.Mutex
	var first []byte
	record := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/model/v1/messages") {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, "read", http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
				mu.Lock()
				if first == nil {
					first = b
				}
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}
	s := &stack{controlplane.Start(t, controlplane.Options{AdminToken: adminToken, TablePrefix: "e2eclaude", Wrap: record}, scriptedmodel.SayText("ok"))}
	r := s.NewRun(t, governed, nil)
	s.claude(t, r, project(t, nil), "say ok", cliOpts{env: map[string]string{"ENABLE_TOOL_SEARCH": toolSearch}})
	for _, e := range s.Events(t, r) {
		if e.Type == "model.refused" {
			t.Logf("ENABLE_TOOL_SEARCH=%s: the proxy refused a request: %s", toolSearch, e.Data)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var body struct {
		Tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(first, &body); err != nil || len(body.Tools) == 0 {
		t.Fatalf("the CLI's first request carried no tools (%v)", err)
	}
	out := make([]scriptedmodel.Tool, 0, len(body.Tools))
	for _, tl := range body.Tools {
		out = append(out, scriptedmodel.Tool{Type: tl.Type, Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema})
	}
	return out
}

// TestBundleCoversTheCLI captures the tools array of the pinned CLI's
// first request — as fluidbox runs it (ENABLE_TOOL_SEARCH=false: every
// tool, with its schema) and in the CLI's default (deferred tools behind
// ToolSearch) — and checks that every tool is either in the claude-code
// bundle, with a deliberate class and exactly the schema the CLI sends, or
// in excluded with a reason, and that the gate denies the excluded ones.
func TestBundleCoversTheCLI(t *testing.T) {
	t.Parallel()
	cli := map[string]scriptedmodel.Tool{}
	for _, mode := range []string{"false", "true"} {
		for _, tool := range firstTools(t, mode) {
			if _, seen := cli[tool.Name]; !seen || tool.InputSchema != nil && mode == "false" {
				cli[tool.Name] = tool
			}
		}
	}
	bundle := map[string]capability.Tool{}
	bs := capability.Builtin()
	if len(bs) == 0 || bs[0].Name != capability.ClaudeCodeName {
		t.Fatalf("capability.Builtin() = %d bundles, want claude-code", len(bs))
	}
	for _, tool := range bs[0].Tools {
		bundle[tool.Name] = tool
	}

	narrowed := capability.ClaudeCodeNarrowed()
	names := make([]string, 0, len(cli))
	for n := range cli {
		names = append(names, n)
	}
	sort.Strings(names)
	var table strings.Builder
	for _, n := range names {
		tool := cli[n]
		b, inBundle := bundle[n]
		reason, isExcluded := excluded[n]
		switch {
		case inBundle && isExcluded:
			t.Errorf("%s is both in the bundle and excluded", n)
		case inBundle:
			if !b.Class.Valid() {
				t.Errorf("%s: bundle class %q is not a class", n, b.Class)
			}
			// The bundle narrows some schemas on purpose (claude-code-narrowed.json).
			sent, err := capability.Narrow(tool.InputSchema, narrowed[n])
			if err != nil {
				t.Fatalf("%s: narrowing the CLI's schema: %v", n, err)
			}
			want, err := schemaguard.Canonical(sent)
			if err != nil {
				t.Fatalf("%s: the CLI's schema: %v", n, err)
			}
			if string(want) != string(b.InputSchema) {
				path := filepath.Join(t.TempDir(), n+".schema.json")
				_ = os.WriteFile(path, tool.InputSchema, 0o644)
				t.Errorf("%s: the bundle's input_schema differs from what Claude Code %s sends (saved in %s); refresh shared/capability/builtin/claude-code/%s.json", n, pinnedVersion, path, n)
			}
			if _, err := schemaguard.Compile(tool.InputSchema); err != nil {
				t.Errorf("%s: the CLI's schema does not compile in schemaguard: %v", n, err)
			}
			if len(narrowed[n]) > 0 {
				table.WriteString("  in bundle  " + n + " (" + string(b.Class) + "), the CLI's schema narrowed as claude-code-narrowed.json says\n")
				continue
			}
			table.WriteString("  in bundle  " + n + " (" + string(b.Class) + "), schema identical to the CLI's\n")
		case isExcluded:
			table.WriteString("  excluded   " + n + ": " + reason + "\n")
		default:
			t.Errorf("Claude Code %s offers %s, which is neither in the claude-code bundle nor excluded for the CLI (shared/capability/builtin/claude-code-excluded.json): decide its class or why it is left out", pinnedVersion, n)
		}
	}
	for n := range bundle {
		if _, ok := cli[n]; !ok {
			table.WriteString("  in bundle  " + n + " (" + string(bundle[n].Class) + "), not offered by " + pinnedVersion + " (kept for older CLIs and the Agent SDK)\n")
		}
	}
	for n := range excluded {
		if _, ok := cli[n]; !ok {
			t.Errorf("claude-code-excluded.json lists %s as offered by the CLI, which Claude Code %s does not offer: drop \"cli\" from it", n, pinnedVersion)
		}
	}
	t.Logf("Claude Code %s tools against the claude-code bundle:\n%s", pinnedVersion, table.String())

	// Excluded means denied: the gate refuses each at the capability stage.
	newStack(t).CheckExcludedDenied(t, excluded)
}

// TestBundleAcceptsRealInputs has the CLI call each bundle tool it offers,
// with inputs as a model writes them, and checks that the gate's schema
// stage accepted what the CLI really forwarded to the hook (which is not
// always what the model wrote: Edit gains replace_all). An excluded tool
// in the same run is denied at the capability stage.
func TestBundleAcceptsRealInputs(t *testing.T) {
	t.Parallel()
	const policy = `{"name":"tools","default_verdict":"deny","rules":[
 {"id":"touch","tool":"Bash","match":{"command_prefix":["touch"],"options":"any"},"verdict":"allow"},
 {"id":"reads","tool":"Read","verdict":"allow"},
 {"id":"writes","tool":"Write","match":{"path":["**"]},"verdict":"allow"},
 {"id":"edits","tool":"Edit","match":{"path":["**"]},"verdict":"allow"},
 {"id":"no-egress","tool":"WebFetch","verdict":"deny"}]}`
	dir := project(t, map[string]string{"notes.md": "original\n"})
	s := newStack(t,
		call("toolu_bash", "Bash", map[string]any{"command": "touch bash.txt", "description": "Create a file", "timeout": 60000}),
		then("toolu_write", "Write", map[string]any{"file_path": filepath.Join(dir, "write.txt"), "content": "written\n"}),
		then("toolu_read", "Read", map[string]any{"file_path": filepath.Join(dir, "notes.md"), "offset": 1, "limit": 10}),
		then("toolu_edit", "Edit", map[string]any{"file_path": filepath.Join(dir, "notes.md"), "old_string": "original", "new_string": "edited"}),
		then("toolu_fetch", "WebFetch", map[string]any{"url": "http://127.0.0.1:9/docs", "prompt": "summarize"}),
		then("toolu_cron", "CronCreate", map[string]any{"cron": "*/5 * * * *", "prompt": "check again"}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, policy, nil)
	res := s.claude(t, r, dir, "use your tools", cliOpts{})

	v := s.Ledger(t, r)
	want := map[string]decision{
		"toolu_bash":  {ToolName: "Bash", Decision: vocab.Allow, RuleID: "touch"},
		"toolu_write": {ToolName: "Write", Decision: vocab.Allow, RuleID: "writes"},
		"toolu_read":  {ToolName: "Read", Decision: vocab.Allow, RuleID: "reads"},
		"toolu_edit":  {ToolName: "Edit", Decision: vocab.Allow, RuleID: "edits"},
		"toolu_fetch": {ToolName: "WebFetch", Decision: vocab.Deny, Source: "policy", RuleID: "no-egress"},
		"toolu_cron":  {ToolName: "CronCreate", Decision: vocab.Deny, Source: "capability"},
	}
	for id, w := range want {
		got := v.Decisions[id]
		got.ToolCallID = ""
		if got.ToolName != w.ToolName || got.Decision != w.Decision || got.RuleID != w.RuleID || (w.Source != "" && got.Source != w.Source) {
			t.Errorf("%s: tool.decision %+v, want %+v (a schema-stage denial would mean the bundle rejects the CLI's real input)", id, got, w)
		}
	}
	for _, d := range res.PermissionDenials {
		t.Logf("denied: %s %v", d.ToolName, d.ToolInput)
	}
	if len(res.PermissionDenials) != 2 {
		t.Errorf("permission_denials = %+v, want WebFetch and CronCreate", res.PermissionDenials)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(b) != "edited\n" || !exists(dir, "bash.txt") || !exists(dir, "write.txt") {
		t.Errorf("after the run: notes.md %q, bash.txt %v, write.txt %v; want edited, and both files", b, exists(dir, "bash.txt"), exists(dir, "write.txt"))
	}
	if tr := s.ToolResult(t, "toolu_cron"); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied (capability") {
		t.Errorf("CronCreate: tool_result %+v, want fluidbox's capability denial", tr)
	}
	s.CheckModelTraffic(t, r, v)
}
