package capability

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/schemaguard"
)

func claudeCode(t *testing.T) Bundle {
	t.Helper()
	bs := Builtin()
	if len(bs) != 2 {
		_, err := loadBuiltins()
		t.Fatalf("Builtin() = %d bundles (%v), want 2", len(bs), err)
	}
	return bs[0]
}

func TestBuiltinClaudeCode(t *testing.T) {
	t.Parallel()
	b := claudeCode(t)
	if b.ID != "cap_claude_code" || b.Name != "claude-code" {
		t.Errorf("Builtin()[0] = %q %q, want cap_claude_code claude-code", b.ID, b.Name)
	}
	want := map[string]Class{
		"Bash": ClassExecute, "Read": ClassRead, "Glob": ClassRead, "Grep": ClassRead,
		"Write": ClassWrite, "Edit": ClassWrite, "WebFetch": ClassEgress,
		// Each decided in builtin/README.md.
		"Agent": ClassExecute, "Skill": ClassExecute, "Monitor": ClassExecute,
		"NotebookEdit": ClassWrite, "EnterWorktree": ClassWrite, "ExitWorktree": ClassWrite,
		"TaskStop": ClassRead, "ToolSearch": ClassRead, "WebSearch": ClassEgress,
	}
	if len(b.Tools) != len(want) {
		t.Errorf("claude-code has %d tools, want %d", len(b.Tools), len(want))
	}
	for _, tool := range b.Tools {
		if c, ok := want[tool.Name]; !ok || c != tool.Class {
			t.Errorf("tool %s class %q, want %q", tool.Name, tool.Class, c)
		}
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	again := Builtin()[0]
	if again.Digest != b.Digest {
		t.Errorf("Builtin digest unstable: %s vs %s", again.Digest, b.Digest)
	}
	again.Tools[0].InputSchema[0] = 'X'
	again.Tools[0].Name = "changed"
	if third := Builtin()[0]; third.Tools[0].Name == "changed" || third.Tools[0].InputSchema[0] == 'X' {
		t.Error("Builtin returns shared, mutable data")
	}
}

// TestBuiltinSchemas feeds each tool inputs of the shape Claude Code sends
// (from real tool_use blocks) and broken ones.
func TestBuiltinSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool, input string
		ok          bool
		reason      string
	}{
		{"Bash", `{"command":"git status","description":"Show working tree status"}`, true, ""},
		// Agent is the CLI's schema narrowed (claude-code-narrowed.json): a
		// subagent runs here, where the hook and the proxy see it.
		{"Agent", `{"description":"d","prompt":"p","subagent_type":"Explore"}`, true, ""},
		{"Agent", `{"description":"d","prompt":"p","isolation":"worktree"}`, true, ""},
		{"Agent", `{"description":"d","prompt":"p","isolation":"remote"}`, false, "input.isolation: value must be"},
		{"Bash", `{"command":"npm test","timeout":600000,"run_in_background":true,"dangerouslyDisableSandbox":false,"description":"Run tests"}`, true, ""},
		{"Bash", `{"description":"no command"}`, false, "input.command: required property missing"},
		{"Bash", `{"command":["ls"]}`, false, "input.command: expected string, but got array"},
		{"Bash", `{"command":"ls","timeout":"10s"}`, false, "input.timeout: expected number"},
		{"Bash", `{"command":"ls","shell":"zsh"}`, false, "input.shell: property is not allowed"},
		{"Read", `{"file_path":"/repo/src/main.go"}`, true, ""},
		{"Read", `{"file_path":"/repo/big.log","offset":1200,"limit":200}`, true, ""},
		{"Read", `{"path":"/repo/src/main.go"}`, false, "input.file_path: required property missing"},
		{"Read", `{"file_path":"/repo/paper.pdf","pages":"1-5"}`, true, ""},
		{"Read", `{"file_path":"/repo/big.log","allow_large":true}`, true, ""},
		{"Read", `{"file_path":"/repo/big.log","offset":1.5}`, false, "input.offset: "},
		{"Read", `{"file_path":"/repo/big.log","limit":0}`, false, "input.limit: "},
		{"Glob", `{"pattern":"**/*.go"}`, true, ""},
		{"Glob", `{"pattern":"src/**/*.ts","path":"/repo/web"}`, true, ""},
		{"Glob", `{"path":"/repo"}`, false, "input.pattern: required property missing"},
		{"Grep", `{"pattern":"func main","path":"/repo","glob":"*.go","output_mode":"content","-n":true,"-i":false,"-A":2,"-B":1,"-C":3,"type":"go","head_limit":50,"offset":10,"multiline":false}`, true, ""},
		{"Grep", `{"pattern":"TODO"}`, true, ""},
		{"Grep", `{"pattern":"TODO","output_mode":"lines"}`, false, "input.output_mode: value must be one of"},
		{"Grep", `{"pattern":"TODO","-A":"2"}`, false, `input["-A"]: expected number, but got string`},
		{"Write", `{"file_path":"/repo/notes.md","content":"# Notes\n"}`, true, ""},
		{"Write", `{"file_path":"/repo/notes.md"}`, false, "input.content: required property missing"},
		{"Edit", `{"file_path":"/repo/a.go","old_string":"foo()","new_string":"bar()"}`, true, ""},
		{"Edit", `{"file_path":"/repo/a.go","old_string":"foo","new_string":"bar","replace_all":true}`, true, ""},
		{"Edit", `{"file_path":"/repo/a.go","old_string":"foo","replace_all":"yes"}`, false, "input.new_string: required property missing; input.replace_all: expected boolean, but got string"},
		{"WebFetch", `{"url":"https://go.dev/doc/effective_go","prompt":"Summarize the section on errors"}`, true, ""},
		{"WebFetch", `{"url":"https://example.com"}`, false, "input.prompt: required property missing"},
		{"WebFetch", `{"url":"https://go.dev/blog","prompt":"Summarize","offset":4000}`, true, ""},
		{"WebFetch", `{"url":"https://go.dev/blog","prompt":"x","offset":-1}`, false, "input.offset: "},
		// Draft 2020-12 (what Claude Code 2.1.332 sends) makes "format" an
		// annotation: the schema accepts any string as url, the CLI checks it
		// itself, and policies match /url with globs.
		{"WebFetch", `{"url":"not a url","prompt":"x"}`, true, ""},
	}
	schemas := map[string]*schemaguard.Schema{}
	for _, tool := range claudeCode(t).Tools {
		s, err := schemaguard.Compile(tool.InputSchema)
		if err != nil {
			t.Fatalf("builtin %s schema: %v", tool.Name, err)
		}
		schemas[tool.Name] = s
	}
	for _, tt := range tests {
		s := schemas[tt.tool]
		if s == nil {
			t.Fatalf("no builtin tool %s", tt.tool)
		}
		dec := json.NewDecoder(strings.NewReader(tt.input))
		dec.UseNumber()
		var in any
		if err := dec.Decode(&in); err != nil {
			t.Fatal(err)
		}
		err := s.Validate(in)
		if tt.ok {
			if err != nil {
				t.Errorf("%s.Validate(%s) = %v, want nil", tt.tool, tt.input, err)
			}
			continue
		}
		var ie *schemaguard.InvalidError
		if !errors.As(err, &ie) || !strings.Contains(ie.Reason, tt.reason) {
			t.Errorf("%s.Validate(%s) = %v, want *InvalidError containing %q", tt.tool, tt.input, err, tt.reason)
		}
	}
}

// TestClaudeCodeExcluded: the excluded list parses, gives every tool a
// reason and a known runner, and never names a tool of the bundle.
func TestClaudeCodeExcluded(t *testing.T) {
	t.Parallel()
	all, err := excluded()
	if err != nil || len(all) == 0 {
		t.Fatalf("excluded() = %d tools, %v", len(all), err)
	}
	inBundle := map[string]bool{}
	for _, tool := range claudeCode(t).Tools {
		inBundle[tool.Name] = true
	}
	for name, tool := range all {
		if inBundle[name] {
			t.Errorf("%s is both in the bundle and excluded", name)
		}
		if len(tool.Reason) < 20 {
			t.Errorf("%s: reason %q is not a reason", name, tool.Reason)
		}
		if len(tool.OfferedBy) == 0 {
			t.Errorf("%s: offered by no runner", name)
		}
		for _, r := range tool.OfferedBy {
			if r != RunnerCLI && r != RunnerSDK {
				t.Errorf("%s: unknown runner %q", name, r)
			}
		}
	}
	cli, sdk := ClaudeCodeExcluded(RunnerCLI), ClaudeCodeExcluded(RunnerSDK)
	for _, name := range []string{"AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "CronCreate"} {
		if sdk[name] == "" {
			t.Errorf("%s is not excluded for the Agent SDK", name)
		}
	}
	if cli["CronCreate"] == "" || cli["AskUserQuestion"] != "" {
		t.Errorf("cli: CronCreate %q, AskUserQuestion %q; want CronCreate excluded and AskUserQuestion not offered", cli["CronCreate"], cli["AskUserQuestion"])
	}
	if ClaudeCodeExcluded("other") == nil || len(ClaudeCodeExcluded("other")) != 0 {
		t.Error("an unknown runner offers nothing")
	}
}

func TestBuiltinServerTools(t *testing.T) {
	t.Parallel()
	b := Builtin()[1]
	if b.ID != ServerToolsID || b.Name != ServerToolsName {
		t.Fatalf("Builtin()[1] = %q %q, want %s %s", b.ID, b.Name, ServerToolsID, ServerToolsName)
	}
	want := map[string]Class{ToolWebSearch: ClassEgress, ToolWebFetch: ClassEgress, ToolCodeExecution: ClassExecute}
	if len(b.Tools) != len(want) {
		t.Errorf("%s has %d tools, want %d", ServerToolsName, len(b.Tools), len(want))
	}
	for _, tool := range b.Tools {
		if c, ok := want[tool.Name]; !ok || c != tool.Class {
			t.Errorf("tool %s class %q, want %q", tool.Name, tool.Class, c)
		}
	}
	tests := []struct {
		tool, input string
		ok          bool
	}{
		{ToolWebSearch, `{"type":"web_search_20250305","name":"web_search","max_uses":8}`, true},
		{ToolWebSearch, `{"type":"web_search_20250305","name":"web_search","max_uses":3,"allowed_domains":["go.dev"]}`, true},
		{ToolWebSearch, `{"type":"web_search_20250305","name":"web_search"}`, false},
		{ToolWebSearch, `{"type":"web_search_20260209","name":"web_search","max_uses":1}`, false},
		{ToolWebSearch, `{"type":"web_search_20250305","name":"web_search","max_uses":1,"extra":1}`, false},
		{ToolWebFetch, `{"type":"web_fetch_20250910","name":"web_fetch","max_uses":2,"max_content_tokens":5000}`, true},
		{ToolWebFetch, `{"url":"https://example.com/a.pdf"}`, true},
		{ToolWebFetch, `{"type":"web_fetch_20250910","name":"web_fetch","max_uses":0}`, false},
		{ToolCodeExecution, `{"type":"code_execution_20250825","name":"code_execution"}`, true},
		{ToolCodeExecution, `{"type":"code_execution_20250825","name":"code_execution","container":"x"}`, false},
	}
	byName := map[string]Tool{}
	for _, tool := range b.Tools {
		byName[tool.Name] = tool
	}
	for _, tt := range tests {
		s, err := schemaguard.Compile(byName[tt.tool].InputSchema)
		if err != nil {
			t.Fatalf("%s: compile: %v", tt.tool, err)
		}
		var v any
		if err := json.Unmarshal([]byte(tt.input), &v); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); (err == nil) != tt.ok {
			t.Errorf("%s %s: Validate = %v, want ok=%v", tt.tool, tt.input, err, tt.ok)
		}
	}
}

// TestNarrow: a narrowing replaces the value at its pointer in a copy of
// the schema, and fails on a pointer the schema does not have (a CLI that
// renamed the property must not slip past it unnarrowed).
func TestNarrow(t *testing.T) {
	t.Parallel()
	schema := []byte(`{"type":"object","properties":{"isolation":{"type":"string","enum":["worktree","remote"]}}}`)
	got, err := Narrow(schema, []Narrowing{{Pointer: "/properties/isolation/enum", Value: json.RawMessage(`["worktree"]`)}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := schemaguard.Canonical(got)
	want, _ := schemaguard.Canonical([]byte(`{"type":"object","properties":{"isolation":{"type":"string","enum":["worktree"]}}}`))
	if string(c) != string(want) {
		t.Errorf("Narrow = %s, want %s", c, want)
	}
	if _, err := Narrow(schema, []Narrowing{{Pointer: "/properties/mode/enum", Value: json.RawMessage(`[]`)}}); err == nil {
		t.Error("Narrow at a pointer the schema lacks succeeded")
	}
	ns := ClaudeCodeNarrowed()
	if len(ns["Agent"]) != 1 || ns["Agent"][0].Pointer != "/properties/isolation/enum" || len(ns["Agent"][0].Reason) < 20 {
		t.Errorf("ClaudeCodeNarrowed()[Agent] = %+v, want isolation narrowed with a reason", ns["Agent"])
	}
}
