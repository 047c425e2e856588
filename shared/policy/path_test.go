package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// pathPolicy is the issue's: deny **/.env anywhere, allow the workspace.
const pathPolicy = `{"name":"paths","default_verdict":"deny","rules":[
  {"id":"env-read","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
  {"id":"env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
  {"id":"env-glob","tool":"Glob","match":{"path":["**/.env"]},"verdict":"deny"},
  {"id":"env-write","tool":"Write","match":{"path":["**/.env"]},"verdict":"deny"},
  {"id":"env-edit","tool":"Edit","match":{"path":["**/.env"]},"verdict":"deny"},
  {"id":"env-nb","tool":"NotebookEdit","match":{"path":["**/.env"]},"verdict":"deny"},
  {"id":"read","tool":"Read","match":{"path":["/work/**"]},"verdict":"allow"},
  {"id":"grep","tool":"Grep","match":{"path":["/work/**"]},"verdict":"allow"},
  {"id":"glob","tool":"Glob","match":{"path":["/work/**"]},"verdict":"allow"},
  {"id":"edit","tool":"Edit","match":{"path":["/work/**"]},"verdict":"allow"},
  {"id":"nb","tool":"NotebookEdit","match":{"path":["/work/**"]},"verdict":"allow"}]}`

func TestPathFieldsOfEveryFileTool(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pathPolicy)
	tests := []struct {
		tool  string
		input map[string]any
		want  Verdict
		rule  string
	}{
		{"Read", map[string]any{"file_path": "/work/a.go"}, VerdictAllow, "read"},
		{"Read", map[string]any{"file_path": "/work/.env"}, VerdictDeny, "env-read"},
		// The same file on a case-insensitive file system.
		{"Read", map[string]any{"file_path": "/work/.ENV"}, VerdictDeny, "env-read"},
		{"Read", map[string]any{"file_path": "/work//sub/./.Env/"}, VerdictDeny, "env-read"},
		{"Write", map[string]any{"file_path": "/work/x/.eNv"}, VerdictDeny, "env-write"},
		{"Edit", map[string]any{"file_path": "/WORK/.env"}, VerdictDeny, "env-edit"},
		{"NotebookEdit", map[string]any{"notebook_path": "/work/.env"}, VerdictDeny, "env-nb"},
		// Grep's glob reads the files it names.
		{"Grep", map[string]any{"pattern": "x", "path": "/work", "glob": ".env", "output_mode": "content"}, VerdictDeny, "env-grep"},
		// A glob that may reach a .env is narrowed: allowed, with the
		// .env files left out (TestSearchesReachingADeniedTree).
		{"Grep", map[string]any{"pattern": "x", "path": "/work", "glob": "*.env"}, VerdictAllow, "grep"},
		{"Grep", map[string]any{"pattern": "x", "path": "/work", "glob": ".E*"}, VerdictAllow, "grep"},
		{"Grep", map[string]any{"pattern": "x", "path": "/work/src", "glob": "*.go"}, VerdictAllow, "grep"},
		// A pattern that could name a .env is denied by the .env rule.
		{"Grep", map[string]any{"pattern": "x", "path": "/work", "glob": "../etc/*"}, VerdictDeny, "env-grep"},
		{"Grep", map[string]any{"pattern": "x", "path": "/work", "glob": "../etc/*.conf"}, VerdictDeny, ""},
		// Grep without a glob reads every file under /etc, /etc/.env too.
		{"Grep", map[string]any{"pattern": "x", "path": "/etc"}, VerdictDeny, "env-grep"},
		// Glob's pattern.
		{"Glob", map[string]any{"pattern": "**/.env", "path": "/work"}, VerdictDeny, "env-glob"},
		{"Glob", map[string]any{"pattern": "**/*.go", "path": "/work"}, VerdictAllow, "glob"},
		{"Glob", map[string]any{"pattern": "/etc/**"}, VerdictDeny, "env-glob"},
		{"Glob", map[string]any{"pattern": "/etc/*.conf"}, VerdictDeny, ""},
		{"Glob", map[string]any{"pattern": "/work/../etc/*.conf"}, VerdictDeny, ""},
		{"Glob", map[string]any{"pattern": "**/*.go"}, VerdictDeny, ""}, // searches an unknown directory
	}
	for _, tt := range tests {
		got := p.Evaluate(tt.tool, tt.input)
		if got.Verdict != tt.want || got.RuleID != tt.rule {
			t.Errorf("Evaluate(%q, %v) = %v %q (%s), want %v %q", tt.tool, tt.input, got.Verdict, got.RuleID, got.Reason, tt.want, tt.rule)
		}
	}
}

func TestResolvedPath(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pathPolicy)
	read := map[string]any{"file_path": "/work/notes.txt"}
	tests := []struct {
		resolved string
		want     Verdict
		rule     string
	}{
		{"", VerdictAllow, "read"},
		{"/work/notes.txt", VerdictAllow, "read"},
		// A symlink committed in a fork's pull request: notes.txt -> ../.env.
		{"/.env", VerdictDeny, "env-read"},
		{"/work/.env", VerdictDeny, "env-read"},
		// Out of the workspace: the given path alone is not enough.
		{"/etc/passwd", VerdictDeny, ""},
	}
	for _, tt := range tests {
		env := Env{}
		if tt.resolved != "" {
			env.Resolved = map[string]string{"file_path": tt.resolved}
		}
		got := p.EvaluateIn(env, "Read", read)
		if got.Verdict != tt.want || got.RuleID != tt.rule {
			t.Errorf("resolved %q: %v %q (%s), want %v %q", tt.resolved, got.Verdict, got.RuleID, got.Reason, tt.want, tt.rule)
		}
	}
}

func TestWorkspaceResolvesRelativeGlobs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"ws","default_verdict":"deny","rules":[
	  {"id":"src","tool":"Write","match":{"path":["src/**"]},"verdict":"allow"},
	  {"id":"secrets","tool":"Read","match":{"path":["secrets/**"]},"verdict":"deny"},
	  {"id":"read","tool":"Read","match":{"path":["**"]},"verdict":"allow"}]}`)
	// Only src/** goes unmatched without a workspace: a deny reads
	// secrets/** at any depth, and ** matches every path.
	if got := p.RelativeGlobs(); len(got) != 1 || !strings.Contains(got[0], `"src/**"`) {
		t.Errorf("RelativeGlobs() = %q, want only rules[0]'s src/**", got)
	}
	ws := Env{Workspace: "/work/app"}
	tests := []struct {
		env   Env
		tool  string
		input map[string]any
		want  Verdict
	}{
		{ws, "Write", map[string]any{"file_path": "/work/app/src/a.go"}, VerdictAllow},
		{ws, "Write", map[string]any{"file_path": "/work/app/src/../../x/src/a.go"}, VerdictDeny},
		{ws, "Write", map[string]any{"file_path": "/work/other/src/a.go"}, VerdictDeny},
		{ws, "Write", map[string]any{"file_path": "src/a.go"}, VerdictAllow},
		{Env{Workspace: "/work/app", Cwd: "/work/app/sub"}, "Write", map[string]any{"file_path": "../src/a.go"}, VerdictAllow},
		{Env{Workspace: "/work/app", Cwd: "/tmp"}, "Write", map[string]any{"file_path": "src/a.go"}, VerdictDeny},
		// Without a workspace an absolute path never matches a relative glob.
		{Env{}, "Write", map[string]any{"file_path": "/work/app/src/a.go"}, VerdictDeny},
		{ws, "Read", map[string]any{"file_path": "/work/app/SECRETS/k"}, VerdictDeny},
		{ws, "Read", map[string]any{"file_path": "/work/app/README"}, VerdictAllow},
	}
	for _, tt := range tests {
		got := p.EvaluateIn(tt.env, tt.tool, tt.input)
		if got.Verdict != tt.want {
			t.Errorf("EvaluateIn(%+v, %q, %v) = %v (%s), want %v", tt.env, tt.tool, tt.input, got.Verdict, got.Reason, tt.want)
		}
	}
}

// FuzzPathRules checks that path decisions depend on the file a path names,
// not on its spelling: "//", "/./", a trailing slash and (for deny) letter
// case never change them, and ".." is read as the kernel reads it; and
// that a resolved path is allowed only when both are, denied when either is.
func FuzzPathRules(f *testing.F) {
	for _, s := range []string{"/work/.env", "/work/a/b.go", "/etc/passwd", "/work/../etc/x", "/work/.ENV", "/w/x/..", "/work/src/"} {
		f.Add(s, "/work/x")
	}
	p := mustParse(f, pathPolicy)
	read := func(file string, resolved string) Result {
		env := Env{}
		if resolved != "" {
			env.Resolved = map[string]string{"file_path": resolved}
		}
		return p.EvaluateIn(env, "Read", map[string]any{"file_path": file})
	}
	fuzzPath := func(s string) bool { return strings.HasPrefix(s, "/") && strings.IndexByte(s, 0) < 0 && len(s) <= 256 }
	f.Fuzz(func(t *testing.T, file, resolved string) {
		if !fuzzPath(file) {
			return
		}
		base := read(file, "")
		checkSpellings(t, read, file, base)
		if fuzzPath(resolved) {
			checkResolved(t, read, file, resolved, base)
		}
	})
}

// checkSpellings: the same path spelt another way (cleaned, doubled or
// trailing slashes, ./) is decided alike, and a deny by a rule holds in
// any case.
func checkSpellings(t *testing.T, read func(string, string) Result, file string, base Result) {
	t.Helper()
	for _, v := range []string{path.Clean(file), strings.ReplaceAll(file, "/", "//"), file + "/", strings.Replace(file, "/", "/./", 1)} {
		if got := read(v, ""); got.Verdict != base.Verdict {
			t.Fatalf("Read %q = %v but %q = %v", file, base.Verdict, v, got.Verdict)
		}
	}
	if base.Verdict != VerdictDeny || base.RuleID == "" {
		return
	}
	for _, v := range []string{strings.ToUpper(file), strings.ToLower(file)} {
		if got := read(v, ""); got.Verdict != VerdictDeny || got.RuleID == "" {
			t.Fatalf("Read %q denied by %q but %q = %v", file, base.RuleID, v, got.Verdict)
		}
	}
}

// checkResolved: a path and where the sandbox resolved it are denied if
// either is denied by a rule, allowed only if both are.
func checkResolved(t *testing.T, read func(string, string) Result, file, resolved string, base Result) {
	t.Helper()
	other, both := read(resolved, ""), read(file, resolved)
	switch {
	case base.Verdict == VerdictDeny && base.RuleID != "" || other.Verdict == VerdictDeny && other.RuleID != "":
		if both.Verdict != VerdictDeny || both.RuleID == "" {
			t.Fatalf("Read %q resolved to %q = %v, want denied by a rule", file, resolved, both.Verdict)
		}
	case base.Verdict == VerdictAllow && other.Verdict == VerdictAllow:
		if both.Verdict != VerdictAllow {
			t.Fatalf("Read %q resolved to %q = %v (%s), want allow", file, resolved, both.Verdict, both.Reason)
		}
	default:
		if both.Verdict == VerdictAllow {
			t.Fatalf("Read %q resolved to %q allowed, but %q alone = %v and %q alone = %v", file, resolved, file, base.Verdict, resolved, other.Verdict)
		}
	}
}

// TestPathSpellingsTheToolReadsDifferently: Claude Code trims a path and
// expands a leading ~ to the home directory; a Windows harness reads '\' as
// a separator; a case-insensitive file system folds ſ to s. A path in any
// such spelling is never allowed (the analysis would judge another file
// than the one read), and a deny rule matches it under every reading.
func TestPathSpellingsTheToolReadsDifferently(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"r","default_verdict":"require_approval","rules":[
	 {"id":"read","tool":"Read","match":{"path":["/work/**"]},"verdict":"allow"},
	 {"id":"secrets","tool":"Read","match":{"path":["**/.env","/root/.ssh/**","/home/*/.ssh/**"]},"verdict":"deny"}]}`)
	tests := []struct {
		path, cwd string
		want      Verdict
	}{
		{"/work/app/main.go", "", VerdictAllow},
		{"main.go", "/work/app", VerdictAllow},
		// ~ is the home directory, wherever the working directory is.
		{"~/.ssh/id_rsa", "/work", VerdictDeny},
		{"~/notes.txt", "/work", VerdictRequireApproval},
		{"~root/.ssh/id_rsa", "/work", VerdictDeny},
		// A harness that expands variables reads $HOME as the home.
		{"$HOME/.ssh/id_rsa", "/work", VerdictDeny},
		{"${HOME}/notes.txt", "/work", VerdictRequireApproval},
		// A path Claude Code trims.
		{" /root/.ssh/id_rsa", "/work", VerdictDeny},
		{" /etc/passwd", "/work", VerdictRequireApproval},
		{"/etc/passwd\n", "/work", VerdictRequireApproval},
		// Windows separators.
		{`/work/app\.env`, "", VerdictDeny},
		{`C:\work\app\.env`, "", VerdictDeny},
		{`/work/app\x.go`, "", VerdictRequireApproval},
		// Case folding beyond ASCII.
		{"/home/u/.ſsh/id_rsa", "", VerdictDeny},
	}
	for _, tt := range tests {
		got := p.EvaluateIn(Env{Cwd: tt.cwd}, "Read", map[string]any{"file_path": tt.path})
		if got.Verdict != tt.want {
			t.Errorf("Read %q (cwd %q) = %v (%s), want %v", tt.path, tt.cwd, got.Verdict, got.Reason, tt.want)
		}
	}
}

// TestSearchesReachingADeniedTree: Grep reads every file under its path
// that its glob selects, Glob lists every name its pattern selects. A deny
// rule matches a search whenever some path it may reach matches the rule's
// glob, not only when the search's own text does; and a search that cannot
// reach the glob is not denied by it.
func TestSearchesReachingADeniedTree(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"r","default_verdict":"allow","rules":[
	 {"id":"ssh-grep","tool":"Grep","match":{"path":["/root/.ssh/**"]},"verdict":"deny"},
	 {"id":"ssh-glob","tool":"Glob","match":{"path":["/root/.ssh/**"]},"verdict":"deny"},
	 {"id":"env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"}]}`)
	// A Grep is narrowed rather than denied (narrow.go): allowed, with its
	// glob excluding what the rules match.
	const narrowed Verdict = "narrowed"
	tests := []struct {
		tool string
		in   map[string]any
		want Verdict
	}{
		{"Grep", map[string]any{"pattern": "KEY", "path": "/root"}, narrowed},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/"}, narrowed},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/root", "glob": "id_rsa"}, narrowed},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/root", "glob": "*"}, narrowed},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/work/app"}, narrowed}, // may hold a .env
		{"Grep", map[string]any{"pattern": "KEY", "path": "/root/.ssh"}, VerdictDeny},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/work", "glob": ".env"}, VerdictDeny},
		{"Glob", map[string]any{"pattern": "**/*", "path": "/root"}, VerdictDeny},
		{"Glob", map[string]any{"pattern": "*/*", "path": "/root"}, VerdictDeny},
		{"Glob", map[string]any{"pattern": "/root/.ss?/*"}, VerdictDeny},
		{"Glob", map[string]any{"pattern": "/root/.[s]sh/id_*"}, VerdictDeny},
		// Searches that cannot reach either glob.
		{"Grep", map[string]any{"pattern": "KEY", "path": "/work/src", "glob": "*.go"}, VerdictAllow},
		{"Glob", map[string]any{"pattern": "src/*.go", "path": "/root"}, VerdictAllow},
		{"Glob", map[string]any{"pattern": "/root/.cache/*"}, VerdictAllow},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/work/app/main.go"}, narrowed}, // could be a directory
	}
	for _, tt := range tests {
		got := p.Evaluate(tt.tool, tt.in)
		verdict := got.Verdict
		if verdict == VerdictAllow && got.UpdatedInput != nil {
			verdict = narrowed
		}
		if verdict != tt.want {
			t.Errorf("%s %v = %v %v (%s), want %v", tt.tool, tt.in, got.Verdict, got.UpdatedInput, got.Reason, tt.want)
		}
	}
}

// TestSearchGlobsThatWiden: rg reads a glob starting with '!' as "every file
// but these", and Claude Code may pass several globs in one field
// ("*.md .env", "*.md,.env"). A deny rule matches what any of them reaches.
func TestSearchGlobsThatWiden(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pathPolicy)
	for _, glob := range []string{"*.md .env", "*.md,.env", "*.{md,txt} .env"} {
		in := map[string]any{"pattern": "KEY", "path": "/work", "glob": glob}
		if got := p.Evaluate("Grep", in); got.Verdict != VerdictDeny || got.RuleID != "env-grep" {
			t.Errorf("Grep glob %q = %v %q (%s), want deny by env-grep", glob, got.Verdict, got.RuleID, got.Reason)
		}
	}
	// Every file but the .md ones: narrowed to leave the .env files out.
	in := map[string]any{"pattern": "KEY", "path": "/work", "glob": "!*.md"}
	if got := p.Evaluate("Grep", in); got.Verdict != VerdictAllow || got.UpdatedInput["glob"] != "!*.md !**/.[eE][nN][vV]" {
		t.Errorf("Grep glob !*.md = %v %v (%s), want allow narrowed", got.Verdict, got.UpdatedInput, got.Reason)
	}
	for _, glob := range []string{"*.go", "*.{go,md}"} {
		in := map[string]any{"pattern": "KEY", "path": "/work", "glob": glob}
		if got := p.Evaluate("Grep", in); got.Verdict != VerdictAllow {
			t.Errorf("Grep glob %q = %v (%s), want allow", glob, got.Verdict, got.Reason)
		}
	}
}

// TestRelativeGlobWarningsMatchBehaviour: a run without a workspace is
// warned about a relative path glob exactly when the glob, in its rule,
// does not decide an absolute path of its own shape: the warning and the
// evaluation agree. The globs are those of the repository's example
// policies, of policies imported from Claude Code settings, and of every
// verdict and shape below.
func TestRelativeGlobWarningsMatchBehaviour(t *testing.T) {
	t.Parallel()
	var docs []string
	files, _ := filepath.Glob("../../docs/policies/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	imported, _, err := FromClaudeSettings([]byte(`{"permissions":{
	  "allow":["Read(./src/**)","Edit(docs/**)","Read(**/*.md)","Read(//etc/hosts)"],
	  "deny":["Read(./.env)","Read(**/.env)","Edit(/.github/**)","Read(secrets/*.pem)"],
	  "ask":["Edit(src/*.go)"]}}`), ClaudeImport{Name: "imported", DefaultVerdict: VerdictRequireApproval})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(imported)
	docs = append(docs, string(b))
	var rules []string
	for i, g := range []string{"src/**", "**", "*.go", "**/*.pem", ".env", "a/b/c.txt", "secrets/[ab]*", "{lib,src}/**", "**/node_modules/**", "x?y"} {
		for _, v := range []Verdict{VerdictAllow, VerdictDeny, VerdictRequireApproval} {
			rules = append(rules, fmt.Sprintf(`{"id":"r%d-%s","tool":"Read","match":{"path":[%q]},"verdict":%q}`, i, v, g, v))
		}
	}
	for _, r := range rules {
		docs = append(docs, `{"name":"shape","default_verdict":"require_approval","rules":[`+r+`]}`)
	}
	checked := 0
	for _, d := range docs {
		p, _, err := policyyamlFree(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		warned := map[string]bool{}
		for _, w := range p.RelativeGlobs() {
			warned[w] = true
		}
		for _, r := range p.rules {
			for j, g := range r.paths {
				if !g.isRelative() {
					continue
				}
				// The rule alone, so that its verdict is what a match gives.
				alone := mustParse(t, fmt.Sprintf(`{"name":"alone","default_verdict":%q,"rules":[{"id":"r","tool":"Read","match":{"path":[%q]},"verdict":%q}]}`,
					otherVerdict(r.verdict), g.pattern, r.verdict))
				got := alone.EvaluateIn(Env{}, "Read", map[string]any{"file_path": "/work/" + samplePath(g.pattern)})
				decided := got.RuleID == "r"
				key := fmt.Sprintf("rules[%d].match.path[%d] (%q)", r.index, j, g.pattern)
				if warned[key] == decided {
					t.Errorf("%s %s glob %q: warned %v, but the rule decides /work/%s: %v (%s)", r.verdict, r.id, g.pattern, warned[key], samplePath(g.pattern), decided, got.Reason)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked %d relative globs, want the corpus's", checked)
	}
}

// otherVerdict is a default verdict unlike v, so a rule's own decision
// can be told from the default.
func otherVerdict(v Verdict) Verdict {
	if v == VerdictRequireApproval {
		return VerdictDeny
	}
	return VerdictRequireApproval
}

// policyyamlFree parses a document that may be YAML without importing
// policyyaml (which imports this package): the examples are JSON or a
// YAML subset sigs.k8s.io/yaml reads.
func policyyamlFree(doc string) (*Policy, []Warning, error) {
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, nil, err
	}
	return Parse(j)
}
