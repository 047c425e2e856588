package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/evaluation"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestPolicyEval: `fluidbox policy eval` prints the decision, the stages
// and Bash's analysis, or the JSON answer with --json.
func TestPolicyEval(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}

	r := fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--command", "sudo rm -rf build")
	for _, want := range []string{"REQUIRE_APPROVAL", "rule ask-rm", "policy: pass", "approval: require_approval", "commands deny rules see:", "    rm -rf build", "read-only: no"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("policy eval --command = %+v, want %q in the output", r, want)
		}
	}
	r = fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--command", "rm x", "--tier", "read_only")
	if r.code != 0 || !strings.Contains(r.stdout, "DENY") || !strings.Contains(r.stdout, "trust_tier: deny (this run is read_only") {
		t.Errorf("policy eval in read_only = %+v, want a trust_tier deny", r)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--command", "rm x", "--autonomous", "--json")
	var out evaluation.View
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || out.Decision != policy.VerdictDeny || out.Verdict != "require_approval" || out.Trace.Bash == nil {
		t.Errorf("policy eval --autonomous --json = %+v (%v), want deny from require_approval with a Bash trace", r, err)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--tool", "mcp__x__y", "--input", `{"a":1}`)
	if r.code != 0 || !strings.Contains(r.stdout, "the schema and trust tier stages were skipped") {
		t.Errorf("policy eval --tool = %+v, want the skipped stages named", r)
	}
	for _, bad := range [][]string{
		{"policy", "eval"},
		{"policy", "eval", pol.ID},
		{"policy", "eval", pol.ID, "--command", "ls", "--tool", "Bash"},
		{"policy", "eval", pol.ID, "--tool", "Read", "--input", "{"},
		{"policy", "eval", "pol_nope", "--command", "ls"},
		{"policy", "frobnicate"},
	} {
		if r := fluidbox(ctx, s.env(), "", bad...); r.code == 0 || r.stderr == "" {
			t.Errorf("fluidbox %v = %+v, want a failure with a message", bad, r)
		}
	}
}

// TestPolicyTestExamples: the repository's example policies validate and
// pass their own tests, offline (this is how make test runs them).
func TestPolicyTestExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/policies/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("example policies: %v %v", files, err)
	}
	r := fluidbox(context.Background(), nil, "", append([]string{"policy", "test"}, files...)...)
	if r.code != 0 || strings.Count(r.stdout, "ok   ") != len(files) {
		t.Errorf("fluidbox policy test %v = %+v, want every file ok", files, r)
	}
}

// TestPolicyTestFailures: a failing test or an invalid document is named,
// and the exit status is 1.
func TestPolicyTestFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.json")
	broken := filepath.Join(dir, "broken.json")
	for name, doc := range map[string]string{
		good:   "name: g\ndefault_verdict: deny\ntests:\n  - {tool_name: Bash, input: {command: ls}, expect: deny}\n",
		bad:    `{"name":"b","default_verdict":"deny","tests":[{"name":"ls","tool_name":"Bash","input":{"command":"ls"},"expect":"allow"}]}`,
		broken: `{"name":"x","default_verdict":"ask"}`,
	} {
		if err := os.WriteFile(name, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := fluidbox(context.Background(), nil, "", "policy", "test", good, bad, broken, filepath.Join(dir, "missing.json"))
	for _, want := range []string{"ok   " + good + " (1 tests)", "FAIL " + bad + ": 1 of 1 tests failed", "tests[0] ls: expected allow, got deny", "FAIL " + broken + `: default_verdict: "ask" is not one of allow, deny, require_approval`, "FAIL " + filepath.Join(dir, "missing.json") + ": cannot read the file"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("policy test output %q lacks %q", r.stdout, want)
		}
	}
	if r.code != 1 {
		t.Errorf("policy test with failures exits %d, want 1", r.code)
	}
	r = fluidbox(context.Background(), nil, "", "policy", "test", "--json", bad)
	var out struct {
		Results []struct {
			File     string
			Failures []struct{ Index int }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Results) != 1 || len(out.Results[0].Failures) != 1 || r.code != 1 {
		t.Errorf("policy test --json = %+v (%v)", r, err)
	}
}

// TestPolicyImportClaude: a settings file becomes a document the control
// plane accepts; untranslated rules are listed on stderr.
func TestPolicyImportClaude(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(file, []byte(`{"permissions":{"allow":["Bash(git diff:*)","Read(./src/**)"],"deny":["Bash(git push:*)"],"ask":["Read(~/.aws/**)"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := fluidbox(ctx, s.env(), "", "policy", "import-claude", file, "--default", "deny")
	if r.code != 0 || !strings.Contains(r.stderr, "not translated (ask): Read(~/.aws/**)") {
		t.Fatalf("import-claude = %+v, want the home-directory rule listed", r)
	}
	var created struct {
		ID       string
		Document struct{ Rules []struct{ ID, Tool string } }
	}
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(r.stdout), &created); err != nil || len(created.Document.Rules) != 5 {
		t.Fatalf("the imported document = %v (%+v), want it accepted with 5 rules (Bash deny, Bash allow, Read/Glob/Grep allow)", err, created)
	}
	var ev evaluation.View
	if err := s.admin.Do(ctx, "POST", "/v1/policies/"+created.ID+"/evaluate", map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "git diff HEAD"}}, &ev); err != nil || ev.Decision != policy.VerdictAllow {
		t.Errorf("git diff under the imported policy = %+v (%v), want allow", ev, err)
	}
	if r := fluidbox(ctx, s.env(), "", "policy", "import-claude", file, "--default", "ask"); r.code != 2 || !strings.Contains(r.stderr, `"ask" is not one of allow, deny, require_approval`) {
		t.Errorf("import-claude --default ask = %+v, want refused with the valid verdicts", r)
	}
	if !strings.Contains(r.stderr, "changed (allow): Bash(git diff:*), rule allow-bash-1: narrowed") {
		t.Errorf("import-claude stderr = %q, want the narrowed Bash rule reported", r.stderr)
	}

	// -o FILE.yaml writes YAML that reads back as the same document, and
	// --bash-options any keeps Claude Code's meaning (and says so).
	out := filepath.Join(t.TempDir(), "imported.yaml")
	r = fluidbox(ctx, nil, "", "policy", "import-claude", "--bash-options", "any", "-o", out, "--default", "deny", file)
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "wrote "+out) || !strings.Contains(r.stderr, `imported with "options": "any"`) {
		t.Fatalf("import-claude -o %s = %+v", out, r)
	}
	y, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(y), "name: imported-from-claude-code\n") || strings.Contains(string(y), "{") {
		t.Fatalf("%s = %q (%v), want block YAML", out, y, err)
	}
	if r := fluidbox(ctx, nil, "", "policy", "eval", "-f", out, "--command", "git diff --output=x"); r.code != 0 || !strings.HasPrefix(r.stdout, "ALLOW") {
		t.Errorf("git diff --output=x under the --bash-options any import = %+v, want allow (Claude Code's meaning)", r)
	}
	if r := fluidbox(ctx, nil, "", "policy", "import-claude", "--bash-options", "all", file); r.code != 2 {
		t.Errorf("--bash-options all = %+v, want 2", r)
	}
}

// TestPolicyShadow: `fluidbox policy shadow` follows every page of a
// shadow policy's summary and adds them up, as text or --json.
func TestPolicyShadow(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	var pol, shadow struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}
	tight := `{"name":"tight","default_verdict":"deny","rules":[{"id":"status-asks","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"require_approval"}]}`
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(tight), &shadow); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var ses struct{ ID, Token string }
		body := map[string]any{"policy_id": pol.ID, "shadow_policy_id": shadow.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 5}}
		if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
			t.Fatal(err)
		}
		runner, err := client.New(s.url, ses.Token)
		if err != nil {
			t.Fatal(err)
		}
		for j := range i + 1 {
			a, err := runner.Permission(ctx, ses.ID, client.PermissionRequest{ToolCallID: fmt.Sprint("c", j), ToolName: "Bash", Input: json.RawMessage(`{"command":"git status"}`)}, 0)
			if err != nil || a.Decision != vocab.Allow {
				t.Fatalf("ask: %+v, %v", a, err)
			}
		}
	}
	r := fluidbox(ctx, s.env(), "", "policy", "shadow", shadow.ID, "--limit", "1", "--since", "1h")
	for _, want := range []string{"3 runs, 3 with a difference, 6 calls decided differently", "allow (git-read)", "require_approval (status-asks)"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("policy shadow = %+v, want %q in the output", r, want)
		}
	}
	if !strings.Contains(r.stderr, "page 2") {
		t.Errorf("policy shadow --limit 1 read one page only? stderr %q", r.stderr)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "shadow", shadow.ID, "--json")
	var sum client.ShadowSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || r.code != 0 || sum.Runs != 3 || sum.Differences != 6 || len(sum.ByDifference) != 1 || sum.ByDifference[0].Runs != 3 {
		t.Errorf("policy shadow --json = %+v (%v): %+v", r, err, sum)
	}
	for _, bad := range [][]string{
		{"policy", "shadow"},
		{"policy", "shadow", "pol_nope"},
		{"policy", "shadow", shadow.ID, "--since", "yesterday"},
	} {
		if r := fluidbox(ctx, s.env(), "", bad...); r.code == 0 || r.stderr == "" {
			t.Errorf("fluidbox %v = %+v, want a failure with a message", bad, r)
		}
	}
}

// TestPolicyStore: `policy create`, `update`, `get` and `list` store and
// show policies from JSON or YAML files (or stdin); a document that is
// invalid or fails its own tests is refused before anything is sent.
func TestPolicyStore(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	yamlDoc := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(yamlDoc, []byte("name: store\ndefault_verdict: deny\nrules:\n  - {id: reads, tool: Read, verdict: allow}\ntests:\n  - {tool_name: Read, input: {file_path: /w/a}, expect: allow}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := fluidbox(ctx, s.env(), "", "policy", "create", "-f", yamlDoc, "--json")
	var created storedPolicy
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || r.code != 0 || created.ID == "" || created.Version != 1 || created.Name != "store" {
		t.Fatalf("policy create -f YAML --json = %+v (%v), want version 1 of %q", r, err, "store")
	}
	r = fluidbox(ctx, s.env(), testPolicy, "policy", "update", created.ID, "-f", "-")
	if r.code != 0 || !strings.Contains(r.stdout, created.ID+" v2") || !strings.Contains(r.stdout, "name     cli") {
		t.Errorf("policy update -f - = %+v, want version 2 named cli", r)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "get", created.ID)
	if r.code != 0 || !strings.Contains(r.stdout, created.ID+" v2") || !strings.Contains(r.stdout, `"id": "no-push"`) {
		t.Errorf("policy get = %+v, want version 2 and its document", r)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "get", created.ID, "--version", "1", "--json")
	var v1 storedPolicy
	if err := json.Unmarshal([]byte(r.stdout), &v1); err != nil || r.code != 0 || v1.Version != 1 || v1.Digest != created.Digest {
		t.Errorf("policy get --version 1 --json = %+v (%v), want version 1 as created", r, err)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "POLICY") || !strings.Contains(r.stdout, created.ID) {
		t.Errorf("policy list = %+v, want a table holding %s", r, created.ID)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "list", "--limit", "1", "--all", "--json")
	var page struct {
		Policies []storedPolicy `json:"policies"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || r.code != 0 || len(page.Policies) == 0 || page.Policies[0].ID != created.ID || page.Policies[0].Version != 2 {
		t.Errorf("policy list --all --json = %+v (%v), want the policy at version 2", r, err)
	}

	// A document the server warns about is stored and its warnings shown,
	// as lines, in text and in JSON.
	r = fluidbox(ctx, s.env(), "name: w\ndefault_verdict: allow\n", "policy", "create", "-f", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "warning: ") {
		t.Errorf("policy create of a document drawing a warning = %+v, want it stored and the warning shown", r)
	}
	r = fluidbox(ctx, s.env(), "name: w\ndefault_verdict: allow\n", "policy", "create", "-f", "-", "--json")
	var warned struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &warned); err != nil || r.code != 0 || len(warned.Warnings) == 0 {
		t.Errorf("policy create --json of a document drawing a warning = %+v (%v), want warnings as strings", r, err)
	}

	failing := filepath.Join(dir, "failing.json")
	if err := os.WriteFile(failing, []byte(`{"name":"f","default_verdict":"deny","rules":[{"id":"r","tool":"Read","verdict":"allow"}],"tests":[{"tool_name":"Read","input":{"file_path":"/a"},"expect":"deny"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "create"}, "-f FILE is required"},
		{[]string{"policy", "create", "-f", failing}, "1 of 1 tests failed (nothing sent)"},
		{[]string{"policy", "create", "-f", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{"policy", "update", "-f", yamlDoc}, "usage: fluidbox policy update"},
		{[]string{"policy", "update", "pol_nope", "-f", yamlDoc}, "404"},
		{[]string{"policy", "get"}, "usage: fluidbox policy get"},
		{[]string{"policy", "list", "--since", "yesterday"}, "neither an RFC 3339 time"},
	} {
		if r := fluidbox(ctx, s.env(), "", bad.args...); r.code == 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("fluidbox %v = %+v, want a failure saying %q", bad.args, r, bad.want)
		}
	}
	if r := fluidbox(ctx, s.env(), "{", "policy", "create", "-f", "-"); r.code != 1 || !strings.Contains(r.stderr, "-:") {
		t.Errorf("policy create of a broken document = %+v, want the file named in a failure", r)
	}
}

// TestPolicyEvalOfflineMatchesAPI: `policy eval -f FILE` decides offline
// exactly as POST /v1/policies/{id}/evaluate decides with the same
// document stored: the whole answer (decision, source, rule, reason,
// stages, Bash trace, digest) is equal, over the example policies, every
// line of the Bash corpus and calls of the file tools, in both tiers.
func TestPolicyEvalOfflineMatchesAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	files, err := filepath.Glob("../../docs/policies/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("example policies: %v %v", files, err)
	}
	corpus, err := os.ReadFile("../../shared/policy/testdata/bash_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(corpus)), "\n") {
		var l struct{ Cmd string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, []string{"--command", l.Cmd})
	}
	ws := t.TempDir()
	for _, f := range []string{"main.go", "app/.env"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The path context the hook sends: a kind, a Glob's walked tree.
	calls = append(calls,
		[]string{"--tool", "Grep", "--input", `{"pattern":"KEY","path":"/work/app/main.go"}`, "--kind", "path=file", "--workspace", "/work/app", "--cwd", "/work/app"},
		[]string{"--tool", "Glob", "--input", `{"pattern":"**/*"}`, "--walk", "--workspace", ws, "--cwd", ws},
		[]string{"--tool", "Glob", "--input", `{"pattern":"**/*","path":"app"}`, "--walk", "--cwd", ws},
		[]string{"--tool", "Glob", "--input", `{"pattern":"**/*.go"}`, "--walk", "--workspace", ws, "--cwd", ws},
	)
	for _, c := range []struct{ tool, input string }{
		{"Read", `{"file_path":"/work/app/.env"}`}, {"Read", `{"file_path":"/work/app/src/main.go"}`},
		{"Write", `{"file_path":"/work/app/src/x.go","content":"x"}`}, {"Write", `{"file_path":"/etc/passwd","content":"x"}`},
		{"Edit", `{"file_path":"/work/app/.git/config","old_string":"a","new_string":"b"}`},
		{"Grep", `{"pattern":"KEY","path":"/work/app"}`}, {"Glob", `{"pattern":"**/*.pem"}`},
		{"WebFetch", `{"url":"https://example.com","prompt":"x"}`}, {"Read", `{"path":"x"}`},
	} {
		calls = append(calls, []string{"--tool", c.tool, "--input", c.input, "--workspace", "/work/app", "--cwd", "/work/app"})
	}
	calls = append(calls, []string{"--tool", "mcp__jira__search", "--input", `{}`})
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var pol struct{ ID string }
		doc, err := readPolicyFile(file, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.admin.Do(ctx, "POST", "/v1/policies", doc, &pol); err != nil {
			t.Fatalf("%s: %v (%s)", file, err, data)
		}
		for _, call := range calls {
			for _, tier := range []string{"trusted", "read_only"} {
				args := append(append([]string{}, call...), "--tier", tier, "--json")
				api := fluidbox(ctx, s.env(), "", append([]string{"policy", "eval", pol.ID}, args...)...)
				offline := fluidbox(ctx, nil, "", append([]string{"policy", "eval", "-f", file}, args...)...)
				var a, o map[string]any
				if err := json.Unmarshal([]byte(api.stdout), &a); err != nil || api.code != 0 {
					t.Fatalf("%s %q through the API = %+v", file, args, api)
				}
				if err := json.Unmarshal([]byte(offline.stdout), &o); err != nil || offline.code != 0 {
					t.Fatalf("%s %q offline = %+v", file, args, offline)
				}
				if a["policy_id"] != pol.ID || o["policy_id"] != "" {
					t.Errorf("%s %q: policy_id %v through the API, %v offline", file, args, a["policy_id"], o["policy_id"])
				}
				delete(a, "policy_id")
				delete(a, "policy_version")
				delete(o, "policy_id")
				delete(o, "policy_version")
				if diff := cmp.Diff(a, o); diff != "" {
					t.Errorf("%s %q: offline differs from the API (-api +offline):\n%s", file, args, diff)
				}
			}
		}
	}
}

// Offline, a tool named as a connection's, with a class, is judged as the
// brokered tool it would be in a run (a file knows no connections, and a
// run gets such a name only from a connection): a read_only run may not
// call it.
func TestPolicyEvalOfflineBrokered(t *testing.T) {
	t.Parallel()
	r := fluidbox(context.Background(), nil, "", "policy", "eval", "-f", "../../docs/policies/tripwire.json", "--tool", "mcp__jira__search", "--input", "{}", "--class", "read", "--tier", "read_only")
	if r.code != 0 || !strings.Contains(r.stdout, "DENY") || !strings.Contains(r.stdout, "brokered through a connection") || !strings.Contains(r.stdout, "policy file, offline") {
		t.Errorf("policy eval -f of a connection's tool in read_only = %+v, want a trust_tier deny", r)
	}
	for _, bad := range [][]string{
		{"policy", "eval", "-f", "../../docs/policies/tripwire.json", "pol_x", "--command", "ls"},
		{"policy", "eval", "-f", "../../docs/policies/tripwire.json", "--version", "2", "--command", "ls"},
		{"policy", "eval", "-f", "../../docs/policies/tripwire.json", "--command", "ls", "--tier", "root"},
		{"policy", "eval", "-f", "../../docs/policies/tripwire.json", "--command", "ls", "--cwd", "rel/dir"},
	} {
		if r := fluidbox(context.Background(), nil, "", bad...); r.code != 2 {
			t.Errorf("%q = %+v, want 2 (usage)", bad, r)
		}
	}
	if r := fluidbox(context.Background(), nil, "", "policy", "eval", "-f", "no-such-file.yaml", "--command", "ls"); r.code != 1 {
		t.Errorf("policy eval -f of a missing file = %+v, want 1", r)
	}
}

// TestPolicyFmt: fmt rewrites a document's layout and nothing else
// (comments and key order kept, the same digest); --check writes nothing,
// lists what is not canonical and exits 1; the example policies are
// canonical already.
func TestPolicyFmt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	examples, _ := filepath.Glob("../../docs/policies/*")
	if r := fluidbox(ctx, nil, "", append([]string{"policy", "fmt", "--check"}, examples...)...); r.code != 0 || r.stdout != "" {
		t.Errorf("policy fmt --check of the examples = %+v, want them canonical", r)
	}
	dir := t.TempDir()
	messy := filepath.Join(dir, "p.yaml")
	const before = "# who may do what\nname: messy\ndefault_verdict: deny\nrules:\n-   id: r   # read anything\n    tool: Read\n    verdict:    allow\n"
	const after = "# who may do what\nname: messy\ndefault_verdict: deny\nrules:\n  - id: r # read anything\n    tool: Read\n    verdict: allow\n"
	compact := filepath.Join(dir, "p.json")
	if err := os.WriteFile(messy, []byte(before), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(compact, []byte(`{"name":"c","default_verdict":"deny","rules":[{"tool":"Read","id":"r","verdict":"allow"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := fluidbox(ctx, nil, "", "policy", "fmt", "--check", messy, compact); r.code != 1 || r.stdout != messy+"\n"+compact+"\n" {
		t.Errorf("policy fmt --check = %+v, want both files listed and exit 1", r)
	}
	if b, _ := os.ReadFile(messy); string(b) != before {
		t.Errorf("--check wrote the file: %q", b)
	}
	if r := fluidbox(ctx, nil, "", "policy", "fmt", messy, compact); r.code != 0 {
		t.Fatalf("policy fmt = %+v", r)
	}
	if b, _ := os.ReadFile(messy); string(b) != after {
		t.Errorf("policy fmt wrote %q, want %q", b, after)
	}
	if info, _ := os.Stat(messy); info.Mode().Perm() != 0o640 {
		t.Errorf("policy fmt changed the mode to %v", info.Mode())
	}
	want := "{\n  \"name\": \"c\",\n  \"default_verdict\": \"deny\",\n  \"rules\": [\n    {\n      \"tool\": \"Read\",\n      \"id\": \"r\",\n      \"verdict\": \"allow\"\n    }\n  ]\n}\n"
	if b, _ := os.ReadFile(compact); string(b) != want {
		t.Errorf("policy fmt wrote %q, want %q", b, want)
	}
	if r := fluidbox(ctx, nil, "", "policy", "fmt", "--check", messy, compact); r.code != 0 {
		t.Errorf("policy fmt --check after fmt = %+v, want 0", r)
	}
	if r := fluidbox(ctx, nil, before, "policy", "fmt", "-"); r.code != 0 || r.stdout != after {
		t.Errorf("policy fmt - = %+v, want the canonical document on stdout", r)
	}
	if r := fluidbox(ctx, nil, "name: x\ndefault_verdict: maybe\n", "policy", "fmt", "-"); r.code != 1 || !strings.Contains(r.stderr, "default_verdict") {
		t.Errorf("policy fmt of an invalid document = %+v, want 1 naming the field", r)
	}
	if r := fluidbox(ctx, nil, "", "policy", "fmt"); r.code != 2 {
		t.Errorf("policy fmt with no file = %+v, want 2", r)
	}
}

// TestPolicyEvalPathContext: policy eval sends what the hook sends and
// shows what the gate answers: a Grep of the root runs narrowed (the
// input it runs with is printed), the same Grep of a file (--kind
// path=file) runs as asked, and a Glob with --walk is allowed in a tree
// holding no .env and denied, naming the rule and the glob, in one that
// does.
func TestPolicyEvalPathContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	doc := filepath.Join(dir, "p.json")
	if err := os.WriteFile(doc, []byte(`{"name":"secrets","default_verdict":"deny","rules":[
	 {"id":"env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
	 {"id":"env-glob","tool":"Glob","match":{"path":["**/.env"]},"verdict":"deny"},
	 {"id":"search","tool":"{Grep,Glob}","match":{"path":["**"]},"verdict":"allow"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	for _, f := range []string{"main.go", "secret/.env"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"--tool", "Grep", "--input", `{"pattern":"KEY"}`}, []string{"ALLOW", "runs with (narrowed):", `!**/.[eE][nN][vV]`}, ""},
		{[]string{"--tool", "Grep", "--input", `{"pattern":"KEY","path":"main.go"}`, "--kind", "path=file"}, []string{"ALLOW"}, "narrowed"},
		{[]string{"--tool", "Glob", "--input", `{"pattern":"**/*","path":"secret"}`, "--walk"}, []string{"DENY", `rule "env-glob"`, `"**/.env"`, "reports 1 existing path"}, ""},
		{[]string{"--tool", "Glob", "--input", `{"pattern":"**/*.go"}`, "--walk"}, []string{"ALLOW"}, ""},
		{[]string{"--tool", "Glob", "--input", `{"pattern":"**/*"}`}, []string{"DENY", "without a report"}, ""},
	} {
		args := append([]string{"policy", "eval", "-f", doc, "--workspace", ws, "--cwd", ws}, c.args...)
		r := fluidbox(ctx, nil, "", args...)
		for _, w := range c.want {
			if r.code != 0 || !strings.Contains(r.stdout, w) {
				t.Errorf("%q = %+v, want %q in the output", c.args, r, w)
			}
		}
		if c.not != "" && strings.Contains(r.stdout, c.not) {
			t.Errorf("%q = %q, want no %q", c.args, r.stdout, c.not)
		}
	}
	for _, bad := range [][]string{
		{"--tool", "Grep", "--input", `{"pattern":"KEY"}`, "--kind", "path"},
		{"--tool", "Grep", "--input", `{"pattern":"KEY"}`, "--kind", "path=socket"},
		{"--tool", "Grep", "--input", `{"pattern":"KEY"}`, "--walk"},
	} {
		if r := fluidbox(ctx, nil, "", append([]string{"policy", "eval", "-f", doc, "--cwd", ws}, bad...)...); r.code != 2 {
			t.Errorf("%q = %+v, want 2 (usage)", bad, r)
		}
	}
}
