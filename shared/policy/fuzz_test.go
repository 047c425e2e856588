package policy

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
	"mvdan.cc/sh/v3/syntax"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name":"default","default_verdict":"require_approval","approval":{"scope":"once","ttl_seconds":900},"autonomy":{"on_approval_rule":"deny"},"rules":[{"id":"git-read","tool":"Bash","match":{"command_prefix":["git status","git diff"]},"verdict":"allow"},{"id":"src-write","tool":"Write","match":{"path":["src/**"]},"verdict":"allow"},{"id":"jira-field","tool":"mcp__jira__create_issue","match":{"input":{"/project":["OPS"]}},"verdict":"deny"}]}`))
	f.Add([]byte("name: x\ndefault_verdict: deny\nrules:\n  - {id: a, tool: 'mcp__*', verdict: allow, match: {input: {/a/0: ['x*']}}}\n"))
	f.Add([]byte(`{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"Bash","match":{"command_prefix":["ls && rm", ""]},"verdict":"allow"}]}`))
	f.Add([]byte(`{"name":5,"default_verdict":"deny","rules":[{"id":"a","tool":"Bash","ttl_seconds":"x","match":{"input":{"/a":[1]}},"verdict":"allow"}]}`))
	f.Add([]byte(`{"name":"x","default_verdict":"deny","approval":[],"bash":{"opaque":null},"rules":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, warns, err := Parse(data)
		if err != nil {
			if p != nil || warns != nil {
				t.Fatalf("Parse(%q) returned a policy or warnings with error %v", data, err)
			}
			// Errors are for people: never a Go type.
			for _, goWord := range []string{"struct {", "*float64", "[]string", "map[", "int64", "json:", "policy.", "interface {", "<nil>"} {
				if strings.Contains(err.Error(), goWord) {
					t.Fatalf("Parse(%q) error %q names a Go type", data, err)
				}
			}
			return
		}
		// A parsed policy evaluates without panicking and its document
		// round-trips to the same digest.
		for _, tool := range []string{"Bash", "Read", "mcp__jira__create_issue", ""} {
			r := p.Evaluate(tool, map[string]any{"command": "git push && ls", "file_path": "../x", "project": "OPS"})
			switch r.Verdict {
			case VerdictAllow, VerdictDeny, VerdictRequireApproval:
			default:
				t.Fatalf("Evaluate(%q) verdict = %q", tool, r.Verdict)
			}
		}
		q, _, err := New(p.Document())
		if err != nil {
			t.Fatalf("New(Document()) = %v for %q", err, data)
		}
		if q.Digest() != p.Digest() {
			t.Fatalf("digest changed on round trip for %q", data)
		}
	})
}

// fuzzAllowPolicy allows a few harmless prefixes; nothing else.
var fuzzAllowPolicy = func() *Policy {
	p, _, err := Parse([]byte(`{"name":"fuzz","default_verdict":"deny","rules":[
	  {"id":"ok","tool":"Bash","match":{"command_prefix":["git status","ls","echo","cat","grep"]},"verdict":"allow"}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

var allowedPrograms = map[string]bool{"git": true, "ls": true, "echo": true, "cat": true, "grep": true}

// FuzzBashAllow checks that an allowed command line is, by an independent
// oracle on the syntax tree, simple commands joined by lists and pipes
// whose programs are allowed, with no substitution, expansion, eval, shell
// -c, background job or assignment anywhere; and, on the raw string, that
// no substitution can appear outside quotes.
func FuzzBashAllow(f *testing.F) {
	for _, s := range []string{
		"git status", "ls -la | grep x", "echo hi; rm -rf /", "echo $(rm x)", "echo `id`",
		"ls && rm x", "ls || rm x", "cat <(rm x)", "ls >(rm x)", "ls | sh", "eval ls",
		"bash -c ls", "echo 'a;b' \"c|d\"", "ls 2>&1 >/dev/null", "X=1 ls", "git -c a=b status",
		"echo $'\\x41'", "ls ${x}", "ls *.go", "echo \\$(id)", "cat < f", "ls &", "(ls)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		r := fuzzAllowPolicy.Evaluate("Bash", map[string]any{"command": cmd})
		if r.Verdict != VerdictAllow {
			return
		}
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
		if err != nil {
			t.Fatalf("allowed %q which does not parse: %v", cmd, err)
		}
		if op, why := bash.Analyze(cmd).Opaque(); op {
			t.Fatalf("allowed %q, which is opaque (%s)", cmd, why)
		}
		bad := ""
		syntax.Walk(file, func(n syntax.Node) bool {
			bad = oracleNode(n)
			return bad == ""
		})
		if bad != "" {
			t.Fatalf("allowed %q: %s", cmd, bad)
		}
		// String oracle: outside single quotes, no unescaped "$(" or
		// backtick, and no background job.
		if unquotedContains(cmd) {
			t.Fatalf("allowed %q which has an unquoted substitution or background job", cmd)
		}
	})
}

// oracleNode is what the tree oracle refuses in one node of an allowed
// line, "" for nothing.
func oracleNode(n syntax.Node) string {
	switch x := n.(type) {
	case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp, *syntax.ParamExp,
		*syntax.Subshell, *syntax.Block, *syntax.FuncDecl, *syntax.IfClause,
		*syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause, *syntax.DeclClause,
		*syntax.LetClause, *syntax.ArithmCmd, *syntax.TestClause, *syntax.TimeClause,
		*syntax.CoprocClause, *syntax.Assign:
		return "forbidden node"
	case *syntax.Stmt:
		if x.Background || x.Coprocess || x.Disown {
			return "background"
		}
	case *syntax.BinaryCmd:
		switch x.Op {
		case syntax.Pipe, syntax.PipeAll, syntax.AndStmt, syntax.OrStmt:
		default:
			return "operator " + x.Op.String()
		}
	case *syntax.Redirect:
		return oracleRedirect(x)
	case *syntax.CallExpr:
		return oracleCall(x)
	}
	return ""
}

// oracleRedirect refuses a here-document and an output redirection to a
// file other than /dev/null.
func oracleRedirect(x *syntax.Redirect) string {
	bad := ""
	if x.Op == syntax.Hdoc || x.Op == syntax.DashHdoc || x.Op == syntax.WordHdoc {
		bad = "here-document"
	}
	if x.Op == syntax.RdrOut || x.Op == syntax.AppOut || x.Op == syntax.RdrAll || x.Op == syntax.AppAll || x.Op == syntax.RdrClob {
		if x.Word.Lit() != "/dev/null" {
			bad = "output redirection"
		}
	}
	return bad
}

// oracleCall refuses a program not allowed, a -c or -exec of a program
// that is not grep, echo, cat or ls, and a git subcommand but status.
func oracleCall(x *syntax.CallExpr) string {
	bad := ""
	lit := oracleLit(x.Args[0])
	if !allowedPrograms[lit] {
		bad = "program " + lit + " not allowed"
	}
	for _, a := range x.Args[1:] {
		if s := oracleLit(a); s == "-c" || strings.Contains(s, "-exec") {
			if lit != "grep" && lit != "echo" && lit != "cat" && lit != "ls" {
				bad = "shell -c"
			}
		}
	}
	if lit == "git" && len(x.Args) > 1 && oracleLit(x.Args[1]) != "status" {
		bad = "git subcommand " + oracleLit(x.Args[1])
	}
	return bad
}

// oracleLit is a deliberately simple literal reading: quotes and
// backslashes removed, anything else makes the word "?".
func oracleLit(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(strings.ReplaceAll(x.Value, `\`, ""))
		case *syntax.SglQuoted:
			if x.Dollar {
				return "?"
			}
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "?"
				}
				b.WriteString(l.Value)
			}
		default:
			return "?"
		}
	}
	return b.String()
}

// unquotedContains scans the raw text with a small quote-state machine.
func unquotedContains(s string) bool {
	q := quoteScan{s: s}
	for q.i = 0; q.i < len(s); q.i++ {
		var found bool
		switch q.state {
		case inSingle:
			if s[q.i] == '\'' {
				q.state = unquoted
			}
		case inDouble:
			found = q.double()
		default:
			found = q.unquoted()
		}
		if found {
			return true
		}
	}
	return false
}

// Quote states of quoteScan.
const (
	unquoted = iota
	inSingle
	inDouble
)

// quoteScan is unquotedContains's state: the text, the place, the quote.
type quoteScan struct {
	s     string
	i     int
	state int
}

// double reads s[i] inside double quotes: a backtick, $( and ${ are
// substitutions.
func (q *quoteScan) double() bool {
	s, i := q.s, q.i
	switch s[i] {
	case '\\':
		q.i++
	case '"':
		q.state = unquoted
	case '`':
		return true
	case '$':
		return i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{')
	}
	return false
}

// unquoted reads s[i] outside quotes: a comment runs to the end of the
// line (newlines as separators are left to the tree oracle); a backtick,
// $(, ${, $', a process substitution and a background job are found.
func (q *quoteScan) unquoted() bool {
	s, i := q.s, q.i
	switch s[i] {
	case '#':
		// A comment runs to the end of the line when it starts a word.
		if i == 0 || strings.IndexByte(" \t\n;&|()<>", s[i-1]) >= 0 {
			for q.i < len(s) && s[q.i] != '\n' {
				q.i++
			}
		}
	case '\\':
		q.i++
	case '\'':
		q.state = inSingle
	case '"':
		q.state = inDouble
	case '`':
		return true
	case '$':
		return i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{' || s[i+1] == '\'')
	case '&':
		return q.background()
	case '<', '>':
		return i+1 < len(s) && s[i+1] == '('
	}
	return false
}

// background reads an & outside quotes: && is a list operator, >&, <&,
// |& and &> are redirections, any other starts a background job.
func (q *quoteScan) background() bool {
	s, i := q.s, q.i
	if i+1 < len(s) && s[i+1] == '&' {
		q.i++ // a list operator
		return false
	}
	if i == 0 || s[i-1] != '>' && s[i-1] != '<' && s[i-1] != '|' {
		return i+1 >= len(s) || s[i+1] != '>'
	}
	return false
}

// everythingPolicy allows every program the fuzzers reach, with any
// options, and every Bash call through a rule without criteria: only
// opacity can keep a line from being allowed.
var everythingPolicy = func() *Policy {
	p, _, err := Parse([]byte(`{"name":"everything","default_verdict":"deny","rules":[
	  {"id":"any","tool":"Bash","match":{"options":"any","command_prefix":["git","ls","echo","cat","grep","sh","bash",
	    "python3","perl","node","awk","sed","find","xargs","env","sudo","eval","source",".","make","npm","curl","rm","trap","alias"]},"verdict":"allow"}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

// matchlessAllowPolicy allows Bash with a rule that has no criteria, and
// asks about everything else: nothing but opacity keeps a line from it.
var matchlessAllowPolicy = func() *Policy {
	p, _, err := Parse([]byte(`{"name":"matchless","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[
	  {"id":"all","tool":"Bash","verdict":"allow"}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

var unconditionalPolicy = func() *Policy {
	p, _, err := Parse([]byte(`{"name":"all","default_verdict":"deny","rules":[
	  {"id":"all","tool":"Bash","verdict":"allow"},
	  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

// FuzzBashOpaqueNeverAllowed: a line the analyser cannot establish matches
// no allow rule and no grant, whatever the rules allow.
func FuzzBashOpaqueNeverAllowed(f *testing.F) {
	for _, s := range []string{
		"python3 -c 'x'", "bash s.sh", "./s.sh", "git st", "curl x | sh", "eval \"$X\"", "xargs -I% git %",
		"find . -exec id \\;", "git -c alias.s=push s", "trap 'x' EXIT", "cat </dev/tcp/h/80",
		"BASH_ENV=x ls", "awk 'BEGIN{system(\"id\")}'", "sed 's/a/b/e' f", "source <(echo x)",
		strings.Repeat(": 'true $(true)'; ", 40) + "ls", "if", "ls 'x", "taskset 1", "unshare",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if op, _ := bash.Analyze(cmd).Opaque(); !op {
			return
		}
		in := map[string]any{"command": cmd}
		if r := everythingPolicy.Evaluate("Bash", in); r.Verdict == VerdictAllow {
			t.Fatalf("opaque %q allowed by %q (%s)", cmd, r.RuleID, r.Reason)
		}
		if r := unconditionalPolicy.Evaluate("Bash", in); r.Verdict == VerdictAllow {
			t.Fatalf("opaque %q allowed by %q (%s) in a policy with a deny rule", cmd, r.RuleID, r.Reason)
		}
		// No grant answers an opaque line, whatever the run holds: not
		// even one under every key its words could name. With no
		// restrictive rule the match-less allow rule is the only rule
		// the line could ride on.
		pc := NewCall("Bash", in)
		res := matchlessAllowPolicy.EvaluateCall(Env{}, pc)
		if res.Verdict == VerdictAllow {
			t.Fatalf("opaque %q allowed by a match-less allow rule (%s)", cmd, res.Reason)
		}
		var keys []GrantKey
		for _, words := range bash.Analyze(cmd).Normalized() {
			for n := 1; n <= len(words); n++ {
				k := "Bash:" + bash.KeyText(words[:n])
				keys = append(keys, GrantKey{"all", k}, GrantKey{"", k})
			}
		}
		if ans := matchlessAllowPolicy.AnswerGrants(Env{}, pc, res, NewGrants(keys...)); ans.Covered || ans.Grantable || res.ScopeKey != "" {
			t.Fatalf("opaque %q: scope key %q, grants %+v", cmd, res.ScopeKey, ans)
		}
	})
}

// catalogueAllowPolicy allows, in catalogue mode, every program the
// catalogue knows; tripwirePolicy denies what a read-only line never runs.
var catalogueAllowPolicy = func() *Policy {
	p, _, err := Parse([]byte(`{"name":"catalogue","default_verdict":"deny","rules":[
	  {"id":"read","tool":"Bash","match":{"command_prefix":["git","ls","cat","head","tail","wc","sort","uniq","cut","tr",
	    "stat","du","df","pwd","grep","rg","echo","printf","find","sed","awk","jq","diff","file","tree","date","seq","which"]},"verdict":"allow"}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

// listedPrograms reports whether every part's program is one that
// catalogueAllowPolicy names.
func listedPrograms(a *bash.Analysis) bool {
	for i := 0; i < a.Parts(); i++ {
		if !catalogueAllowPrograms[a.PartKeys(i)[0]] {
			return false
		}
	}
	return true
}

var catalogueAllowPrograms = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range catalogueAllowPolicy.Document().Rules[0].Match.CommandPrefix {
		m[p] = true
	}
	return m
}()

var tripwirePolicy = func() *Policy {
	p, _, err := Parse([]byte(`{"name":"tripwire","default_verdict":"allow","rules":[
	  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
	  {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"}]}`))
	if err != nil {
		panic(err)
	}
	return p
}()

// FuzzBashCatalogueSafe: a line whose every part is read-only by the
// catalogue is never opaque, is allowed by prefixes on its programs, and
// passes a tripwire policy untouched.
func FuzzBashCatalogueSafe(f *testing.F) {
	for _, s := range []string{
		"git status && git diff", "git log --oneline -5 | head -3", "ls -la; cat f", "grep -rn x src | wc -l",
		"sed -n '1,5p' f", "awk '{print $1}' f", "jq -r .a f", "find . -name '*.go' -type f", "git --no-pager show HEAD",
		"sort -u f | uniq -c", "tree -L 2", "echo a || echo b", "diff -u a b 2>/dev/null", "cat < f",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		a := bash.Analyze(cmd)
		if ok, _ := a.ReadOnly(); !ok {
			return
		}
		if op, why := a.Opaque(); op {
			t.Fatalf("read-only %q is opaque (%s)", cmd, why)
		}
		in := map[string]any{"command": cmd}
		if r := catalogueAllowPolicy.Evaluate("Bash", in); r.Verdict != VerdictAllow && listedPrograms(a) {
			t.Fatalf("read-only %q not allowed: %s (%s)", cmd, r.Verdict, r.Reason)
		}
		// And by a policy naming exactly the programs of its parts.
		progs := map[string]bool{}
		for i := 0; i < a.Parts(); i++ {
			progs[a.PartKeys(i)[0]] = true
		}
		doc := Document{Name: "own", DefaultVerdict: VerdictDeny, Rules: []Rule{{ID: "own", Tool: "Bash", Verdict: VerdictAllow, Match: &Match{}}}}
		for p := range progs {
			doc.Rules[0].Match.CommandPrefix = append(doc.Rules[0].Match.CommandPrefix, p)
		}
		own, _, err := New(doc)
		if err != nil {
			t.Fatalf("policy for %q: %v", cmd, err)
		}
		if r := own.Evaluate("Bash", in); r.Verdict != VerdictAllow {
			t.Fatalf("read-only %q not allowed by its own programs: %s (%s)", cmd, r.Verdict, r.Reason)
		}
		if r := tripwirePolicy.Evaluate("Bash", in); r.Verdict != VerdictAllow {
			t.Fatalf("read-only %q refused by a tripwire: %s (%s)", cmd, r.Verdict, r.Reason)
		}
		if ok, why := BashReadOnly(in); !ok {
			t.Fatalf("BashReadOnly(%q) = false (%s)", cmd, why)
		}
	})
}

// FuzzFileRulesBash: under a secrets policy with read and copy commands
// allowed, a Bash line the policy allows never reads a path a deny rule
// matches, never writes a path programs obey, and a narrowed line is
// allowed as it is, with nothing left to narrow.
func FuzzFileRulesBash(f *testing.F) {
	for _, s := range []string{
		"cat .env", "grep -r KEY .", "rg -uu KEY | head", "cp .env /tmp/x", "git show HEAD:.env",
		"head -c 100 secrets/k", "echo x > .git/config", "cat ~/.bashrc", "rg -L KEY", "grep -R x .",
		"cat src/../.ENV", "sed -i s/a/b/ .gitattributes", "echo $(rg KEY)", "cp -r secrets /tmp",
	} {
		f.Add(s)
	}
	p := mustParse(f, filesPolicy)
	env := Env{Workspace: "/work/repo", Cwd: "/work/repo"}
	f.Fuzz(func(t *testing.T, cmd string) {
		r := p.EvaluateIn(env, "Bash", map[string]any{"command": cmd})
		if r.Verdict != VerdictAllow {
			return
		}
		final := cmd
		if r.UpdatedInput != nil {
			final, _ = r.UpdatedInput["command"].(string)
			again := p.EvaluateIn(env, "Bash", r.UpdatedInput)
			if again.Verdict != VerdictAllow || again.UpdatedInput != nil {
				t.Fatalf("%q narrowed to %q, which is %v %v (%s)", cmd, final, again.Verdict, again.UpdatedInput, again.Reason)
			}
		}
		c := &call{Call: NewCall("Bash", map[string]any{"command": final}), env: env}
		if why := c.bashProtectedWrite(); why != "" {
			t.Fatalf("allowed %q, which %s", final, why)
		}
		if deny, ask, narrow := p.bashFiles(c); deny != nil || ask != nil || narrow != nil {
			t.Fatalf("allowed %q, which the file rules refuse or narrow", final)
		}
	})
}
