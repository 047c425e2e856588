package bash

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// strictCommand is one pipeline element accepted by the strict analysis.
type strictCommand struct {
	words []string
	// firstGlob is the index of the first word with an unquoted glob, or
	// len(words). A prefix may only cover words before it.
	firstGlob int
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
	"local": true, "let": true, "set": true, "shopt": true,
}

// shells run a script given with -c or read from stdin.
var shells = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "dash": true, "zsh": true, "ksh": true,
	"mksh": true, "ash": true, "yash": true, "posh": true, "fish": true, "csh": true,
	"tcsh": true,
}

// gitSafeGlobals are git options before the subcommand that only reduce
// what git does; the strict form drops them so that "git --no-pager diff"
// is judged as "git diff". Every other option before the subcommand
// (-c, -C, --git-dir, --exec-path, --config-env, ...) can make git load
// another configuration or binary, so it makes the line not strict.
var gitSafeGlobals = map[string]bool{
	"--no-pager": true, "-P": true, "--no-optional-locks": true,
	"--literal-pathspecs": true, "--no-replace-objects": true,
}

// gitExecOptions are git arguments, anywhere after the subcommand, that name
// a program or template for git to run.
var gitExecOptions = []string{
	"--upload-pack", "--receive-pack", "--exec", "--config", "--template",
	"--open-files-in-pager", "--extcmd", "--tool",
}

// findExecOptions run a command or write files from find.
var findExecOptions = map[string]bool{
	"-exec": true, "-execdir": true, "-ok": true, "-okdir": true, "-delete": true,
	"-fprint": true, "-fprint0": true, "-fprintf": true, "-fls": true,
}

func analyzeStrict(f *syntax.File) ([]strictCommand, string) {
	if len(f.Stmts) != 1 {
		if len(f.Stmts) == 0 {
			return nil, "empty command"
		}
		return nil, "more than one command (';', '&' or newline)"
	}
	var out []strictCommand
	why := strictStmt(f.Stmts[0], &out)
	return out, why
}

func strictStmt(s *syntax.Stmt, out *[]strictCommand) string {
	switch {
	case s.Background:
		return "runs in the background ('&')"
	case s.Coprocess, s.Disown:
		return "coprocess or disowned job"
	}
	for _, r := range s.Redirs {
		if why := strictRedirect(r); why != "" {
			return why
		}
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		cmd, why := strictCall(c)
		if why != "" {
			return why
		}
		*out = append(*out, cmd)
		return ""
	case *syntax.BinaryCmd:
		if c.Op != syntax.Pipe && c.Op != syntax.PipeAll {
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

func strictCall(c *syntax.CallExpr) (strictCommand, string) {
	if len(c.Assigns) > 0 {
		return strictCommand{}, "environment assignment before the command"
	}
	if len(c.Args) == 0 {
		return strictCommand{}, "empty command"
	}
	cmd := strictCommand{words: make([]string, 0, len(c.Args)), firstGlob: len(c.Args)}
	for i, w := range c.Args {
		cw := convertWord(w)
		switch {
		case !cw.dynamic:
		case i > 0 && cw.glob:
			if cmd.firstGlob > i {
				cmd.firstGlob = i
			}
		case cw.execs:
			return strictCommand{}, "command substitution, process substitution or arithmetic expansion"
		case i == 0:
			return strictCommand{}, "program name is not a literal word"
		default:
			return strictCommand{}, fmt.Sprintf("word %d is an expansion", i)
		}
		cmd.words = append(cmd.words, cw.text)
	}
	prog := basename(cmd.words[0])
	switch {
	case wrappers[prog]:
		return strictCommand{}, fmt.Sprintf("%q runs or alters another command", prog)
	case shells[prog]:
		if why := strictShell(cmd); why != "" {
			return strictCommand{}, why
		}
	case prog == "find":
		if cmd.firstGlob < len(cmd.words) {
			return strictCommand{}, "find with an unquoted glob"
		}
		for _, w := range cmd.words[1:] {
			if findExecOptions[w] {
				return strictCommand{}, fmt.Sprintf("find %s", w)
			}
		}
	case prog == "git":
		return strictGit(cmd)
	}
	return cmd, ""
}

func strictShell(cmd strictCommand) string {
	script := false
	for _, w := range cmd.words[1:] {
		if len(w) > 1 && (w[0] == '-' || w[0] == '+') {
			if strings.ContainsRune(w, 'c') {
				return "shell with -c"
			}
			continue
		}
		script = true
	}
	if !script {
		return "shell reading commands from stdin"
	}
	return ""
}

func strictGit(cmd strictCommand) (strictCommand, string) {
	if cmd.firstGlob < len(cmd.words) {
		return strictCommand{}, "git with an unquoted glob"
	}
	out := strictCommand{words: []string{cmd.words[0]}}
	i := 1
	for ; i < len(cmd.words) && strings.HasPrefix(cmd.words[i], "-"); i++ {
		if !gitSafeGlobals[cmd.words[i]] {
			return strictCommand{}, fmt.Sprintf("git option %q before the subcommand", cmd.words[i])
		}
	}
	out.words = append(out.words, cmd.words[i:]...)
	out.firstGlob = len(out.words)
	if i >= len(cmd.words) {
		return out, ""
	}
	sub, args := cmd.words[i], cmd.words[i+1:]
	for _, a := range args {
		for _, opt := range gitExecOptions {
			if a == opt || strings.HasPrefix(a, opt+"=") || strings.HasPrefix(a, opt+"-") {
				return strictCommand{}, fmt.Sprintf("git option %q", a)
			}
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' {
			var bad string
			switch sub {
			case "clone":
				bad = "cu"
			case "grep":
				bad = "O"
			case "rebase", "difftool", "mergetool":
				bad = "xt"
			}
			if bad != "" && strings.ContainsAny(a[1:], bad) {
				return strictCommand{}, fmt.Sprintf("git %s option %q", sub, a)
			}
		}
	}
	switch sub {
	case "filter-branch", "filter-repo":
		return strictCommand{}, "git " + sub + " runs commands"
	case "submodule", "bisect":
		for _, a := range args {
			if a == "foreach" || a == "run" {
				return strictCommand{}, "git " + sub + " " + a + " runs commands"
			}
		}
	}
	return out, ""
}
