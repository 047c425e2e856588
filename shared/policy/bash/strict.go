package bash

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// strictCommand is one simple command of a line the strict analysis
// accepted: its words after quote removal, and which of them are unquoted
// glob, brace or tilde patterns (the shell expands those, so their text is
// not what the program receives).
type strictCommand struct {
	words []string
	glob  []bool
}

// wrappers run another command, or change how it runs, so a prefix on the
// wrapper cannot describe what actually runs. They never match strictly.
var wrappers = map[string]bool{
	"eval": true, "exec": true, "env": true, "command": true, "builtin": true,
	"nohup": true, "sudo": true, "doas": true, "su": true, "pkexec": true, "runuser": true,
	"timeout": true, "nice": true, "ionice": true, "stdbuf": true, "setsid": true,
	"xargs": true, "parallel": true, "watch": true, "time": true, "chroot": true,
	"unbuffer": true, "strace": true, "ltrace": true, "flock": true, "nsenter": true,
	"unshare": true, "script": true, "busybox": true, "source": true, ".": true,
	"trap": true, "alias": true, "unalias": true, "fc": true, "enable": true,
	"coproc": true, "declare": true, "typeset": true, "export": true, "readonly": true,
	"local": true, "let": true, "set": true, "shopt": true, "hash": true, "taskset": true,
	"chrt": true, "prlimit": true, "fakeroot": true, "cd": true, "pushd": true, "popd": true,
	"umask": true, "ulimit": true, "unset": true, "bind": true, "complete": true,
}

// shells run a script given with -c, a file or stdin.
var shells = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "dash": true, "zsh": true, "ksh": true,
	"mksh": true, "ash": true, "yash": true, "posh": true, "fish": true, "csh": true,
	"tcsh": true,
}

// gitSafeGlobals are git options before the subcommand that only reduce
// what git does; the strict form drops them so that "git --no-pager diff"
// is judged as "git diff". Every other option before the subcommand
// (-c, -C, --git-dir, --exec-path, --config-env, ...) can make git load
// another configuration or binary, so it makes the line not strict, even
// for a rule that opts in to any options.
var gitSafeGlobals = map[string]bool{
	"--no-pager": true, "-P": true, "--no-optional-locks": true,
	"--literal-pathspecs": true, "--no-replace-objects": true,
}

// analyzeStrict accepts a line of simple commands joined by ';', newlines,
// '&&', '||' and pipes (a compound line is judged part by part), with
// nothing else in it: no subshell or other compound command, background
// job, substitution, expansion, assignment or redirection to a file.
func analyzeStrict(f *syntax.File) ([]strictCommand, string) {
	if len(f.Stmts) == 0 {
		return nil, "empty command"
	}
	b := &strictBuf{compound: len(f.Stmts) > 1}
	if _, ok := f.Stmts[0].Cmd.(*syntax.BinaryCmd); ok {
		b.compound = true
	}
	for _, s := range f.Stmts {
		if why := strictStmt(s, b); why != "" {
			return nil, why
		}
	}
	return b.cmds, ""
}

// strictBuf collects the simple commands of a line; their words share
// backing arrays that grow by doubling, since a compound line has many
// short commands and each slice of its own is most of the cost.
type strictBuf struct {
	cmds  []strictCommand
	words []string
	glob  []bool
	// compound: the line has more than one simple command, so a reason
	// names the part it is about.
	compound bool
}

// part names, in a compound line, the simple command a reason is about:
// "part 2 (`touch`): why".
func (b *strictBuf) part(c *syntax.CallExpr, why string) string {
	if !b.compound || why == "" {
		return why
	}
	prog := "a command"
	if c != nil && len(c.Args) > 0 {
		if w := convertWord(c.Args[0]); !w.dynamic {
			prog = quoteWord(basename(w.text))
		}
	}
	return fmt.Sprintf("part %d (%s): %s", len(b.cmds)+1, prog, why)
}

func strictStmt(s *syntax.Stmt, out *strictBuf) string {
	switch {
	case s.Background:
		return "runs in the background ('&')"
	case s.Coprocess, s.Disown:
		return "coprocess or disowned job"
	}
	call, _ := s.Cmd.(*syntax.CallExpr)
	for _, r := range s.Redirs {
		if why := strictRedirect(r); why != "" {
			return out.part(call, why)
		}
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		return out.part(c, strictCall(c, out))
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.Pipe, syntax.PipeAll, syntax.AndStmt, syntax.OrStmt:
		default:
			return fmt.Sprintf("command list with %q", c.Op.String())
		}
		if why := strictStmt(c.X, out); why != "" {
			return why
		}
		return strictStmt(c.Y, out)
	case nil:
		return "empty command"
	default:
		return fmt.Sprintf("compound command (%s)", nodeName(c))
	}
}

func nodeName(c syntax.Command) string {
	switch c.(type) {
	case *syntax.Subshell:
		return "subshell"
	case *syntax.Block:
		return "block"
	case *syntax.IfClause:
		return "if"
	case *syntax.WhileClause:
		return "while/until"
	case *syntax.ForClause:
		return "for"
	case *syntax.CaseClause:
		return "case"
	case *syntax.FuncDecl:
		return "function"
	case *syntax.ArithmCmd:
		return "arithmetic"
	case *syntax.TestClause:
		return "[[ test ]]"
	case *syntax.DeclClause:
		return "declaration"
	case *syntax.LetClause:
		return "let"
	case *syntax.TimeClause:
		return "time"
	case *syntax.CoprocClause:
		return "coproc"
	default:
		return fmt.Sprintf("%T", c)
	}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// strictRedirect accepts redirections that neither write files nor feed
// hidden input: output to /dev/null, fd duplication (2>&1), and input from a
// literal file.
func strictRedirect(r *syntax.Redirect) string {
	if r.N != nil && !isDigits(r.N.Value) {
		return "redirection with a named file descriptor"
	}
	target, static := literalText(r.Word)
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		if static && target == "/dev/null" {
			return ""
		}
		return fmt.Sprintf("output redirection %q to a file", r.Op.String())
	case syntax.DplOut, syntax.DplIn:
		if static && (isDigits(target) || target == "-") {
			return ""
		}
		return fmt.Sprintf("redirection %q to a file", r.Op.String())
	case syntax.RdrIn:
		if static && target != "" && (!strings.HasPrefix(target, "/dev/") || target == "/dev/null") {
			return ""
		}
		return "input redirection from a non-literal or device file"
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return "here-document or here-string"
	default:
		return fmt.Sprintf("redirection %q", r.Op.String())
	}
}

func strictCall(c *syntax.CallExpr, b *strictBuf) string {
	if len(c.Assigns) > 0 {
		return "environment assignment before the command"
	}
	if len(c.Args) == 0 {
		return "empty command"
	}
	start := len(b.words)
	for i, w := range c.Args {
		cw := convertWord(w)
		switch {
		case !cw.dynamic:
		case i > 0 && cw.glob:
		case cw.execs:
			return "command substitution, process substitution or arithmetic expansion"
		case i == 0:
			return "program name is not a literal word"
		default:
			return fmt.Sprintf("word %d is an expansion", i)
		}
		b.words = append(b.words, cw.text)
		b.glob = append(b.glob, cw.dynamic)
	}
	words, glob := b.words[start:], b.glob[start:]
	prog := basename(words[0])
	switch {
	case wrappers[prog]:
		return fmt.Sprintf("%s runs or alters another command", quoteWord(prog))
	case shells[prog]:
		return fmt.Sprintf("%s runs a script", quoteWord(prog))
	case prog == "git":
		// Drop the global options that only reduce what git does, in
		// place: these words are the tail of the buffer.
		i := 1
		for ; i < len(words) && !glob[i] && strings.HasPrefix(words[i], "-") && words[i] != "--version"; i++ {
			if !gitSafeGlobals[words[i]] {
				return fmt.Sprintf("git option %s before the subcommand", quoteWord(words[i]))
			}
		}
		n := 1 + copy(words[1:], words[i:])
		copy(glob[1:], glob[i:])
		b.words, b.glob = b.words[:start+n], b.glob[:start+n]
		words, glob = words[:n], glob[:n]
	}
	// Full slice expressions: an append to one command's words can never
	// write into the next command's.
	b.cmds = append(b.cmds, strictCommand{words: words[:len(words):len(words)], glob: glob[:len(glob):len(glob)]})
	return ""
}

// prefixOf reports whether the command starts with the prefix's literal
// words; a pattern word never matches a prefix word.
func (c strictCommand) prefixOf(p *Prefix) bool {
	if p == nil || len(p.words) == 0 || len(p.words) > len(c.words) {
		return false
	}
	for j, w := range p.words {
		if c.glob[j] || c.words[j] != w {
			return false
		}
	}
	return true
}

// allowedBy judges the command against an allow prefix: the prefix's words,
// then words that are safe for the program by the catalogue, or, when the
// rule opts in (anyOptions), any words but those that change what a project
// runner runs or where, and pattern words that could expand to an option.
func (c strictCommand) allowedBy(p *Prefix, anyOptions bool) (bool, string) {
	if !c.prefixOf(p) {
		return false, ""
	}
	n := len(p.words)
	if len(c.words) == n {
		return true, ""
	}
	if anyOptions {
		for j := n; j < len(c.words); j++ {
			if c.glob[j] && optionLike(c.words[j]) {
				return false, fmt.Sprintf("unquoted pattern %s could expand to an option", quotePattern(c.words[j]))
			}
		}
		if why := runnerSafe(c.words, c.glob, n); why != "" {
			return false, why
		}
		return true, ""
	}
	why := catalogueSafe(c.words, c.glob, n)
	switch why {
	case "":
		return true, ""
	case errTrusted:
		return false, "the words after the prefix are not read-only by the catalogue"
	}
	return false, why
}
