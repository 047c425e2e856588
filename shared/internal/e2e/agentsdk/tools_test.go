//go:build e2e

package agentsdk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
)

// TestBundleCoversTheSDK is the claude-code bundle check against the Agent
// SDK: it captures the tools array of the first model request of the
// pinned SDK without fluidbox, as an app configures it — with and without
// a host that answers permission prompts (canUseTool: the SDK then adds
// AskUserQuestion, EnterPlanMode and ExitPlanMode), and with tool search on
// and off — and checks that every tool is either in the bundle, with a
// class and exactly the schema the SDK sends, or excluded for the SDK with
// a reason (shared/capability/builtin/claude-code-excluded.json), and that
// the gate denies the excluded ones.
func TestBundleCoversTheSDK(t *testing.T) {
	t.Parallel()
	offered := map[string]scriptedmodel.Tool{}
	for _, c := range []struct {
		host       bool
		toolSearch string
	}{{false, "false"}, {true, "false"}, {true, "true"}} {
		s := newStack(t, scriptedmodel.SayText("ok"))
		res := s.query(t, run{ID: "ses_plain", Token: "unused"}, project(t, nil), "say ok", opts{plain: true, hostAnswers: c.host, options: map[string]any{"env": map[string]string{"ENABLE_TOOL_SEARCH": c.toolSearch}}})
		reqs := s.Model.Requests()
		if len(reqs) == 0 || len(reqs[0].Tools) == 0 {
			t.Fatal("the SDK's first request carried no tools")
		}
		var names []string
		for _, tool := range reqs[0].Tools {
			names = append(names, tool.Name)
			if prev, seen := offered[tool.Name]; !seen || prev.InputSchema == nil {
				offered[tool.Name] = tool
			}
		}
		t.Logf("host answers %v, ENABLE_TOOL_SEARCH=%s: the model is offered %v (init message: %v)", c.host, c.toolSearch, names, res.InitTools)
	}
	bundle := map[string]capability.Tool{}
	for _, tool := range capability.Builtin()[0].Tools {
		bundle[tool.Name] = tool
	}
	excluded := capability.ClaudeCodeExcluded(capability.RunnerSDK)

	names := make([]string, 0, len(offered))
	for n := range offered {
		names = append(names, n)
	}
	sort.Strings(names)
	var table strings.Builder
	for _, n := range names {
		b, inBundle := bundle[n]
		reason, isExcluded := excluded[n]
		switch {
		case inBundle && isExcluded:
			t.Errorf("%s is both in the bundle and excluded", n)
		case inBundle:
			// The bundle narrows some schemas on purpose (claude-code-narrowed.json).
			sent, err := capability.Narrow(offered[n].InputSchema, capability.ClaudeCodeNarrowed()[n])
			if err != nil {
				t.Fatalf("%s: narrowing the SDK's schema: %v", n, err)
			}
			want, err := schemaguard.Canonical(sent)
			if err != nil {
				t.Fatalf("%s: the SDK's schema: %v", n, err)
			}
			if string(want) != string(b.InputSchema) && sameConstraints(t, want, b.InputSchema) {
				// Descriptions are annotations: the gate validates the same.
				table.WriteString("  in bundle  " + n + " (" + string(b.Class) + "), same constraints as the SDK's schema, descriptions differ\n")
				continue
			}
			if string(want) != string(b.InputSchema) {
				// Kept after the test, to diff against the bundle's file.
				dir, _ := os.MkdirTemp("", "fluidbox-sdk-schema-")
				path := filepath.Join(dir, n+".schema.json")
				_ = os.WriteFile(path, offered[n].InputSchema, 0o644)
				t.Errorf("%s: the bundle's input_schema differs from what the Agent SDK %s sends (saved in %s)", n, pinnedSDK, path)
				table.WriteString("  in bundle  " + n + " (" + string(b.Class) + "), schema DIFFERS from the SDK's\n")
				continue
			}
			table.WriteString("  in bundle  " + n + " (" + string(b.Class) + "), schema identical to the SDK's\n")
		case isExcluded:
			table.WriteString("  excluded   " + n + ": " + reason + "\n")
		default:
			t.Errorf("the Agent SDK %s offers %s, which is neither in the claude-code bundle nor excluded for the SDK in shared/capability/builtin/claude-code-excluded.json: decide its class or why it is left out", pinnedSDK, n)
		}
	}
	for n := range excluded {
		if _, ok := offered[n]; !ok {
			t.Errorf("claude-code-excluded.json lists %s as offered by the SDK, which %s does not offer: drop \"sdk\" from it", n, pinnedSDK)
		}
	}
	t.Logf("Agent SDK %s (Claude Code %s) tools against the claude-code bundle:\n%s", pinnedSDK, pinnedClaudeCode, table.String())

	// Excluded means denied, whatever the policy.
	newStack(t).CheckExcludedDenied(t, excluded)
}

// sameConstraints reports whether two schemas differ only in their
// "description" annotations.
func sameConstraints(t *testing.T, a, b []byte) bool {
	t.Helper()
	strip := func(raw []byte) string {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		var walk func(any) any
		walk = func(v any) any {
			switch x := v.(type) {
			case map[string]any:
				out := map[string]any{}
				for k, e := range x {
					if k == "description" {
						if _, isText := e.(string); isText {
							continue
						}
					}
					out[k] = walk(e)
				}
				return out
			case []any:
				for i := range x {
					x[i] = walk(x[i])
				}
			}
			return v
		}
		out, err := json.Marshal(walk(v))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	return strip(a) == strip(b)
}
