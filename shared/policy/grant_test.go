package policy

import (
	"fmt"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// grantPolicy has, for each kind of tool, rules that ask with a session
// scope, a stricter rule that asks every time, and allow rules beside them.
const grantPolicy = `{"name":"grants","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[
  {"id":"push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session"},
  {"id":"push-force","tool":"Bash","match":{"command_prefix":["git push --force"]},"verdict":"require_approval","scope":"once"},
  {"id":"npm","tool":"Bash","match":{"command_prefix":["npm publish"]},"verdict":"require_approval","scope":"session"},
  {"id":"any-bash","tool":"Bash","match":{"input":{"/description":["*"]}},"verdict":"require_approval","scope":"session"},
  {"id":"read","tool":"Bash","match":{"command_prefix":["git status","ls"]},"verdict":"allow"},
  {"id":"rm","tool":"Bash","match":{"command_prefix":["rm -rf"]},"verdict":"deny"},
  {"id":"docs","tool":"Write","match":{"path":["docs/**"]},"verdict":"require_approval","scope":"session"},
  {"id":"docs-secret","tool":"Write","match":{"path":["docs/secret/**"]},"verdict":"require_approval","scope":"once"},
  {"id":"all-writes","tool":"Edit","verdict":"require_approval","scope":"session"},
  {"id":"jira","tool":"mcp__jira__*","verdict":"require_approval","scope":"session"}
]}`

func TestAnswerGrants(t *testing.T) {
	t.Parallel()
	p := mustParse(t, grantPolicy)
	env := Env{Workspace: "/ws", Cwd: "/ws"}
	g := func(rule, key string) GrantKey { return GrantKey{RuleID: rule, ScopeKey: key} }
	push := g("push", "Bash:git push")
	force := g("push-force", "Bash:git push --force")
	npm := g("npm", "Bash:npm publish")
	docs := g("docs", "Write:docs/**")
	tests := []struct {
		name      string
		tool      string
		input     map[string]any
		resolved  map[string]string
		held      []GrantKey
		covered   GrantKey // zero: not covered
		grantable bool
		askRule   string // the rule the unanswered call asks under
	}{
		{name: "prefix grant covers its rule's calls", tool: "Bash", input: bashInput("git push origin main"), held: []GrantKey{push},
			covered: push, grantable: true, askRule: "push"},
		{name: "same key under another rule is another grant", tool: "Bash", input: bashInput("git push origin main"), held: []GrantKey{g("npm", "Bash:git push"), g("", "Bash:git push")},
			grantable: true, askRule: "push"},
		{name: "a stricter once rule also matching needs its own grant", tool: "Bash", input: bashInput("git push --force origin"), held: []GrantKey{push},
			grantable: true, askRule: "push-force"},
		{name: "the stricter rule's own grant answers", tool: "Bash", input: bashInput("git push --force origin"), held: []GrantKey{push, force},
			covered: push, grantable: true, askRule: "push"},
		{name: "the stricter rule's grant answers alone", tool: "Bash", input: bashInput("git push --force origin"), held: []GrantKey{force},
			covered: force, grantable: true, askRule: "push"},
		{name: "each part needs a grant", tool: "Bash", input: bashInput("git push && npm publish"), held: []GrantKey{push},
			grantable: true, askRule: "npm"},
		{name: "every part under a granted prefix", tool: "Bash", input: bashInput("git push && npm publish"), held: []GrantKey{push, npm},
			covered: push, grantable: true, askRule: "push"},
		{name: "a part an allow rule allows", tool: "Bash", input: bashInput("git status && git push"), held: []GrantKey{push},
			covered: push, grantable: true, askRule: "push"},
		{name: "a catch-all session rule is not stricter", tool: "Bash", input: map[string]any{"command": "git push", "description": "push"}, held: []GrantKey{push},
			covered: push, grantable: true, askRule: "push"},
		{name: "a part no rule covers", tool: "Bash", input: bashInput("git push && curl x"), held: []GrantKey{push}, askRule: "push"},
		{name: "loose hit, strict miss", tool: "Bash", input: bashInput("git -C x push"), held: []GrantKey{push}, askRule: "push"},
		{name: "wrapper", tool: "Bash", input: bashInput("env git push"), held: []GrantKey{push}, askRule: "push"},
		{name: "assignment", tool: "Bash", input: bashInput("GIT_SSH_COMMAND=x git push"), held: []GrantKey{push}, askRule: "push"},
		{name: "substitution", tool: "Bash", input: bashInput("git push $(curl x)"), held: []GrantKey{push}, askRule: "push"},
		{name: "a denied part", tool: "Bash", input: bashInput("git push; rm -rf /"), held: []GrantKey{push}, askRule: ""},
		{name: "rule without a prefix gives no key", tool: "Bash", input: map[string]any{"command": "make", "description": "build"},
			held: []GrantKey{g("any-bash", "Bash:make"), g("any-bash", "Bash")}, askRule: "any-bash"},
		{name: "default verdict gives Bash no key", tool: "Bash", input: bashInput("rm a.txt"), held: []GrantKey{g("", "Bash:rm")}},
		{name: "path glob grant", tool: "Write", input: map[string]any{"file_path": "docs/a.md"}, held: []GrantKey{docs},
			covered: docs, grantable: true, askRule: "docs"},
		{name: "path glob grant, resolved outside", tool: "Write", input: map[string]any{"file_path": "docs/a.md"}, resolved: map[string]string{"file_path": "/ws/.env"},
			held: []GrantKey{docs}, askRule: "docs"},
		{name: "path glob grant, another reading", tool: "Write", input: map[string]any{"file_path": "docs/a.md "}, held: []GrantKey{docs}, askRule: "docs"},
		{name: "path glob grant, stricter once rule", tool: "Write", input: map[string]any{"file_path": "docs/secret/k"}, held: []GrantKey{docs},
			grantable: true, askRule: "docs-secret"},
		{name: "path grant does not cover the default", tool: "Write", input: map[string]any{"file_path": "src/a.go"}, held: []GrantKey{docs, g("", "Write")}},
		{name: "file rule without globs: rule and tool", tool: "Edit", input: map[string]any{"file_path": "src/a.go"}, held: []GrantKey{g("all-writes", "Edit")},
			covered: g("all-writes", "Edit"), grantable: true, askRule: "all-writes"},
		{name: "other tools: rule and tool", tool: "mcp__jira__create_issue", input: map[string]any{}, held: []GrantKey{g("jira", "mcp__jira__create_issue")},
			covered: g("jira", "mcp__jira__create_issue"), grantable: true, askRule: "jira"},
		{name: "other tools: not another tool of the rule", tool: "mcp__jira__delete_issue", input: map[string]any{}, held: []GrantKey{g("jira", "mcp__jira__create_issue")},
			grantable: true, askRule: "jira"},
		{name: "default verdict, other tool", tool: "mcp__x__y", input: map[string]any{}, held: []GrantKey{g("", "mcp__x__y")},
			covered: g("", "mcp__x__y"), grantable: true},
		{name: "a tool name that looks like a key", tool: "Write:docs/**", input: map[string]any{}, held: []GrantKey{g("", "Write:docs/**")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := env
			e.Resolved = tt.resolved
			pc := NewCall(tt.tool, tt.input)
			res := p.EvaluateCall(e, pc)
			if tt.name == "a denied part" {
				if res.Verdict != VerdictDeny {
					t.Fatalf("EvaluateCall(%v) = %+v, want deny", tt.input, res)
				}
				if ans := p.AnswerGrants(e, pc, Result{Verdict: VerdictRequireApproval, RuleID: "push"}, NewGrants(tt.held...)); ans.Covered || ans.Grantable {
					t.Errorf("AnswerGrants(denied call) = %+v, want no grant", ans)
				}
				return
			}
			if res.Verdict != VerdictRequireApproval {
				t.Fatalf("EvaluateCall(%q, %v) = %+v, want require_approval", tt.tool, tt.input, res)
			}
			got := p.AnswerGrants(e, pc, res, NewGrants(tt.held...))
			if want := tt.covered != (GrantKey{}); got.Covered != want || (want && got.Grant != tt.covered) {
				t.Errorf("AnswerGrants(%q, %v) = covered %v by %+v, want covered %v by %+v", tt.tool, tt.input, got.Covered, got.Grant, want, tt.covered)
			}
			if got.Grantable != tt.grantable {
				t.Errorf("AnswerGrants(%q, %v).Grantable = %v, want %v", tt.tool, tt.input, got.Grantable, tt.grantable)
			}
			if got.Ask.Verdict != VerdictRequireApproval || got.Ask.RuleID != tt.askRule {
				t.Errorf("AnswerGrants(%q, %v).Ask = %+v, want require_approval by %q", tt.tool, tt.input, got.Ask, tt.askRule)
			}
			// An approval filed for a grantable call must be under a key
			// not held yet: approving it for the session makes progress.
			if got.Grantable && !got.Covered {
				ask := GrantKey{RuleID: got.Ask.RuleID, ScopeKey: got.Ask.ScopeKey}
				if ask.ScopeKey == "" || NewGrants(tt.held...).Has(ask) {
					t.Errorf("AnswerGrants(%q, %v) asks under %+v, held already or without a key", tt.tool, tt.input, ask)
				}
			}
		})
	}
}

// Every approval key must be answerable: a grant under the key an approval
// was filed with covers the same call again.
func TestScopeKeyRoundTrip(t *testing.T) {
	t.Parallel()
	p := mustParse(t, grantPolicy)
	for _, in := range []struct {
		tool  string
		input map[string]any
	}{
		{"Bash", bashInput("git push --force origin main")},
		{"Bash", bashInput("npm publish --tag next")},
		{"Write", map[string]any{"file_path": "/ws/docs/a/b.md"}},
		{"Edit", map[string]any{"file_path": "x"}},
		{"mcp__jira__create_issue", map[string]any{"project": "OPS"}},
	} {
		env := Env{Workspace: "/ws"}
		pc := NewCall(in.tool, in.input)
		held := []GrantKey{}
		for range 4 {
			res := p.EvaluateCall(env, pc)
			ans := p.AnswerGrants(env, pc, res, NewGrants(held...))
			if ans.Covered {
				break
			}
			if ans.Ask.ScopeKey == "" {
				t.Fatalf("%s %v asks under rule %q without a scope key", in.tool, in.input, ans.Ask.RuleID)
			}
			held = append(held, GrantKey{RuleID: ans.Ask.RuleID, ScopeKey: ans.Ask.ScopeKey})
		}
		res := p.EvaluateCall(env, pc)
		if !p.AnswerGrants(env, pc, res, NewGrants(held...)).Covered {
			t.Errorf("%s %v not covered after granting every ask %v", in.tool, in.input, held)
		}
	}
}

// An opaque line never gets a scope key, never matches a match-less allow
// rule, and is never answered by any grant, even one for every key.
func TestOpaqueNeverGranted(t *testing.T) {
	t.Parallel()
	asking := mustParse(t, `{"name":"o","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[
	  {"id":"all","tool":"Bash","verdict":"allow"},
	  {"id":"ask","tool":"Bash","match":{"command_prefix":["bash","eval","python3","git"]},"verdict":"require_approval","scope":"session"}]}`)
	// Without a restrictive rule the line gets no bash.opaque verdict:
	// only its opacity keeps it from the match-less allow rule.
	matchless := mustParse(t, `{"name":"m","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[
	  {"id":"all","tool":"Bash","verdict":"allow"}]}`)
	for _, p := range []*Policy{asking, matchless} {
		for _, cmd := range []string{`bash -c "$X"`, `eval "$(cat f)"`, `python3 -c 'import os'`, `git -c core.pager=x log`, `find . -exec rm {} ;`, `ls 'x`} {
			opaqueNeverGranted(t, p, cmd)
		}
	}
}

func opaqueNeverGranted(t *testing.T, p *Policy, cmd string) {
	t.Helper()
	{
		in := bashInput(cmd)
		pc := NewCall("Bash", in)
		res := p.EvaluateCall(Env{}, pc)
		if res.Verdict == VerdictAllow {
			t.Errorf("Evaluate(%q) under %s = allow by %q, want no allow for an opaque line", cmd, p.Document().Name, res.RuleID)
			return
		}
		if res.ScopeKey != "" || (res.Verdict == VerdictRequireApproval && res.Scope != ScopeOnce) {
			t.Errorf("Evaluate(%q) = key %q scope %q, want no key and scope once", cmd, res.ScopeKey, res.Scope)
		}
		all := NewGrants(GrantKey{"ask", "Bash:bash"}, GrantKey{"ask", "Bash:eval"}, GrantKey{"ask", "Bash:python3"}, GrantKey{"ask", "Bash:git"}, GrantKey{"", "Bash:git"}, GrantKey{"all", "Bash"})
		if ans := p.AnswerGrants(Env{}, pc, res, all); ans.Covered || ans.Grantable {
			t.Errorf("AnswerGrants(%q) = %+v, want no grant to answer an opaque line", cmd, ans)
		}
	}
}

func TestAnswerGrantsRefusesForeignResults(t *testing.T) {
	t.Parallel()
	p := mustParse(t, grantPolicy)
	pc := NewCall("Bash", bashInput("git push"))
	held := NewGrants(GrantKey{"push", "Bash:git push"}, GrantKey{"npm", "Bash:git push"})
	res := p.EvaluateCall(Env{}, pc)
	for name, r := range map[string]Result{
		"allow":                 {Verdict: VerdictAllow, RuleID: "push"},
		"another rule reported": {Verdict: VerdictRequireApproval, RuleID: "npm", ScopeKey: "Bash:git push"},
		"the default reported":  {Verdict: VerdictRequireApproval, ScopeKey: "Bash:git push"},
	} {
		if ans := p.AnswerGrants(Env{}, pc, r, held); ans.Covered || ans.Grantable {
			t.Errorf("AnswerGrants(%s) = %+v, want nothing answered", name, ans)
		}
	}
	if !p.AnswerGrants(Env{}, pc, res, held).Covered {
		t.Errorf("AnswerGrants(own result) not covered")
	}
	if p.AnswerGrants(Env{}, nil, res, held).Covered {
		t.Errorf("AnswerGrants(nil call) covered")
	}
}

// FuzzAnswerGrants: whatever the line, granting every ask the policy makes
// about it never answers a line the analysis cannot see through, and an
// ask for a grantable call is always under a key not held yet (so an
// approval for the session makes progress).
func FuzzAnswerGrants(f *testing.F) {
	for _, s := range []string{"git push origin main", "git push --force && npm publish", "git status; git push", "env git push",
		"git push $(curl x)", "bash -c 'git push'", "npm publish | git push", "GIT_DIR=x git push", "git push 'x",
		"git push && cp x .git/hooks/pre-push", "npm publish --userconfig .npmrc", "git push; git checkout x",
		"cat .env", "cp a secrets/k", "rg KEY .", "tee .bashrc", "git apply p.diff", "git stash pop", "cat README && git push"} {
		f.Add(s)
	}
	policies := []*Policy{mustParse(f, grantPolicy), reachPolicy(f, true)}
	env := Env{Workspace: "/ws", Cwd: "/ws"}
	f.Fuzz(func(t *testing.T, cmd string) {
		for _, p := range policies {
			answerEveryAsk(t, p, env, cmd)
		}
	})
}

// answerEveryAsk grants every ask the policy makes about the line, up to
// five, and checks what FuzzAnswerGrants promises.
func answerEveryAsk(t *testing.T, p *Policy, env Env, cmd string) {
	t.Helper()
	pc := NewCall("Bash", bashInput(cmd))
	res := p.EvaluateCall(env, pc)
	var held []GrantKey
	for range 5 {
		ans := p.AnswerGrants(env, pc, res, NewGrants(held...))
		if ans.Covered {
			if a := bash.Analyze(cmd); a.Parts() == 0 || res.Verdict != VerdictRequireApproval {
				t.Fatalf("%q answered by grants %v: parts %d, verdict %s", cmd, held, a.Parts(), res.Verdict)
			}
			c := call{Call: pc, env: env}
			if why := c.bashProtectedWrite() + c.bash().GitTreeWrite(); why != "" || pc.noGrant.Load() {
				t.Fatalf("%q answered by grants %v under %s, though %q (no grant: %v)", cmd, held, p.Document().Name, why, pc.noGrant.Load())
			}
			return
		}
		if !ans.Grantable {
			return
		}
		k := GrantKey{RuleID: ans.Ask.RuleID, ScopeKey: ans.Ask.ScopeKey}
		if k.ScopeKey == "" || NewGrants(held...).Has(k) {
			t.Fatalf("%q asks under %+v, held %v", cmd, k, held)
		}
		held = append(held, k)
	}
}

// reachPolicy has Bash rules that ask for the session about programs that
// read and write files, beside file rules that ask every time, and (with
// deny) one that denies.
func reachPolicy(t testing.TB, deny bool) *Policy {
	t.Helper()
	rules := `{"id":"files","tool":"Bash","match":{"command_prefix":["cat","rg","grep","cp","tee","sed","ln","mkdir","touch","npm test","git push","git apply","git checkout","git stash"]},"verdict":"require_approval","scope":"session"},
	  {"id":"env","tool":"Read","match":{"path":["**/.env"]},"verdict":"require_approval","scope":"once"},
	  {"id":"secrets","tool":"Write","match":{"path":["secrets/**"]},"verdict":"require_approval","scope":"once"}`
	if deny {
		rules += `,{"id":"keys","tool":"Read","match":{"path":["**/*.pem"]},"verdict":"deny"}`
	}
	return mustParse(t, `{"name":"reach","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[`+rules+`]}`)
}

// A session grant on a Bash prefix is a human's yes to that program, not
// to every file it may reach: a line that the file rules ask about (or
// that must be narrowed to stay clear of them, or that writes a path
// programs obey) is asked about once, and no grant answers it, even with
// every key held; one a search of which reaches what a deny rule matches
// is denied, since an approval never passes a deny. Words after a granted
// prefix are read as an allow rule with "options": "any" reads them.
func TestGrantsDoNotReachPastTheFileRules(t *testing.T) {
	t.Parallel()
	var held []GrantKey
	for _, k := range []string{"cat", "rg", "grep", "cp", "tee", "sed", "ln", "mkdir", "touch", "npm test", "git push", "git apply", "git checkout", "git stash"} {
		held = append(held, GrantKey{RuleID: "files", ScopeKey: "Bash:" + k})
	}
	all := NewGrants(held...)
	env := Env{Workspace: "/ws", Cwd: "/ws"}
	tests := []struct {
		cmd     string
		deny    bool    // the policy with the deny rule
		want    Verdict // require_approval: asked once, no key, no grant
		covered bool
	}{
		{cmd: "cat README.md", covered: true},
		{cmd: "git push --force origin main", covered: true},
		{cmd: "npm test -- --watch", covered: true},
		{cmd: "cat .env", want: VerdictRequireApproval},
		{cmd: "cat ~/.env", want: VerdictRequireApproval},
		{cmd: "cat < .env", want: VerdictRequireApproval},
		{cmd: "cp a secrets/k", want: VerdictRequireApproval},
		{cmd: "rg KEY .", want: VerdictRequireApproval},
		{cmd: "grep -rn KEY src", want: VerdictRequireApproval},
		{cmd: "rg KEY .", deny: true, want: VerdictDeny},
		{cmd: "grep -rn KEY .", deny: true, want: VerdictDeny},
		{cmd: "cp evil .git/hooks/pre-commit", want: VerdictRequireApproval},
		{cmd: "tee .bashrc", want: VerdictRequireApproval},
		{cmd: "sed -i s/a/b/ .claude/settings.json", want: VerdictRequireApproval},
		{cmd: "ln -s /etc/passwd .git/config", want: VerdictRequireApproval},
		{cmd: "mkdir -p .git/hooks", want: VerdictRequireApproval},
		{cmd: "touch .envrc", want: VerdictRequireApproval},
		{cmd: "cat a && cp x .gitattributes", want: VerdictRequireApproval},
		{cmd: "git apply fix.diff", want: VerdictRequireApproval},
		{cmd: "git checkout other", want: VerdictRequireApproval},
		{cmd: "git stash pop", want: VerdictRequireApproval},
		// The default verdict asks (no Bash rule matches): once, as ever,
		// but never past a deny.
		{cmd: "git grep KEY", want: VerdictRequireApproval},
		{cmd: "git grep KEY", deny: true, want: VerdictDeny},
		{cmd: "rg KEY . .env", deny: true, want: VerdictDeny},
		{cmd: "git diff; head .env", deny: true, want: VerdictDeny},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s deny=%v", tt.cmd, tt.deny), func(t *testing.T) {
			t.Parallel()
			p := reachPolicy(t, tt.deny)
			pc := NewCall("Bash", bashInput(tt.cmd))
			res := p.EvaluateCall(env, pc)
			ans := p.AnswerGrants(env, pc, res, all)
			if tt.covered {
				if res.Verdict != VerdictRequireApproval || !ans.Covered {
					t.Fatalf("%q = %s by %q, covered %v; want asked and covered by a grant", tt.cmd, res.Verdict, res.RuleID, ans.Covered)
				}
				return
			}
			if res.Verdict != tt.want {
				t.Fatalf("%q = %s by %q (%s), want %s", tt.cmd, res.Verdict, res.RuleID, res.Reason, tt.want)
			}
			if ans.Covered || ans.Grantable {
				t.Errorf("%q answered by grants: %+v", tt.cmd, ans)
			}
			if res.Verdict == VerdictRequireApproval && (res.ScopeKey != "" || res.Scope != ScopeOnce) {
				t.Errorf("%q asks under key %q, scope %q; want no key, scope once", tt.cmd, res.ScopeKey, res.Scope)
			}
		})
	}
}

// A grant's words after the prefix are read as an allow rule with
// "options": "any" reads them: no option that changes what a project
// runner runs, no pattern that could expand to an option.
func TestGrantReadsWordsAsAnyOptions(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"o","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[
	  {"id":"run","tool":"Bash","match":{"command_prefix":["npm test","make","go test","git push","rg","git"]},"verdict":"require_approval","scope":"session"}]}`)
	all := NewGrants(GrantKey{"run", "Bash:npm test"}, GrantKey{"run", "Bash:make"}, GrantKey{"run", "Bash:go test"}, GrantKey{"run", "Bash:git push"}, GrantKey{"run", "Bash:rg"}, GrantKey{"run", "Bash:git"})
	for cmd, want := range map[string]bool{
		"npm test":                          true,
		"make build":                        true,
		"go test ./...":                     true,
		"git push origin main":              true,
		"npm test --script-shell=/tmp/x.sh": false,
		"npm test --prefix=/tmp/other":      false,
		"make -C /tmp/other":                false,
		"make --eval=x":                     false,
		"go test -exec=/tmp/x ./...":        false,
		"git push origin *":                 false,
		"rg -n KEY src":                     true,
		"rg --pre-glob='*.pdf' KEY src":     true,
		"git send-email x.patch":            true,
		// Options whose value is a program the command runs.
		"rg --pre=./x KEY src":                false,
		"rg --pre ./x KEY src":                false,
		"git send-email --to-cmd=./x x.patch": false,
		"git send-email --sendmail-cmd ./x p": false,
		"git send-email --smtp-server=./x p":  false,
		"git send-email --cc-cmd=./x p":       false,
		"git send-email --header-cmd=./x p":   false,
	} {
		pc := NewCall("Bash", bashInput(cmd))
		res := p.EvaluateCall(Env{}, pc)
		if got := p.AnswerGrants(Env{}, pc, res, all).Covered; got != want {
			t.Errorf("%q covered by the grants = %v, want %v (%s)", cmd, got, want, res.Reason)
		}
	}
}

// A grant of one file tool answers no other tool the same rule asks about.
func TestGrantIsOfOneFileTool(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"f","default_verdict":"deny","rules":[
	  {"id":"w","tool":"{Write,Edit,MultiEdit,NotebookEdit}","match":{"path":["docs/**"]},"verdict":"require_approval","scope":"session"},
	  {"id":"r","tool":"{Read,Grep,Glob}","match":{"path":["docs/**"]},"verdict":"require_approval","scope":"session"}]}`)
	env := Env{Workspace: "/ws", Cwd: "/ws"}
	inputs := map[string]map[string]any{
		"Write": {"file_path": "docs/a.md", "content": "x"}, "Edit": {"file_path": "docs/a.md", "old_string": "a", "new_string": "b"},
		"MultiEdit": {"file_path": "docs/a.md", "edits": []any{}}, "NotebookEdit": {"notebook_path": "docs/a.ipynb", "new_source": "x"},
		"Read": {"file_path": "docs/a.md"}, "Grep": {"pattern": "x", "path": "docs/a"}, "Glob": {"pattern": "*.md", "path": "docs/a"},
	}
	for granted := range inputs {
		rule := "w"
		if granted == "Read" || granted == "Grep" || granted == "Glob" {
			rule = "r"
		}
		held := NewGrants(GrantKey{rule, granted + ":docs/**"})
		for tool, in := range inputs {
			pc := NewCall(tool, in)
			res := p.EvaluateCall(env, pc)
			if got := p.AnswerGrants(env, pc, res, held).Covered; got != (tool == granted) {
				t.Errorf("grant of %s answers %s = %v (%s %q)", granted, tool, got, res.Verdict, res.ScopeKey)
			}
		}
	}
}

// An autonomous run rewrites a line that a Bash rule and a file rule both
// ask about (of a path it names, or of the tree it searches) to allow only when both rules fall back to allow.
func TestAutonomyOfALineTwoRulesAsk(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ bash, file, want Verdict }{
		{VerdictAllow, VerdictAllow, VerdictAllow},
		{VerdictAllow, VerdictDeny, VerdictDeny},
		{VerdictDeny, VerdictAllow, VerdictDeny},
	} {
		p := mustParse(t, fmt.Sprintf(`{"name":"a","default_verdict":"deny","rules":[
		  {"id":"cat","tool":"Bash","match":{"command_prefix":["cat","rg"]},"verdict":"require_approval","on_autonomous":%q},
		  {"id":"env","tool":"Read","match":{"path":["**/.env"]},"verdict":"require_approval","on_autonomous":%q}]}`, tt.bash, tt.file))
		for cmd, want := range map[string]Verdict{"cat .env": tt.want, "rg KEY .": tt.want, "cat README": tt.bash} {
			if got := p.EvaluateIn(Env{Workspace: "/ws"}, "Bash", bashInput(cmd)); got.Verdict != VerdictRequireApproval || got.OnAutonomous != want {
				t.Errorf("%q with fallbacks %s (Bash) and %s (Read) = %s, autonomous %s; want require_approval, autonomous %s", cmd, tt.bash, tt.file, got.Verdict, got.OnAutonomous, want)
			}
		}
	}
}

// When the approval is filed under another asking rule than the one the
// policy reported (a scope-once rule whose grant is missing), an
// autonomous run falls back to allow only when both rules do.
func TestAskUnderAnotherRuleKeepsTheFallback(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ push, force, want Verdict }{
		{VerdictDeny, VerdictAllow, VerdictDeny},
		{VerdictAllow, VerdictDeny, VerdictDeny},
		{VerdictAllow, VerdictAllow, VerdictAllow},
	} {
		p := mustParse(t, fmt.Sprintf(`{"name":"a","default_verdict":"deny","rules":[
		  {"id":"push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session","on_autonomous":%q},
		  {"id":"force","tool":"Bash","match":{"command_prefix":["git push --force"]},"verdict":"require_approval","scope":"once","on_autonomous":%q}]}`, tt.push, tt.force))
		pc := NewCall("Bash", bashInput("git push --force origin main"))
		res := p.EvaluateCall(Env{}, pc)
		// An autonomous run holds no grant; a supervised one may.
		for _, held := range []Grants{{}, NewGrants(GrantKey{"push", "Bash:git push"})} {
			ans := p.AnswerGrants(Env{}, pc, res, held)
			if ans.Covered || ans.Ask.RuleID != "force" || ans.Ask.OnAutonomous != tt.want {
				t.Errorf("fallbacks push %s, force %s: asks under %q, autonomous %s (covered %v); want force, %s", tt.push, tt.force, ans.Ask.RuleID, ans.Ask.OnAutonomous, ans.Covered, tt.want)
			}
		}
	}
}

// The rule that reports an ask may give no key (a rule without a prefix)
// while another asking rule's grant would cover the line: the line that
// writes a path programs obey is still answered by no grant.
func TestNoGrantWhenTheReportedRuleHasNoKey(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"k","default_verdict":"deny","rules":[
	  {"id":"described","tool":"Bash","match":{"input":{"/description":["*"]}},"verdict":"require_approval","scope":"session"},
	  {"id":"cp","tool":"Bash","match":{"command_prefix":["cp"]},"verdict":"require_approval","scope":"session"}]}`)
	held := NewGrants(GrantKey{"cp", "Bash:cp"})
	for cmd, want := range map[string]bool{"cp a b": true, "cp x .git/hooks/pre-commit": false, "cp x .claude/settings.json": false} {
		pc := NewCall("Bash", map[string]any{"command": cmd, "description": "copy"})
		res := p.EvaluateCall(Env{Workspace: "/ws"}, pc)
		if res.RuleID != "described" || res.ScopeKey != "" {
			t.Fatalf("%q = %s by %q under %q, want asked by the rule without a key", cmd, res.Verdict, res.RuleID, res.ScopeKey)
		}
		if got := p.AnswerGrants(Env{Workspace: "/ws"}, pc, res, held).Covered; got != want {
			t.Errorf("%q covered = %v, want %v", cmd, got, want)
		}
	}
}
