//go:build e2e

package claudecode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestToolSearchOn runs the CLI in its default mode, tool search on
// (ENABLE_TOOL_SEARCH=true, what it does when the variable is unset): its
// first request offers the deferred tools by name only, asks for the
// advanced-tool-use beta, and the model proxy admits it. The model loads
// NotebookEdit and CronCreate with ToolSearch (allowed, class read; the
// CLI fills in its max_results default before the hook asks, which the
// proxy's proof check accounts for), then calls both: NotebookEdit is
// decided against the frozen bundle's schema and the policy, CronCreate,
// not in the frozen set, is denied at the capability stage. The schema the
// CLI offers for NotebookEdit once loaded is the bundle's.
func TestToolSearchOn(t *testing.T) {
	t.Parallel()
	const policy = `{"name":"tool-search","default_verdict":"deny","rules":[
 {"id":"search","tool":"ToolSearch","verdict":"allow"},
 {"id":"reads","tool":"Read","verdict":"allow"},
 {"id":"notebooks","tool":"NotebookEdit","match":{"path":["**/*.ipynb"]},"verdict":"allow"}]}`
	const nb = `{"cells":[{"cell_type":"code","id":"c1","metadata":{},"source":["print(1)"],"outputs":[],"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}`
	dir := project(t, map[string]string{"a.ipynb": nb})
	s := newStack(t,
		call("toolu_search", "ToolSearch", map[string]any{"query": "select:NotebookEdit,CronCreate"}),
		// The CLI edits only a notebook it has read.
		then("toolu_read", "Read", map[string]any{"file_path": filepath.Join(dir, "a.ipynb")}),
		then("toolu_nb", "NotebookEdit", map[string]any{"notebook_path": filepath.Join(dir, "a.ipynb"), "cell_id": "c1", "new_source": "print(2)"}),
		then("toolu_cron", "CronCreate", map[string]any{"cron": "*/5 * * * *", "prompt": "again"}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, policy, nil)
	res := s.claude(t, r, dir, "edit the notebook", cliOpts{env: map[string]string{"ENABLE_TOOL_SEARCH": "true"}})

	reqs := s.Model.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].AnthropicBeta, "advanced-tool-use-2025-11-20") || offers(reqs[0], "NotebookEdit") || !offers(reqs[0], "ToolSearch") {
		t.Fatalf("the first request the upstream saw: beta %q, NotebookEdit offered %v; want tool search on (the beta, NotebookEdit deferred)", reqs[0].AnthropicBeta, offers(reqs[0], "NotebookEdit"))
	}
	var loaded *scriptedmodel.Tool
	for _, q := range reqs {
		for i, tl := range q.Tools {
			if tl.Name == "NotebookEdit" {
				loaded = &q.Tools[i]
			}
		}
	}
	if loaded == nil {
		t.Fatal("no request offered NotebookEdit after ToolSearch loaded it")
	}
	want, err := schemaguard.Canonical(loaded.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range capability.Builtin()[0].Tools {
		if tl.Name == "NotebookEdit" && string(tl.InputSchema) != string(want) {
			t.Errorf("NotebookEdit as the CLI loads it with tool search on differs from the bundle's schema")
		}
	}

	v := s.Ledger(t, r)
	for id, w := range map[string]decision{
		"toolu_search": {ToolName: "ToolSearch", Decision: vocab.Allow, RuleID: "search"},
		"toolu_nb":     {ToolName: "NotebookEdit", Decision: vocab.Allow, RuleID: "notebooks"},
		"toolu_cron":   {ToolName: "CronCreate", Decision: vocab.Deny, Source: "capability"},
	} {
		got := v.Decisions[id]
		if got.ToolName != w.ToolName || got.Decision != w.Decision || got.RuleID != w.RuleID || got.Source != w.Source {
			t.Errorf("%s: tool.decision %+v, want %+v", id, got, w)
		}
	}
	if v.Count["model.refused"] != 0 {
		t.Errorf("ledger has %d model.refused; with tool search on the proxy should admit every request", v.Count["model.refused"])
	}
	if len(res.PermissionDenials) != 1 || res.PermissionDenials[0].ToolName != "CronCreate" {
		t.Errorf("permission_denials = %+v, want CronCreate only", res.PermissionDenials)
	}
	if tr := s.ToolResult(t, "toolu_nb"); tr.IsError {
		t.Errorf("NotebookEdit: tool_result %+v, want success", tr)
	}
	var book struct {
		Cells []struct {
			Source any `json:"source"`
		} `json:"cells"`
	}
	if b := readFile(t, filepath.Join(dir, "a.ipynb")); json.Unmarshal(b, &book) != nil || len(book.Cells) != 1 || !strings.Contains(toText(book.Cells[0].Source), "print(2)") {
		t.Errorf("a.ipynb after the run: %s; want cell c1 to read print(2)", b)
	}
	s.CheckModelTraffic(t, r, v)
}

func offers(q scriptedmodel.Request, name string) bool {
	for _, tl := range q.Tools {
		if tl.Name == name {
			return true
		}
	}
	return false
}

// toText joins a notebook cell's source, a string or a list of lines.
func toText(src any) string {
	switch s := src.(type) {
	case string:
		return s
	case []any:
		var b strings.Builder
		for _, l := range s {
			if str, ok := l.(string); ok {
				b.WriteString(str)
			}
		}
		return b.String()
	}
	return ""
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
