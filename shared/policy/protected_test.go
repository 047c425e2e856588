package policy

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// protectedPolicy is the issue's: writes allowed on the whole repository
// (and, more broadly, everywhere), git status and git diff allowed, cp and
// tee allowed with any options.
const protectedPolicy = `{"name":"repo","default_verdict":"deny","rules":[
  {"id":"repo-write","tool":"Write","match":{"path":["/work/**","/home/**","/etc/**"]},"verdict":"allow"},
  {"id":"repo-edit","tool":"Edit","match":{"path":["**"]},"verdict":"allow"},
  {"id":"repo-multi","tool":"MultiEdit","match":{"path":["/**"]},"verdict":"allow"},
  {"id":"repo-nb","tool":"NotebookEdit","match":{"path":["/work/**"]},"verdict":"allow"},
  {"id":"read","tool":"Read","match":{"path":["/**"]},"verdict":"allow"},
  {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status","git diff","cat"]},"verdict":"allow"},
  {"id":"copy","tool":"Bash","match":{"command_prefix":["cp","tee","sed"],"options":"any"},"verdict":"allow"}]}`

// Every entry of the list: a write to its example by every tool that
// writes is never allowed by a broad rule or by a default allow, and is
// allowed by a rule that names it; reading it stays allowed.
func TestProtectedPathEveryEntry(t *testing.T) {
	t.Parallel()
	broad := mustParse(t, protectedPolicy)
	lax := mustParse(t, `{"name":"lax","default_verdict":"allow","rules":[]}`)
	for _, e := range bash.ProtectedPaths() {
		named := mustParse(t, `{"name":"named","default_verdict":"deny","rules":[
		  {"id":"named","tool":"Write","match":{"path":[`+quoteJSON(e.Example)+`]},"verdict":"allow"}]}`)
		write := map[string]any{"file_path": e.Example, "content": "x"}
		for _, p := range []*Policy{broad, lax} {
			for _, tool := range []string{"Write", "Edit", "MultiEdit"} {
				if got := p.Evaluate(tool, write); got.Verdict == VerdictAllow || !strings.Contains(got.Reason, e.Glob) {
					t.Errorf("%s: %s %s = %v (%s), want a refusal naming %s", e.Glob, tool, e.Example, got.Verdict, got.Reason, e.Glob)
				}
			}
			for _, line := range []string{"echo x > " + e.Example, "cp /tmp/x " + e.Example, "tee -a " + e.Example, "sed -i s/a/b/ " + e.Example} {
				if got := p.Evaluate("Bash", bashInput(line)); got.Verdict == VerdictAllow {
					t.Errorf("%s: Bash %q = allow (%s)", e.Glob, line, got.Reason)
				}
				if ok, _ := BashReadOnly(bashInput(line)); ok {
					t.Errorf("%s: Bash %q is read-only, want execute", e.Glob, line)
				}
			}
		}
		if got := named.Evaluate("Write", write); got.Verdict != VerdictAllow {
			t.Errorf("%s: Write %s under a rule naming it = %v (%s), want allow", e.Glob, e.Example, got.Verdict, got.Reason)
		}
		if got := broad.Evaluate("Read", map[string]any{"file_path": e.Example}); got.Verdict != VerdictAllow {
			t.Errorf("%s: Read %s = %v (%s), want allow", e.Glob, e.Example, got.Verdict, got.Reason)
		}
	}
}

func quoteJSON(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// The class, not the example: other spellings and readings of a protected
// path, through every path field, are refused by the broad rules; ordinary
// writes and reads are not.
func TestProtectedPathReadings(t *testing.T) {
	t.Parallel()
	p := mustParse(t, protectedPolicy)
	repo := Env{Workspace: "/work/repo", Cwd: "/work/repo"}
	tests := []struct {
		name  string
		env   Env
		tool  string
		input map[string]any
		want  Verdict
	}{
		{"plain", repo, "Write", map[string]any{"file_path": "/work/repo/.git/config"}, VerdictDeny},
		{"hook", repo, "Write", map[string]any{"file_path": "/work/repo/.git/hooks/pre-commit"}, VerdictDeny},
		{"case folded", repo, "Write", map[string]any{"file_path": "/work/repo/.GIT/Config"}, VerdictDeny},
		{"trailing dot", repo, "Write", map[string]any{"file_path": "/work/repo/.git./config"}, VerdictDeny},
		{"trailing space", repo, "Write", map[string]any{"file_path": "/work/repo/.gitattributes "}, VerdictDeny},
		{"HFS+ ignorable", repo, "Write", map[string]any{"file_path": "/work/repo/.g\u200cit/config"}, VerdictDeny},
		{"8.3 short name", repo, "Write", map[string]any{"file_path": "/work/repo/GIT~1/config"}, VerdictDeny},
		{"dot dot", repo, "Write", map[string]any{"file_path": "/work/repo/src/../.git/config"}, VerdictDeny},
		{"relative", repo, "Write", map[string]any{"file_path": ".claude/settings.json"}, VerdictDeny},
		{"relative climbing", repo, "Write", map[string]any{"file_path": "../repo/.mcp.json"}, VerdictDeny},
		{"tilde", repo, "Write", map[string]any{"file_path": "~/.gitconfig"}, VerdictDeny},
		{"home variable", repo, "Write", map[string]any{"file_path": "$HOME/.bashrc"}, VerdictDeny},
		{"backslashes", repo, "Write", map[string]any{"file_path": `C:\work\repo\.git\config`}, VerdictDeny},
		{"worktree .git file", repo, "Write", map[string]any{"file_path": "/work/repo/wt/.git"}, VerdictDeny},
		{"submodule git dir", repo, "Write", map[string]any{"file_path": "/work/repo/.git/modules/m/config"}, VerdictDeny},
		{"notebook", repo, "NotebookEdit", map[string]any{"notebook_path": "/work/repo/.claude/x.ipynb"}, VerdictDeny},
		{"symlink resolved", Env{Workspace: "/work/repo", Cwd: "/work/repo", Resolved: map[string]string{"file_path": "/work/repo/.git/hooks/pre-commit"}},
			"Write", map[string]any{"file_path": "/work/repo/notes.txt"}, VerdictDeny},
		{"ordinary write", repo, "Write", map[string]any{"file_path": "/work/repo/src/main.go"}, VerdictAllow},
		{"gitignore is not code", repo, "Write", map[string]any{"file_path": "/work/repo/.gitignore"}, VerdictAllow},
		{"a name that only starts so", repo, "Write", map[string]any{"file_path": "/work/repo/.github/workflows/ci.yml"}, VerdictAllow},
		{"read", repo, "Read", map[string]any{"file_path": "/work/repo/.git/config"}, VerdictAllow},
	}
	for _, tt := range tests {
		got := p.EvaluateIn(tt.env, tt.tool, tt.input)
		if got.Verdict != tt.want {
			t.Errorf("%s: %s %v = %v (%s), want %v", tt.name, tt.tool, tt.input, got.Verdict, got.Reason, tt.want)
		}
	}
}

// Bash lines that may write a protected path are never allowed, by an
// allow rule or by the default; the ordinary ones still are.
func TestProtectedPathBash(t *testing.T) {
	t.Parallel()
	strict := mustParse(t, protectedPolicy)
	lax := mustParse(t, `{"name":"lax","default_verdict":"allow","rules":[]}`)
	repo := Env{Workspace: "/work/repo", Cwd: "/work/repo"}
	inGit := Env{Workspace: "/work/repo", Cwd: "/work/repo/.git"}
	refused := []struct {
		env  Env
		line string
	}{
		{repo, "cp /tmp/x .git/hooks/pre-commit"},
		{repo, "cp -t .git/hooks /tmp/pre-commit"},
		{repo, "cp --target-directory=.git/hooks /tmp/pre-commit"},
		{repo, "tee -a ~/.bashrc"},
		{repo, "sed -i 's/a/b/' .gitattributes"},
		{repo, "sed -i 's/a/b/' .git/*"},
		{repo, "cp /tmp/x .GIT/config"},
		{repo, "cp /tmp/x src/../.git/config"},
		{repo, "cp /tmp/x .claude/settings.json"},
		{repo, "cp /tmp/x .mcp.json"},
		{inGit, "cp /tmp/x config"},
		{inGit, "tee *"},
	}
	for _, tt := range refused {
		if got := strict.EvaluateIn(tt.env, "Bash", bashInput(tt.line)); got.Verdict == VerdictAllow {
			t.Errorf("allow rules: Bash %q = allow (%s)", tt.line, got.Reason)
		}
	}
	laxRefused := append(refused, []struct {
		env  Env
		line string
	}{
		{repo, "echo '[core] fsmonitor = x' > .git/config"},
		{repo, "echo x >> $HOME/.bashrc"},
		{repo, "printf x >& .npmrc"},
		{repo, "cd .git && echo x > config"},
		{repo, "cd ~/.config/git && echo x > config"},
		{repo, "bash -c 'echo x > .git/hooks/post-checkout'"},
		{repo, "echo $(echo x > .gitattributes)"},
		{repo, "dd if=/tmp/x of=.git/config"},
		{repo, "ln -s /tmp/x .git/hooks/pre-commit"},
		{repo, "curl -o .npmrc http://127.0.0.1/x"},
		{repo, "gunzip .bashrc.gz"},
		{repo, "tar xf /tmp/a.tar"},
		{repo, "unzip /tmp/a.zip"},
		{repo, "git config core.fsmonitor /tmp/x"},
		{repo, "npm config set script-shell /tmp/x"},
		{repo, "mkdir -p .claude/commands"},
		{inGit, "echo x > config"},
	}...)
	for _, tt := range laxRefused {
		if got := lax.EvaluateIn(tt.env, "Bash", bashInput(tt.line)); got.Verdict == VerdictAllow {
			t.Errorf("default allow: Bash %q = allow (%s)", tt.line, got.Reason)
		}
	}
	allowed := []string{"git status", "git diff .gitattributes", "cat .git/config", "cp a.txt b.txt", "tee out.log", "sed -i s/a/b/ src/main.go", "cp src/* /tmp/dst/", "tee src/*.log"}
	for _, line := range allowed {
		if got := strict.EvaluateIn(repo, "Bash", bashInput(line)); got.Verdict != VerdictAllow {
			t.Errorf("allow rules: Bash %q = %v (%s), want allow", line, got.Verdict, got.Reason)
		}
	}
	for _, line := range append(allowed, "echo x > out.txt", "cd build && make > log.txt", "git reset --hard HEAD", "git log HEAD~3", "tar czf /tmp/a.tgz src", "rsync -a src/ /tmp/dst/") {
		if got := lax.EvaluateIn(repo, "Bash", bashInput(line)); got.Verdict != VerdictAllow {
			t.Errorf("default allow: Bash %q = %v (%s), want allow", line, got.Verdict, got.Reason)
		}
	}
}

// A session grant never covers a write to a protected path: not when the
// path as given names one, not when the evaluation found one through the
// resolved path, though the same grant covers an ordinary write.
func TestProtectedPathNoGrant(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"ask","default_verdict":"deny","rules":[
	  {"id":"w","tool":"Write","match":{"path":["/work/**"]},"verdict":"require_approval","scope":"session"}]}`)
	ordinary := NewCall("Write", map[string]any{"file_path": "/work/repo/src/a.go"})
	res := p.EvaluateCall(Env{}, ordinary)
	first := p.AnswerGrants(Env{}, ordinary, res, NewGrants())
	if res.Verdict != VerdictRequireApproval || !first.Grantable || first.Ask.ScopeKey == "" {
		t.Fatalf("an ordinary write = %v, grant %+v; want an approval a session grant can answer", res.Verdict, first)
	}
	held := NewGrants(GrantKey{RuleID: first.Ask.RuleID, ScopeKey: first.Ask.ScopeKey})
	if got := p.AnswerGrants(Env{}, NewCall("Write", map[string]any{"file_path": "/work/repo/src/b.go"}), res, held); !got.Covered {
		t.Errorf("the grant does not cover another ordinary write: %+v", got)
	}
	for name, c := range map[string]struct {
		call *Call
		env  Env
	}{
		"as given":    {NewCall("Write", map[string]any{"file_path": "/work/repo/.git/config"}), Env{}},
		"as resolved": {NewCall("Write", map[string]any{"file_path": "/work/repo/notes.txt"}), Env{Resolved: map[string]string{"file_path": "/work/repo/.git/hooks/pre-commit"}}},
	} {
		r := p.EvaluateCall(c.env, c.call)
		if r.Verdict == VerdictAllow {
			t.Errorf("%s: a write to a protected path = allow (%s)", name, r.Reason)
		}
		if got := p.AnswerGrants(c.env, c.call, r, held); got.Covered || got.Grantable {
			t.Errorf("%s: a session grant answers a write to a protected path: %+v", name, got)
		}
	}
}
