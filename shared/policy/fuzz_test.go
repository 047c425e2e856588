package policy

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name":"default","default_verdict":"require_approval","approval":{"scope":"once","ttl_seconds":900},"autonomy":{"on_approval_rule":"deny"},"rules":[{"id":"git-read","tool":"Bash","match":{"command_prefix":["git status","git diff"]},"verdict":"allow"},{"id":"src-write","tool":"Write","match":{"path":["src/**"]},"verdict":"allow"},{"id":"jira-field","tool":"mcp__jira__create_issue","match":{"input":{"/project":["OPS"]}},"verdict":"deny"}]}`))
	f.Add([]byte("name: x\ndefault_verdict: deny\nrules:\n  - {id: a, tool: 'mcp__*', verdict: allow, match: {input: {/a/0: ['x*']}}}\n"))
	f.Add([]byte(`{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"Bash","match":{"command_prefix":["ls && rm", ""]},"verdict":"allow"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, warns, err := Parse(data)
		if err != nil {
			if p != nil || warns != nil {
				t.Fatalf("Parse(%q) returned a policy or warnings with error %v", data, err)
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
// oracle on the syntax tree, one simple command or a pipeline of simple
// commands whose programs are allowed, with no substitution, expansion,
// eval, shell -c, list operator or assignment anywhere; and, on the raw
// string, that no list operator or substitution can appear outside quotes.
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
		if len(file.Stmts) != 1 {
			t.Fatalf("allowed %q with %d statements", cmd, len(file.Stmts))
		}
		bad := ""
		syntax.Walk(file, func(n syntax.Node) bool {
			switch x := n.(type) {
			case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp, *syntax.ParamExp,
				*syntax.Subshell, *syntax.Block, *syntax.FuncDecl, *syntax.IfClause,
				*syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause, *syntax.DeclClause,
				*syntax.LetClause, *syntax.ArithmCmd, *syntax.TestClause, *syntax.TimeClause,
				*syntax.CoprocClause, *syntax.Assign:
				bad = "forbidden node"
			case *syntax.Stmt:
				if x.Background || x.Coprocess || x.Disown {
					bad = "background"
				}
			case *syntax.BinaryCmd:
				if x.Op != syntax.Pipe && x.Op != syntax.PipeAll {
					bad = "list operator " + x.Op.String()
				}
			case *syntax.Redirect:
				if x.Op == syntax.Hdoc || x.Op == syntax.DashHdoc || x.Op == syntax.WordHdoc {
					bad = "here-document"
				}
				if x.Op == syntax.RdrOut || x.Op == syntax.AppOut || x.Op == syntax.RdrAll || x.Op == syntax.AppAll || x.Op == syntax.RdrClob {
					if x.Word.Lit() != "/dev/null" {
						bad = "output redirection"
					}
				}
			case *syntax.CallExpr:
				prog := x.Args[0]
				lit := oracleLit(prog)
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
			}
			return bad == ""
		})
		if bad != "" {
			t.Fatalf("allowed %q: %s", cmd, bad)
		}
		// String oracle: outside single quotes, no unescaped "$(" or
		// backtick, and outside any quotes no ';', '&&', '||'.
		if unquotedContains(cmd) {
			t.Fatalf("allowed %q which has an unquoted operator or substitution", cmd)
		}
	})
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
	const (
		none = iota
		single
		double
	)
	state := none
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch state {
		case single:
			if c == '\'' {
				state = none
			}
			continue
		case double:
			switch c {
			case '\\':
				i++
			case '"':
				state = none
			case '`':
				return true
			case '$':
				if i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{') {
					return true
				}
			}
			continue
		}
		switch c {
		case '#':
			// A comment runs to the end of the line when it starts a word.
			// Newlines as separators are left to the tree oracle.
			if i == 0 || strings.IndexByte(" \t\n;&|()<>", s[i-1]) >= 0 {
				for i < len(s) && s[i] != '\n' {
					i++
				}
			}
		case '\\':
			i++
		case '\'':
			state = single
		case '"':
			state = double
		case '`', ';':
			if c == ';' && strings.TrimSpace(s[i+1:]) == "" {
				continue // a trailing ';' ends the only command
			}
			return true
		case '$':
			if i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{' || s[i+1] == '\'') {
				return true
			}
		case '&':
			if i+1 < len(s) && s[i+1] == '&' {
				return true
			}
			if i == 0 || s[i-1] != '>' && s[i-1] != '<' {
				if i+1 >= len(s) || s[i+1] != '>' {
					return true // background
				}
			}
		case '|':
			if i+1 < len(s) && s[i+1] == '|' {
				return true
			}
		case '<', '>':
			if i+1 < len(s) && s[i+1] == '(' {
				return true
			}
		}
	}
	return false
}
