package bash

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// looseCommand is one simple command the line could run, normalized.
type looseCommand struct {
	words []word
	// dir is the directory a literal cd before it moved to ("" for the
	// line's own), for the paths it writes; anyDir: a cd before it went
	// somewhere known only at run time.
	dir    string
	anyDir bool
}

// hasPrefix matches literal prefix words, reading a dynamic word as "any one
// word" and a word that may split as "anything from here on".
func (c looseCommand) hasPrefix(p []string) bool {
	for i, pw := range p {
		if i >= len(c.words) {
			return false
		}
		w := c.words[i]
		if w.dynamic {
			if w.split {
				return true
			}
			continue
		}
		if w.text != pw {
			return false
		}
	}
	return true
}

type normalizer struct {
	cmds []looseCommand
	// redirected are the files output redirections write; anyDir is set
	// when the line changes to a directory known only at run time, so
	// that a relative path written after it may be anywhere.
	redirected []word
	// redirectedIn are the files input redirections read.
	redirectedIn []word
	anyDir       bool
	// dir is the directory literal cd words moved to, "" for the start.
	dir string
	// configWrite says why the line writes git's configuration without
	// naming the file ("" when it does not).
	configWrite string
	opaqueWhy   string
	// runsWhy is set when a simple command runs another command given in
	// its words (git rebase --exec, git bisect run): the analysis sees it,
	// but no allow prefix on the outer command may cover it.
	runsWhy string
	budget  int
}

func (n *normalizer) opaque(why string) {
	if n.opaqueWhy == "" {
		n.opaqueWhy = why
	}
}

// script re-parses text that a shell would run as code. When mustParse is
// false the text is only possibly code (a quoted string containing "$(",
// an assignment value), so a failure to parse it is not suspicious.
//
// When the depth or the re-parse budget is used up, the line is opaque
// whatever mustParse says: text that was not read could be anything, and
// skipping it would let a line hide a command behind harmless strings.
func (n *normalizer) script(text string, depth int, mustParse bool, what string) {
	if depth > maxDepth || n.budget <= 0 {
		n.opaque("the analysis budget ran out (" + what + " nested too deeply, or too many strings to re-read)")
		return
	}
	n.budget--
	f, err := parse(text)
	if err != nil {
		if mustParse {
			n.opaque(what + " does not parse")
		}
		return
	}
	n.file(f, depth)
}

func (n *normalizer) file(f *syntax.File, depth int) { n.walk(f, depth) }

func (n *normalizer) walk(root syntax.Node, depth int) {
	syntax.Walk(root, func(node syntax.Node) bool { return n.visit(node, depth) })
}

// visit reads one node of the syntax tree; false skips what is below it.
func (n *normalizer) visit(node syntax.Node, depth int) bool {
	switch x := node.(type) {
	case *syntax.Stmt:
		n.stmt(x, depth)
	case *syntax.DeclClause:
		n.declClause(x)
	case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause, *syntax.CStyleLoop:
		n.arithmNode(x)
	case *syntax.ParamExp:
		n.paramExp(x)
	case *syntax.UnaryTest, *syntax.BinaryTest:
		n.test(x)
	case *syntax.Assign:
		n.assign(x, depth)
	case *syntax.Redirect:
		n.redirect(x)
	case *syntax.FuncDecl:
		if x.Name != nil && x.Name.Value == "command_not_found_handle" {
			n.opaque("a command_not_found_handle function runs for every unknown program")
		}
	case *syntax.Word:
		return n.literalWord(x, depth)
	case *syntax.Lit:
		n.maybeCode(x.Value, depth)
	case *syntax.SglQuoted:
		n.maybeCode(x.Value, depth)
	}
	return true
}

// stmt reads a simple command.
func (n *normalizer) stmt(x *syntax.Stmt, depth int) {
	call, ok := x.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return
	}
	words := make([]word, len(call.Args))
	for i, w := range call.Args {
		words[i] = convertWord(w)
	}
	n.command(words, x.Redirs, depth)
}

// declClause reads declare, local, typeset and the like.
func (n *normalizer) declClause(x *syntax.DeclClause) {
	if x.Variant != nil {
		n.emit([]word{{text: x.Variant.Value}})
	}
	for _, a := range x.Args {
		if !a.Naked || a.Value == nil {
			continue
		}
		if cw := convertWord(a.Value); cw.dynamic || strings.HasPrefix(cw.text, "-") && strings.ContainsAny(cw.text, "in") {
			n.opaque("a declaration of an integer or a name reference evaluates values as expressions, which can run a command")
		}
	}
}

// arithmNode reads the arithmetic expressions of $((...)), ((...)), let
// and a C-style for loop.
func (n *normalizer) arithmNode(node syntax.Node) {
	switch x := node.(type) {
	case *syntax.ArithmExp:
		n.arithm(x.X)
	case *syntax.ArithmCmd:
		n.arithm(x.X)
	case *syntax.LetClause:
		for _, e := range x.Exprs {
			n.arithm(e)
		}
	case *syntax.CStyleLoop:
		n.arithm(x.Init)
		n.arithm(x.Cond)
		n.arithm(x.Post)
	}
}

// paramExp reads a parameter expansion's subscript, slice and operators.
func (n *normalizer) paramExp(x *syntax.ParamExp) {
	if x.Index != nil && !wholeArray(x.Index) {
		n.arithm(x.Index)
	}
	if x.Slice != nil {
		n.arithm(x.Slice.Offset)
		n.arithm(x.Slice.Length)
	}
	if x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && (x.Exp.Word == nil || !strings.Contains("QEaAKkUuL", x.Exp.Word.Lit()) || len(x.Exp.Word.Lit()) != 1) {
		n.opaque("a ${x@P} prompt expansion runs the substitutions in a value known only at run time")
	}
	if x.Excl && x.Names == 0 && x.Index == nil {
		n.opaque("an indirect expansion names its variable at run time, and a subscript in that name can run a command")
	}
}

// test reads the [[ ]] tests that evaluate their operands: -v of a name,
// and the integer comparisons.
func (n *normalizer) test(node syntax.Node) {
	switch x := node.(type) {
	case *syntax.UnaryTest:
		if x.Op != syntax.TsVarSet && x.Op != syntax.TsRefVar {
			return
		}
		if w, ok := x.X.(*syntax.Word); !ok || !literalParts(w) {
			n.opaque("[[ -v ]] of a name known only at run time expands a subscript in it, which can run a command")
		}
	case *syntax.BinaryTest:
		switch x.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
		default:
			return
		}
		for _, side := range []syntax.TestExpr{x.X, x.Y} {
			if w, ok := side.(*syntax.Word); !ok || !numericWord(w) {
				n.opaque("a [[ ]] integer comparison evaluates its operands as arithmetic expressions, which can run a command")
			}
		}
	}
}

// assign reads an assignment: its name, subscript and value. Values of
// assignments may be run later by the program (GIT_SSH_COMMAND, PAGER,
// PROMPT_COMMAND, ...).
func (n *normalizer) assign(x *syntax.Assign, depth int) {
	if x.Name != nil {
		n.assignment(x.Name.Value)
	}
	if x.Index != nil {
		n.arithm(x.Index)
	}
	if x.Value != nil {
		if cw := convertWord(x.Value); !cw.dynamic {
			n.script(cw.text, depth+1, false, "assignment value")
		}
	}
}

// literalWord reads a word made only of literal text, which has nothing below
// it but that text, here, and skips the descent (false), which is most of
// the nodes of a long line; any other word is descended into (true). The
// parts are read joined: a substitution may be split across them
// ('a[$'"(cmd)]").
func (n *normalizer) literalWord(x *syntax.Word, depth int) bool {
	if !literalParts(x) {
		return true
	}
	if len(x.Parts) == 1 {
		switch p := x.Parts[0].(type) {
		case *syntax.Lit:
			n.maybeCode(p.Value, depth)
			return false
		case *syntax.SglQuoted:
			n.maybeCode(p.Value, depth)
			return false
		}
	}
	var b strings.Builder
	for _, part := range x.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				b.WriteString(dp.(*syntax.Lit).Value)
			}
		}
	}
	n.maybeCode(b.String(), depth)
	return false
}

// arithm reads an arithmetic expression. bash evaluates the value of a
// variable read in one as an expression in turn, with its subscripts
// expanded, so a value such as a[$(cmd)] runs cmd; the value may come from
// a file, stdin or pieces joined at run time. An expression that reads a
// variable (or a substitution's output) is therefore opaque; numbers and
// the shell's own counters ($#, $?, ${#x}, ...) are not.
func (n *normalizer) arithm(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(node syntax.Node) bool {
		w, ok := node.(*syntax.Word)
		if !ok {
			return true
		}
		if !numericWord(w) {
			n.opaque("an arithmetic expression reads a variable, whose value bash evaluates as an expression that can run a command")
		}
		return false
	})
}

// wholeArray: the subscript of ${a[@]} or ${a[*]}, which is not arithmetic.
func wholeArray(x syntax.ArithmExpr) bool {
	w, ok := x.(*syntax.Word)
	if !ok {
		return false
	}
	lit := w.Lit()
	return lit == "@" || lit == "*"
}

// numericWord: an arithmetic operand that is a number (10, 0x1f, 2#101) or
// one of the shell's numeric parameters, never a variable's text.
func numericWord(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		return arithmNumber().MatchString(p.Value)
	case *syntax.ParamExp:
		if p.Param == nil || p.Index != nil || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Excl || p.Names != 0 {
			return false
		}
		if p.Length {
			return true
		}
		switch p.Param.Value {
		case "#", "?", "$", "!", "RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID", "EUID":
			return true
		}
	}
	return false
}

var arithmNumber = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([0-9]+#[0-9A-Za-z@_]+|0[xX][0-9A-Fa-f]+|[0-9]+)$`)
})

// literalParts reports whether every part of w is literal text: a literal,
// a single-quoted string, or a double-quoted string of literals only.
func literalParts(w *syntax.Word) bool {
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				if _, ok := dp.(*syntax.Lit); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// maybeCode re-parses quoted text that contains a substitution, so that
// x='a[$(git push)]' followed by an arithmetic use of x is still seen.
// The text is read twice: as a script, and as the body of an unquoted
// here-document (where only expansions are special), which finds
// substitutions even in text that is not itself valid shell.
func (n *normalizer) maybeCode(s string, depth int) {
	if !codeChars.in(s) {
		return
	}
	if !strings.Contains(s, "$(") && !strings.Contains(s, "`") && !strings.Contains(s, "<(") && !strings.Contains(s, ">(") && !strings.Contains(s, "${") {
		return
	}
	n.script(s, depth+1, false, "quoted text")
	if depth+1 > maxDepth || n.budget <= 0 || len(s) > MaxCommandBytes {
		n.opaque("the analysis budget ran out (quoted text nested too deeply, or too many strings to re-read)")
		return
	}
	n.budget--
	w, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Document(strings.NewReader(s))
	if err != nil || w == nil || len(w.Parts) == 0 {
		return
	}
	n.walk(w, depth+1)
}

// emit records a command the line could run. The words are shared with
// the caller's slice, which nothing writes to once converted; only a
// program named by a path gets a copy, with its base name.
func (n *normalizer) emit(words []word) {
	c := looseCommand{words: words, dir: n.dir, anyDir: n.anyDir}
	if len(words) > 0 && !words[0].dynamic {
		if b := basename(words[0].text); b != words[0].text {
			c.words = append([]word(nil), words...)
			c.words[0].text = b
		}
	}
	n.cmds = append(n.cmds, c)
}

// maxReadings bounds the ways one wrapper's options are read; a line with
// more is opaque.
const maxReadings = 16

// optionReadings returns where the command a wrapper runs may start: one
// rest of words for each way the wrapper may read its leading options
// (getopt_long). shortArg lists short options that take a value (attached,
// or the next word); longArg long options that take the next word as value.
// getopt_long also takes any unambiguous abbreviation of a long option
// (--sig for --signal), and the analyser does not know every long option
// of every wrapper and version, so a long option without "=" that is not
// exactly in longArg is read both ways: taking the next word and not. A
// dynamic word ends the options: it may be anything, so it is read as the
// program. A short option in unsure may or may not take a value ("*": any
// short option not in shortArg), and is read both ways too. ok is false
// when there are more than maxReadings readings.
func optionReadings(words []word, shortArg, unsure string, longArg ...string) (rests [][]word, ok bool) {
	var walk func(i int) bool
	add := func(rest []word) bool {
		if len(rests) >= maxReadings {
			return false
		}
		rests = append(rests, rest)
		return true
	}
	walk = func(i int) bool {
		for i < len(words) {
			w := words[i]
			if w.dynamic {
				return add(words[i:])
			}
			t := w.text
			switch {
			case t == "--":
				return add(words[i+1:])
			case strings.HasPrefix(t, "--"):
				i++
				if strings.Contains(t, "=") {
					continue
				}
				if slices.Contains(longArg, t) {
					i++
					continue
				}
				// Perhaps an option taking a value: read that way too.
				if !walk(min(i+1, len(words))) {
					return false
				}
			case len(t) > 1 && t[0] == '-':
				i++
				for j := 1; j < len(t); j++ {
					c := t[j]
					if strings.IndexByte(shortArg, c) >= 0 {
						if j == len(t)-1 {
							i++ // the value is the next word
						}
						break
					}
					if unsure == "*" || strings.IndexByte(unsure, c) >= 0 {
						// Perhaps it takes a value: the rest of the
						// cluster, else the next word.
						next := i
						if j == len(t)-1 {
							next = min(i+1, len(words))
						}
						if !walk(next) {
							return false
						}
					}
				}
			default:
				return add(words[i:])
			}
		}
		return add(nil)
	}
	ok = walk(1)
	return rests, ok
}

// skipAssignments drops NAME=value words (env, sudo).
func (n *normalizer) skipAssignments(words []word, depth int) []word {
	for len(words) > 0 && !words[0].dynamic {
		name, value, ok := strings.Cut(words[0].text, "=")
		if !ok || !validName(name) {
			break
		}
		n.assignment(name)
		n.script(value, depth+1, false, "assignment value")
		words = words[1:]
	}
	return words
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// joinStatic joins words into one script text; ok is false when a word is
// dynamic.
func joinStatic(words []word) (string, bool) {
	parts := make([]string, len(words))
	for i, w := range words {
		if w.dynamic {
			return "", false
		}
		parts[i] = w.text
	}
	return strings.Join(parts, " "), true
}

// wrapperGrammar is how a known wrapper reads its own words before the
// command it runs, so that deny rules see that command.
type wrapperGrammar struct {
	short string // short options that take a value (attached or next word)
	// unsure: short options that may take a value ("*": any not in
	// short), for wrappers whose options differ between versions.
	unsure string
	long   []string // long options that take the next word as value
	// operands before the command (timeout's duration, taskset's mask).
	operands int
	// stop: options after which no command follows (command -v, taskset -p).
	stop []string
	// bare: what the wrapper runs without a command ("" for nothing).
	bare string
}

var wrapperGrammars = map[string]wrapperGrammar{
	"nice":     {short: "n", long: []string{"--adjustment"}},
	"nohup":    {},
	"setsid":   {},
	"builtin":  {},
	"unbuffer": {},
	"stdbuf":   {short: "ioe", long: []string{"--input", "--output", "--error"}},
	"timeout":  {short: "sk", long: []string{"--signal", "--kill-after"}, operands: 1},
	"ionice":   {short: "cnpPu", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}, stop: []string{"-p", "--pid", "-P", "--pgid", "-u", "--uid"}},
	"time":     {short: "fo", long: []string{"--format", "--output"}},
	"command":  {stop: []string{"-v", "-V"}},
	"exec":     {short: "a"},
	"strace":   {short: "abeEIoOpPsSuUX", unsure: "*"},
	"ltrace":   {short: "aADeFlnopsux", unsure: "*"},
	"taskset":  {operands: 1, stop: []string{"-p", "--pid"}},
	"chrt":     {short: "TPD", long: []string{"--sched-runtime", "--sched-period", "--sched-deadline"}, operands: 1, stop: []string{"-p", "--pid", "-m", "--max"}},
	"prlimit":  {short: "p", long: []string{"--pid"}, stop: []string{"-p", "--pid"}},
	"unshare":  {short: "SGRw", long: []string{"--setuid", "--setgid", "--root", "--wd"}, bare: "a shell"},
	"nsenter":  {short: "tSG", long: []string{"--target", "--setuid", "--setgid"}, bare: "a shell"},
	"fakeroot": {short: "lsib", long: []string{"--lib", "--faked"}, bare: "a shell"},
	"chroot":   {long: []string{"--userspec", "--groups"}, operands: 1, bare: "a shell"},
}

// runsOther lists programs that run another program in a way the analyser
// does not follow (sandboxes, remote shells, container exec, supervisors,
// benchmark harnesses): a line with one is opaque.
var runsOther = map[string]bool{
	"firejail": true, "bwrap": true, "proot": true, "systemd-run": true, "newgrp": true,
	"valgrind": true, "perf": true, "faketime": true, "proxychains": true, "proxychains4": true,
	"torsocks": true, "tsocks": true, "daemonize": true, "start-stop-daemon": true,
	"screen": true, "tmux": true, "dtach": true, "rlwrap": true, "sshpass": true, "ssh": true,
	"setpriv": true, "capsh": true, "numactl": true, "cgexec": true, "catchsegv": true,
	"nocache": true, "eatmydata": true, "chpst": true, "softlimit": true, "envdir": true,
	"setuidgid": true, "entr": true, "nodemon": true, "xvfb-run": true, "dbus-launch": true,
	"pkexec": true, "machinectl": true, "cpulimit": true, "trickle": true, "tini": true,
	"dumb-init": true, "gosu": true, "su-exec": true, "chronic": true, "hyperfine": true,
	"retry": true, "winpty": true, "expect": true, "parallel": true, "xargs": true,
	"sg": true, "dbus-run-session": true, "flatpak-spawn": true, "at": true, "batch": true,
	"crontab": true, "ifne": true, "pee": true, "ssh-agent": true, "caffeinate": true,
	"sandbox-exec": true, "taskpolicy": true, "runcon": true, "lckdo": true, "setlock": true,
	"envuidgid": true, "timelimit": true, "schedtool": true, "sudoedit": true, "toolbox": true,
	"distrobox-enter": true, "systemd-nspawn": true,
}

// commandOpts are a program's options whose value is a command it runs.
type commandOpts struct {
	short string   // short options, anywhere in a cluster
	long  []string // long options, also abbreviated (getopt_long)
	words []string // options spelt as whole words (zip -TT)
}

// commandOptions lists ordinary programs with such options. Using one
// makes the line opaque; its value, when it can be told, is also read as a
// script so that a deny rule on what it runs still decides.
var commandOptions = map[string]commandOpts{
	"man":     {short: "PH", long: []string{"--pager", "--html"}},
	"tar":     {short: "IF", long: []string{"--to-command", "--use-compress-program", "--checkpoint-action", "--info-script", "--new-volume-script", "--rsh-command", "--rmt-command"}},
	"rsync":   {short: "e", long: []string{"--rsh", "--rsync-path"}},
	"sort":    {long: []string{"--compress-program"}},
	"rg":      {long: []string{"--pre"}},
	"zip":     {long: []string{"--unzip-command"}, words: []string{"-TT"}},
	"tcpdump": {short: "z"},
	"wget":    {long: []string{"--use-askpass"}},
	"scp":     {short: "S"},
	"sftp":    {short: "S"},
}

// interpreters run code given inline (-c, -e), on stdin or in a script
// file, which the analyser does not read: any use but printing their
// version is opaque.
var interpreters = map[string]bool{
	"python": true, "python2": true, "python3": true, "pypy": true, "pypy3": true,
	"perl": true, "ruby": true, "node": true, "nodejs": true, "deno": true, "php": true,
	"lua": true, "luajit": true, "tclsh": true, "wish": true, "Rscript": true, "R": true,
	"julia": true, "osascript": true, "pwsh": true, "powershell": true, "groovy": true,
	"jshell": true, "irb": true, "ghci": true, "runghc": true, "swift": true, "elixir": true,
	"erl": true, "escript": true, "racket": true, "guile": true, "sbcl": true, "clisp": true,
	"sqlite3": true, "psql": true, "mysql": true, "dc": true, "m4": true, "ed": true,
	"red": true, "ex": true, "vi": true, "vim": true, "nvim": true, "view": true, "rvim": true,
	"emacs": true, "gdb": true, "lldb": true, "jrunscript": true, "tsx": true,
	"ts-node": true, "java": true, "jbang": true, "bb": true,
	"source": true, ".": true, "trap": true, "alias": true, "fc": true, "enable": true,
	"bind": true,
}

// builtinRuns says, for the shell builtins among interpreters, how each
// runs text as code.
var builtinRuns = map[string]string{
	"source": "reads and runs a script (a file, stdin or a process substitution)",
	".":      "reads and runs a script (a file, stdin or a process substitution)",
	"trap":   "runs a string as a command on a signal or at exit",
	"alias":  "defines a name that runs a string as a command",
	"fc":     "runs commands again from the history",
	"enable": "loads builtins or turns them on and off, which changes what a name runs",
	"bind":   "binds keys to commands",
}

// interpreter reports whether prog is one, including versioned names
// (python3.12, perl5.36).
func interpreter(prog string) bool {
	if interpreters[prog] {
		return true
	}
	for _, base := range []string{"python", "pypy", "perl", "ruby", "node", "php", "lua", "tclsh"} {
		if strings.HasPrefix(prog, base) && len(prog) > len(base) && strings.Trim(prog[len(base):], "0123456789.") == "" {
			return true
		}
	}
	return false
}

// versionOnly: the words only ask a program for its version or help.
func versionOnly(words []word) bool {
	if len(words) < 2 {
		return false
	}
	for _, w := range words[1:] {
		switch w.text {
		case "--version", "-V", "-v", "--help", "-h", "version", "-version":
		default:
			return false
		}
		if w.dynamic {
			return false
		}
	}
	return true
}

// systemDirs are where a program named by path is still the program its
// base name says; anywhere else the path is a script or binary the
// analyser knows nothing about.
var systemDirs = map[string]bool{
	"/bin": true, "/usr/bin": true, "/usr/local/bin": true, "/sbin": true, "/usr/sbin": true,
	"/usr/local/sbin": true, "/opt/homebrew/bin": true,
}

// program normalizes a literal program word: a system directory is
// dropped; git's own executables (/usr/lib/git-core/git-push, git-push)
// become "git push". ok is false for a program named by any other path.
func program(words []word) ([]word, bool) {
	t := words[0].text
	if i := strings.LastIndexByte(t, '/'); i >= 0 {
		dir := path.Clean(t[:i+1])
		if !systemDirs[dir] && path.Base(dir) != "git-core" {
			return words, false
		}
	}
	base := basename(t)
	if sub, ok := strings.CutPrefix(base, "git-"); ok && sub != "" {
		out := make([]word, 0, len(words)+1)
		out = append(out, word{text: "git"}, word{text: sub})
		return append(out, words[1:]...), true
	}
	return words, true
}

// command records one simple command and, for wrappers, the command they
// run, repeatedly. What it cannot follow makes the line opaque; what it can
// is still recorded, so a deny rule that matches decides before opacity.
// Each round names the program (programWord), follows a wrapper, refuses
// what runs code fluidbox cannot read (runsCode), reads options whose value
// is a command, then hands the program to its reader (byProgram), which
// either ends the round or returns the command it runs.
func (n *normalizer) command(words []word, redirs []*syntax.Redirect, depth int) {
	for guard := 0; len(words) > 0 && guard < 64; guard++ {
		var prog string
		var ok bool
		if words, prog, ok = n.programWord(words, depth); !ok {
			return
		}
		if g, ok := wrapperGrammars[prog]; ok {
			words = n.follow(n.wrapped(prog, g, words), depth)
			continue
		}
		if n.runsCode(prog, words, depth) {
			return
		}
		if o, ok := commandOptions[prog]; ok {
			n.commandOptions(prog, o, words, depth)
		}
		if words, ok = n.byProgram(prog, words, redirs, depth); !ok {
			return
		}
	}
}

// programWord records the command and returns it with its program word
// normalized, and the program's base name; ok is false when the round
// ends here: a program named by an expansion (which matches every prefix)
// or by a path fluidbox cannot tell the program of.
func (n *normalizer) programWord(words []word, depth int) ([]word, string, bool) {
	w0 := words[0]
	if w0.dynamic {
		n.emit(words)
		if w0.execs {
			n.opaque("the program name comes from a command substitution")
		}
		return nil, "", false
	}
	if shellChars.in(w0.text) {
		// A program name with spaces only runs through a shell
		// (sudo -s "git push", watch "git push").
		n.script(w0.text, depth+1, false, "program name")
	}
	norm, ok := program(words)
	if !ok {
		n.emit(words)
		n.opaque(fmt.Sprintf("%s is run by its path, so fluidbox cannot tell what it runs", quoteWord(basename(w0.text))))
		return nil, "", false
	}
	n.emit(norm)
	return norm, basename(norm[0].text), true
}

// runsCode makes the line opaque where the program runs code fluidbox
// cannot read (an interpreter, a program that runs another in a way not
// followed), after recording the commands xargs and parallel may run;
// true when the round ends here.
func (n *normalizer) runsCode(prog string, words []word, depth int) bool {
	switch {
	case interpreter(prog):
		if versionOnly(words) {
			return true
		}
		if what, ok := builtinRuns[prog]; ok {
			n.opaque(fmt.Sprintf("%s %s, which fluidbox cannot analyse", quoteWord(prog), what))
			return true
		}
		n.opaque(fmt.Sprintf("%s runs code (inline, from stdin or from a file), which fluidbox cannot analyse", quoteWord(prog)))
		return true
	case !runsOther[prog]:
		return false
	}
	n.opaque(fmt.Sprintf("%s runs another program in a way fluidbox does not follow", quoteWord(prog)))
	switch prog {
	case "xargs":
		rests := n.readings(words, "adEILnPs", "--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var", "--replace")
		for _, rest := range rests {
			if len(rest) > 0 {
				// xargs appends words read from stdin.
				n.command(append(append([]word(nil), rest...), word{dynamic: true, split: true}), nil, depth)
			}
		}
	case "parallel":
		for _, rest := range n.readings(words, "nd", "--interval") {
			if text, ok := joinStatic(rest); ok {
				n.script(text, depth+1, true, "parallel argument")
			}
		}
	}
	return true
}

// byProgram hands the command to its program's reader. It returns the
// command the program runs, with ok, for a wrapper-like program (env,
// sudo, doas, busybox, toybox); ok is false when the round ends.
func (n *normalizer) byProgram(prog string, words []word, redirs []*syntax.Redirect, depth int) ([]word, bool) {
	switch prog {
	case "env":
		return n.env(words, depth), true
	case "sudo", "doas":
		return n.sudo(prog, words, depth), true
	case "busybox", "toybox":
		return words[1:], true
	}
	if n.shellBuiltin(prog, words, depth) {
		return nil, false
	}
	n.programReader(prog, words, redirs, depth)
	return nil, false
}

// sudo returns the command sudo or doas runs, for each reading of its
// options.
func (n *normalizer) sudo(prog string, words []word, depth int) []word {
	var rests [][]word
	if prog == "sudo" {
		rests = n.readings(words, "ugCDhprtUTR", "--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--command-timeout", "--chroot")
	} else {
		rests = n.readings(words, "uC")
	}
	for k, rest := range rests {
		rest = n.skipAssignments(rest, depth)
		if len(rest) == 0 && hasShellFlag(words) {
			n.opaque(prog + " runs a shell reading stdin")
		}
		rests[k] = rest
	}
	return n.follow(rests, depth)
}

// shellBuiltin reads the shell builtins that run a string or change how
// later words read; false when prog is none of them.
func (n *normalizer) shellBuiltin(prog string, words []word, depth int) bool {
	switch prog {
	case "eval":
		n.eval(words, depth)
	case "watch":
		n.watch(prog, words, depth)
	case "cd", "pushd", "popd":
		n.cd(prog, words)
	case "mapfile", "readarray":
		n.mapfile(prog, words, depth)
	case "read", "unset", "getopts", "wait", "printf", "test", "[":
		n.nameArgs(prog, words)
	case "hash":
		if len(words) > 1 && strings.HasPrefix(words[1].text, "-") && strings.Contains(words[1].text, "p") || anyDynamic(words[1:]) {
			n.opaque("hash -p makes a name run another program")
		}
	case "shopt":
		n.shopt(words)
	case "complete", "compgen":
		n.complete(prog, words)
	default:
		return false
	}
	return true
}

// programReader reads the programs whose words may run other code.
func (n *normalizer) programReader(prog string, words []word, redirs []*syntax.Redirect, depth int) {
	switch prog {
	case "su", "runuser", "flock", "script":
		n.commandString(words, prog, depth)
	case "find":
		n.findExec(words, depth)
	case "git":
		n.git(words, depth)
	case "awk", "gawk", "mawk", "nawk":
		n.awk(words)
	case "sed":
		n.sed(words)
	case "make", "gmake":
		n.make(words)
	case "go":
		n.goRun(words)
	case "bun":
		n.bun(words)
	case "docker", "podman", "kubectl", "nerdctl":
		n.container(prog, words)
	default:
		if shells[prog] {
			n.shell(words, redirs, depth)
		}
	}
}

// eval runs its joined arguments as a script.
func (n *normalizer) eval(words []word, depth int) {
	text, ok := joinStatic(words[1:])
	if !ok {
		n.opaque("eval of an expansion")
		return
	}
	n.script(text, depth+1, true, "eval argument")
}

// watch runs its joined arguments as a script, for each reading of its
// options.
func (n *normalizer) watch(prog string, words []word, depth int) {
	for _, rest := range n.readings(words, "nd", "--interval") {
		text, ok := joinStatic(rest)
		if !ok {
			n.opaque(prog + " of an expansion")
			return
		}
		n.script(text, depth+1, true, prog+" argument")
	}
}

// cd moves the directory later relative paths are read from: a literal
// one names itself (and is judged as a word), any other is known only at
// run time.
func (n *normalizer) cd(prog string, words []word) {
	arg := words[len(words)-1]
	switch {
	case len(words) < 2 || prog == "popd" || arg.dynamic && !arg.glob || arg.text == "-" || strings.HasPrefix(arg.text, "-"):
		n.anyDir = true
	case strings.HasPrefix(arg.text, "/") || strings.HasPrefix(arg.text, "~"):
		n.dir = arg.text
	default:
		n.dir = path.Join(n.dir, arg.text)
	}
}

// mapfile: -C names a command string run every -c lines.
func (n *normalizer) mapfile(prog string, words []word, depth int) {
	for k := 1; k < len(words); k++ {
		w := words[k]
		if w.dynamic {
			n.opaque(fmt.Sprintf("%s with an expanded argument may name a callback", quoteWord(prog)))
			return
		}
		t := w.text
		if t == "--" || !strings.HasPrefix(t, "-") {
			break
		}
		j := strings.IndexByte(t, 'C')
		if j <= 0 {
			continue
		}
		cb := t[j+1:]
		if cb == "" && k+1 < len(words) {
			k++
			if words[k].dynamic {
				n.opaque(prog + " -C of an expansion")
				return
			}
			cb = words[k].text
		}
		n.script(cb, depth+1, true, prog+" -C callback")
	}
	n.nameArgs(prog, words)
}

// shopt: expand_aliases lets aliases rename commands.
func (n *normalizer) shopt(words []word) {
	for _, w := range words[1:] {
		if w.dynamic || w.text == "expand_aliases" {
			n.opaque("shopt expand_aliases lets aliases rename commands")
		}
	}
}

// complete: -C and -F name a command or function to run.
func (n *normalizer) complete(prog string, words []word) {
	for _, w := range words[1:] {
		if w.dynamic || strings.HasPrefix(w.text, "-") && strings.ContainsAny(w.text, "CF") {
			n.opaque(prog + " -C runs a command")
		}
	}
}

// goRun: go run of a file or of module@version runs code the line names
// or fetches; go run of a project package is the project's code, as go
// test is.
func (n *normalizer) goRun(words []word) {
	if len(words) <= 2 || words[1].dynamic || words[1].text != "run" {
		return
	}
	for _, a := range words[2:] {
		if a.dynamic || strings.HasSuffix(a.text, ".go") || strings.Contains(a.text, "@") {
			n.opaque("go run of a file, a module version or an expansion runs code fluidbox cannot analyse")
			return
		}
	}
}

// bunScripts are the file names bun runs as JavaScript or TypeScript.
var bunScripts = []string{".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", ".mts", ".cts"}

// bun is a package runner (bun test, bun run build) and a JavaScript
// runtime: inline code or a script file is opaque.
func (n *normalizer) bun(words []word) {
	for _, a := range words[1:] {
		if a.dynamic {
			n.opaque("bun with an expanded argument")
			return
		}
		t := a.text
		if t == "-e" || t == "-p" || optionIs(t, "--eval") || optionIs(t, "--print") {
			n.opaque("`bun` runs inline code, which fluidbox cannot analyse")
			return
		}
		if strings.HasPrefix(t, "-") {
			continue
		}
		for _, ext := range bunScripts {
			if strings.HasSuffix(t, ext) {
				n.opaque("`bun` runs a script file, which fluidbox cannot analyse")
				return
			}
		}
		if t != "run" {
			return // a subcommand or a package script
		}
		// bun run FILE runs the file
	}
}

// container: exec, run, debug and attach run a command in a container.
func (n *normalizer) container(prog string, words []word) {
	for _, w := range words[1:] {
		if w.dynamic || w.text == "exec" || w.text == "run" || w.text == "debug" || w.text == "attach" {
			n.opaque(fmt.Sprintf("%s runs a command in a container, which fluidbox does not follow", quoteWord(prog)))
			return
		}
	}
}

// commandOptions finds a program's options whose value is a command.
func (n *normalizer) commandOptions(prog string, o commandOpts, words []word, depth int) {
	for k := 1; k < len(words); k++ {
		w := words[k]
		if w.dynamic {
			n.opaque(fmt.Sprintf("%s with an expanded argument may name a command", quoteWord(prog)))
			return
		}
		t := w.text
		if t == "--" {
			return
		}
		value, next, hit := "", false, false
		switch {
		case slices.Contains(o.words, t):
			hit, next = true, true
		case strings.HasPrefix(t, "--"):
			name, v, attached := strings.Cut(t, "=")
			for _, l := range o.long {
				if len(name) > 3 && strings.HasPrefix(l, name) {
					hit, value, next = true, v, !attached
					break
				}
			}
		case strings.HasPrefix(t, "-") || k == 1 && prog == "tar":
			// A cluster (tar's first word needs no dash). A letter
			// after one that takes a value may be that value; read
			// conservatively, any listed letter is a hit.
			if j := strings.IndexAny(strings.TrimPrefix(t, "-"), o.short); j >= 0 && o.short != "" {
				rest := strings.TrimPrefix(t, "-")[j+1:]
				hit, value, next = true, rest, rest == ""
			}
		}
		if !hit {
			continue
		}
		n.opaque(fmt.Sprintf("a %s option runs a command given in its value", quoteWord(prog)))
		if next && k+1 < len(words) && !words[k+1].dynamic {
			value = words[k+1].text
		}
		value = strings.TrimPrefix(value, "exec=") // tar --checkpoint-action=exec=CMD
		if value != "" {
			n.script(value, depth+1, false, prog+" option value")
		}
		return
	}
}

// nameArgs: read, mapfile, unset, printf -v, test -v, ... take a
// variable's name, and bash expands a subscript in it (a[$(cmd)]), so a
// name known only at run time can run a command.
func (n *normalizer) nameArgs(prog string, words []word) {
	for k, w := range words[1:] {
		if !w.dynamic {
			continue
		}
		if prog == "printf" || prog == "test" || prog == "[" {
			if k == 0 || words[k].dynamic || words[k].text != "-v" {
				continue
			}
		}
		n.opaque(fmt.Sprintf("%s names a variable at run time, and a subscript in that name can run a command", quoteWord(prog)))
		return
	}
}

// optionIs reports whether t is the long option opt, alone or with an
// attached value (--opt=value).
func optionIs(t, opt string) bool {
	return strings.HasPrefix(t, opt) && (len(t) == len(opt) || t[len(opt)] == '=')
}

func anyDynamic(words []word) bool {
	for _, w := range words {
		if w.dynamic {
			return true
		}
	}
	return false
}

// readings is optionReadings on the deny side: more readings than it
// follows make the line opaque.
func (n *normalizer) readings(words []word, shortArg string, longArg ...string) [][]word {
	return n.readingsOf(words, wrapperGrammar{short: shortArg, long: longArg})
}

func (n *normalizer) readingsOf(words []word, g wrapperGrammar) [][]word {
	rests, ok := optionReadings(words, g.short, g.unsure, g.long...)
	if !ok {
		n.opaque(fmt.Sprintf("%s options can be read in too many ways", quoteWord(basename(words[0].text))))
	}
	return rests
}

// follow records, as commands of their own, every reading of a wrapper's
// words but the first, and returns the first for the caller to go on with.
// Each one followed uses the re-read budget, so that wrappers nested in
// wrappers cannot multiply the work.
func (n *normalizer) follow(rests [][]word, depth int) []word {
	if len(rests) == 0 {
		return nil
	}
	for _, r := range rests[1:] {
		if len(r) == 0 {
			continue
		}
		if n.budget <= 0 {
			n.opaque("the analysis budget ran out (too many ways to read wrapper options)")
			break
		}
		n.budget--
		n.command(r, nil, depth)
	}
	return rests[0]
}

// wrapped returns the commands a known wrapper may run, one per reading of
// its options.
func (n *normalizer) wrapped(prog string, g wrapperGrammar, words []word) [][]word {
	for _, w := range words[1:] {
		if w.dynamic {
			break
		}
		for _, s := range g.stop {
			if optionIs(w.text, s) {
				return nil
			}
		}
		if !strings.HasPrefix(w.text, "-") {
			break
		}
	}
	rests := n.readingsOf(words, g)
	for i, rest := range rests {
		for k := 0; k < g.operands && len(rest) > 0; k++ {
			if rest[0].dynamic {
				break
			}
			rest = rest[1:]
		}
		if len(rest) == 0 && g.bare != "" {
			n.opaque(fmt.Sprintf("%s without a command runs %s", quoteWord(prog), g.bare))
		}
		rests[i] = rest
	}
	return rests
}

// awk runs a command with system() or a pipe, and code from a file with -f.
func (n *normalizer) awk(words []word) {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.dynamic {
			n.opaque("awk with an expanded program or option")
			return
		}
		t := w.text
		switch {
		case t == "--":
			continue
		case t == "-F" || t == "-v":
			i++
			continue
		case strings.HasPrefix(t, "-F") || strings.HasPrefix(t, "-v"):
			continue
		case strings.HasPrefix(t, "-"):
			n.opaque(fmt.Sprintf("awk option %s loads or runs code fluidbox cannot analyse", quoteWord(t)))
			return
		}
		if awkRuns().MatchString(t) {
			n.opaque("awk program runs a command (system() or a pipe)")
		}
		return
	}
}

// awkRuns, like the catalogue and its patterns, is compiled on first use:
// not in the init of every function that links the analyser. '@' covers
// @load, @include and gawk's indirect call @f(), which can call system by
// a name built at run time.
var awkRuns = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`system|\||@`) })

// sed runs a command with its e command and the e flag of s.
func (n *normalizer) sed(words []word) {
	var scripts []string
	for i := 1; i < len(words); i++ {
		if words[i].dynamic {
			n.opaque("sed with an expanded script or option")
			return
		}
		var why string
		if i, scripts, why = sedWord(words, i, scripts); why != "" {
			n.opaque(why)
			return
		}
	}
	for _, s := range scripts {
		if sedScript(s) != "" && sedMayRun(s) {
			n.opaque("sed script may run a command (the e command or the e flag of s)")
			return
		}
	}
}

// sedWord reads sed's word i: a script given by -e or --expression (long
// options as getopt_long reads them: any unique prefix, --expr is
// --expression, --fi is --file), or the first operand when no option gave
// one. It returns the index of the last word read, the scripts so far,
// and why the line is opaque ("" when it is not).
func sedWord(words []word, i int, scripts []string) (int, []string, string) {
	t := words[i].text
	name, value, attached := strings.Cut(t, "=")
	longOf := func(opt string, min int) bool {
		return strings.HasPrefix(t, "--") && len(name) >= min && strings.HasPrefix(opt, name)
	}
	short := strings.HasPrefix(t, "-") && !strings.HasPrefix(t, "--")
	switch {
	case t == "-e" || longOf("--expression", 3) && !attached:
		if i+1 >= len(words) {
			return i, scripts, ""
		}
		if words[i+1].dynamic {
			return i, scripts, "sed with an expanded script"
		}
		return i + 1, append(scripts, words[i+1].text), ""
	case longOf("--expression", 3):
		return i, append(scripts, value), ""
	case t == "-f" || longOf("--file", 4) || strings.HasPrefix(t, "--file") || short && strings.Contains(t, "f"):
		return i, scripts, "sed reads its script from a file, which fluidbox cannot analyse"
	case short && len(t) > 1 && strings.Contains(t, "e"):
		return i, scripts, "sed -e inside an option cluster"
	case strings.HasPrefix(t, "-") || len(scripts) > 0:
		return i, scripts, ""
	}
	return i, append(scripts, t), ""
}

// sedMayRun is true when a script that is not read-only could contain the
// e command or flag; only scripts whose sole problem is w, r, a, i or c
// with no 'e' anywhere are known not to run anything.
func sedMayRun(s string) bool { return strings.ContainsRune(s, 'e') }

// make runs the recipes of the project's makefile, which deny rules accept
// as they accept a test runner; but a makefile or directory the line names
// (-f, -C, -I: perhaps written a moment before) or inline make code
// (--eval) is, like bash FILE, code the analysis does not read.
func (n *normalizer) make(words []word) {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.dynamic {
			n.opaque("make with an expanded argument")
			return
		}
		t := w.text
		if t == "--" {
			return
		}
		if strings.HasPrefix(t, "--") {
			// Long options by any prefix getopt_long takes (--fil, --ev).
			name, _, _ := strings.Cut(t, "=")
			for _, o := range []string{"--file", "--makefile", "--directory", "--include-dir", "--eval"} {
				if len(name) >= 4 && strings.HasPrefix(o, name) {
					n.opaque(fmt.Sprintf("make %s runs code from a makefile or directory the line names, which fluidbox does not read", o))
					return
				}
			}
			continue
		}
		if len(t) < 2 || t[0] != '-' {
			continue
		}
		// A cluster: the first letter that takes a value ends it.
		if j := strings.IndexAny(t[1:], "fCIEojWl"); j >= 0 && strings.IndexByte("fCIE", t[1+j]) >= 0 {
			n.opaque(fmt.Sprintf("make -%c runs code from a makefile or directory the line names, which fluidbox does not read", t[1+j]))
			return
		}
	}
}

// redirect: /dev/tcp and /dev/udp are bash's network connections; a target
// known only at run time could be one.
func (n *normalizer) redirect(r *syntax.Redirect) {
	if r.Word == nil {
		return
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc, syntax.DplIn, syntax.DplOut:
		if r.Op == syntax.DplIn || r.Op == syntax.DplOut {
			cw := convertWord(r.Word)
			if cw.dynamic {
				n.opaque("a redirection to an expanded file descriptor")
			} else if r.Op == syntax.DplOut && !isDigits(cw.text) && cw.text != "-" {
				n.redirected = append(n.redirected, n.inDir(cw)) // >&file writes the file
			}
		}
		return
	}
	cw := convertWord(r.Word)
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		n.redirected = append(n.redirected, n.inDir(cw))
	case syntax.RdrInOut:
		n.redirected = append(n.redirected, n.inDir(cw))
		n.redirectedIn = append(n.redirectedIn, n.inDir(cw))
	case syntax.RdrIn:
		n.redirectedIn = append(n.redirectedIn, n.inDir(cw))
	}
	switch {
	case cw.glob && !strings.HasPrefix(cw.text, "/dev/"):
		// A pattern or ~/ names existing files or the home directory,
		// never bash's /dev/tcp, which is not a file.
	case cw.dynamic:
		n.opaque("a redirection to an expanded file name (it could be /dev/tcp)")
	case strings.HasPrefix(path.Clean(cw.text), "/dev/tcp/") || strings.HasPrefix(path.Clean(cw.text), "/dev/udp/"):
		n.opaque("a redirection to /dev/tcp or /dev/udp reaches the network")
	}
}

// assignment: variables that make the shell or the next programs run
// something else (PATH, BASH_ENV, LD_PRELOAD, GIT_CONFIG_*, PS4, HOME for
// git's ~/.gitconfig, npm_config_script_shell, ...). The class is closed by
// allowing only names known to be inert; anything else is opaque.
func (n *normalizer) assignment(name string) {
	if inertVariable(name) {
		return
	}
	n.opaque(fmt.Sprintf("assigning %s can change what later commands run", quoteWord(name)))
}

var inertVariables = map[string]bool{
	"LANG": true, "LANGUAGE": true, "TZ": true, "TERM": true, "NO_COLOR": true, "FORCE_COLOR": true,
	"CLICOLOR": true, "CLICOLOR_FORCE": true, "CI": true, "COLUMNS": true, "LINES": true,
	"DEBUG": true, "VERBOSE": true, "NODE_ENV": true, "RUST_BACKTRACE": true, "RUST_LOG": true,
	"GOOS": true, "GOARCH": true, "CGO_ENABLED": true, "PYTHONUNBUFFERED": true,
	"PYTHONDONTWRITEBYTECODE": true, "GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true,
	"GIT_AUTHOR_DATE": true, "GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true,
	"GIT_COMMITTER_DATE": true, "GIT_TERMINAL_PROMPT": true,
}

func inertVariable(name string) bool {
	if inertVariables[name] || strings.HasPrefix(name, "LC_") {
		return true
	}
	lower := strings.ToLower(name)
	for _, p := range []string{"npm_", "yarn_", "pnpm_", "bun_"} {
		if strings.HasPrefix(lower, p) {
			return false
		}
	}
	// Lowercase names are shell variables by convention, not read by
	// programs as configuration.
	return name != strings.ToUpper(name) && !strings.HasPrefix(name, "BASH")
}

func hasShellFlag(words []word) bool {
	for _, w := range words[1:] {
		if w.text == "-s" || w.text == "-i" || w.text == "--shell" || w.text == "--login" {
			return true
		}
	}
	return false
}

// envValueLong are env's long options that take a value, which getopt_long
// also takes abbreviated (--spl for --split-string).
var envValueLong = []string{"--unset", "--chdir", "--argv0", "--split-string"}

// env returns the command env runs. env reads its options with getopt_long:
// -u, -C, -a and -S take a value attached or as the next word, also at the
// end of a cluster (-iu NAME, -vS'...'), and long options may be
// abbreviated. -S splits its value into words that env reads again as
// options, assignments and the command.
func (n *normalizer) env(words []word, depth int) []word {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.dynamic {
			return words[i:]
		}
		t := w.text
		var split string
		hasSplit := false
		switch {
		case t == "--":
			return n.skipAssignments(words[i+1:], depth)
		case strings.HasPrefix(t, "--"):
			name, value, attached := strings.Cut(t, "=")
			long := ""
			for _, o := range envValueLong {
				if len(name) > 2 && strings.HasPrefix(o, name) {
					long = o
					break
				}
			}
			if long == "" {
				continue // a flag, or an option env refuses
			}
			if !attached {
				if i+1 >= len(words) {
					return nil
				}
				i++
				value = words[i].text
				if words[i].dynamic {
					n.opaque("env option of an expansion")
					return nil
				}
			}
			split, hasSplit = value, long == "--split-string"
		case len(t) > 1 && t[0] == '-':
			for j := 1; j < len(t); j++ {
				c := t[j]
				if strings.IndexByte("uCaS", c) < 0 {
					continue
				}
				value := t[j+1:]
				if value == "" {
					if i+1 >= len(words) {
						return nil
					}
					i++
					if words[i].dynamic {
						n.opaque("env option of an expansion")
						return nil
					}
					value = words[i].text
				}
				split, hasSplit = value, c == 'S'
				break
			}
		default:
			return n.skipAssignments(words[i:], depth)
		}
		if hasSplit {
			return n.envSplit(split, words[i+1:], depth)
		}
	}
	return nil
}

// envSplit reads env -S's string: its words, then the words after it, are
// env's arguments again. The string is split with the shell's parser; env's
// own escapes (\_ separates words, \c ends the string) and any shell syntax
// in it that env reads as text make the split unknown, so the line is
// opaque, and the string is still read as a script for what deny rules can
// see in it.
func (n *normalizer) envSplit(s string, after []word, depth int) []word {
	if depth > maxDepth || n.budget <= 0 {
		n.opaque("the analysis budget ran out (env -S nested too deeply)")
		return nil
	}
	n.budget--
	var split []word
	f, err := parse(s)
	ok := err == nil && !strings.ContainsRune(s, '\\') && len(f.Stmts) <= 1
	if ok && len(f.Stmts) == 1 {
		st := f.Stmts[0]
		call, isCall := st.Cmd.(*syntax.CallExpr)
		ok = isCall && !st.Background && !st.Negated && !st.Coprocess && !st.Disown && len(st.Redirs) == 0
		if ok {
			for _, a := range call.Assigns {
				if a.Name == nil || a.Value == nil || a.Append || a.Naked || a.Index != nil || a.Array != nil {
					ok = false
					break
				}
				v := convertWord(a.Value)
				split = append(split, word{text: a.Name.Value + "=" + v.text, dynamic: v.dynamic, split: v.split, execs: v.execs})
			}
			for _, a := range call.Args {
				split = append(split, convertWord(a))
			}
		}
	}
	if !ok {
		n.opaque("env -S string that fluidbox cannot split into words")
		n.script(s, depth+1, false, "env -S string")
		return nil
	}
	args := append(append([]word{{text: "env"}}, split...), after...)
	return n.env(args, depth+1)
}

// commandStringArgs are, per program, the short options before which a
// -c in the same cluster would be their value, not an option.
var commandStringArgs = map[string]string{"su": "sgGw", "runuser": "sgGwu", "flock": "wE", "script": "BEIOmT"}

// commandOption reports whether t gives the command string: -c or a cluster
// reaching c (-lc, -c'cmd'), or --command and --session-command with any
// abbreviation getopt_long takes (--comm, --sess), with the string
// attached or in the next word (next).
func commandOption(t, args string) (s string, next, ok bool) {
	if strings.HasPrefix(t, "--") {
		name, value, attached := strings.Cut(t, "=")
		if len(name) <= 2 || !strings.HasPrefix("--command", name) && !strings.HasPrefix("--session-command", name) {
			return "", false, false
		}
		return value, !attached, true
	}
	if len(t) < 2 || t[0] != '-' {
		return "", false, false
	}
	for j := 1; j < len(t); j++ {
		switch {
		case t[j] == 'c':
			return t[j+1:], j == len(t)-1, true
		case strings.IndexByte(args, t[j]) >= 0:
			return "", false, false
		}
	}
	return "", false, false
}

// commandString handles programs that take a command string after -c or
// --command (su, runuser, flock); without one they run an interactive shell
// or a command given as words.
func (n *normalizer) commandString(words []word, prog string, depth int) {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.dynamic {
			n.opaque(prog + " with an expansion")
			return
		}
		t := w.text
		s, next, ok := commandOption(t, commandStringArgs[prog])
		if !ok {
			continue
		}
		if next {
			if i+1 >= len(words) || words[i+1].dynamic {
				n.opaque(prog + " -c of an expansion")
				return
			}
			s = words[i+1].text
		}
		n.script(s, depth+1, true, prog+" command")
		return
	}
	if prog == "flock" {
		// flock [options] file command [args]
		for _, rest := range n.readings(words, "wEn", "--timeout", "--wait", "--conflict-exit-code") {
			if len(rest) > 1 {
				n.command(rest[1:], nil, depth)
			}
		}
		return
	}
	n.opaque(prog + " runs an interactive shell")
}

func (n *normalizer) shell(words []word, redirs []*syntax.Redirect, depth int) {
	cflag := false
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.dynamic {
			n.opaque("shell with an expanded argument")
			return
		}
		t := w.text
		switch {
		case t == "--":
			continue
		case t == "-o" || t == "+o" || t == "-O" || t == "+O" || t == "--rcfile" || t == "--init-file":
			i++
			continue
		case strings.HasPrefix(t, "--"):
			continue
		case len(t) > 1 && (t[0] == '-' || t[0] == '+'):
			if strings.ContainsRune(t, 'c') {
				cflag = true
			}
			continue
		}
		if cflag {
			n.script(t, depth+1, true, "shell -c string")
			return
		}
		n.opaque(fmt.Sprintf("%s runs a script file, which fluidbox cannot analyse", quoteWord(basename(words[0].text))))
		return
	}
	if cflag {
		n.opaque("shell -c without a command")
		return
	}
	// The shell reads its script from stdin.
	for _, r := range redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			_, plainDelim := literalText(r.Word)
			quoted := !plainDelim || len(r.Word.Parts) != 1
			if text, ok := hdocText(r.Hdoc, quoted); ok {
				n.script(text, depth+1, true, "here-document")
				return
			}
		case syntax.WordHdoc:
			if cw := convertWord(r.Word); !cw.dynamic {
				n.script(cw.text, depth+1, true, "here-string")
				return
			}
		}
	}
	n.opaque(fmt.Sprintf("%s reads code from stdin (a pipe or a redirection), which fluidbox cannot analyse", quoteWord(basename(words[0].text))))
}

func (n *normalizer) findExec(words []word, depth int) {
	for i := 1; i < len(words); i++ {
		if words[i].dynamic {
			continue
		}
		switch words[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		n.opaque(fmt.Sprintf("find %s runs a program for every file, which fluidbox does not follow", words[i].text))
		j := i + 1
		var sub []word
		for ; j < len(words); j++ {
			if t := words[j]; !t.dynamic && (t.text == ";" || t.text == "+") {
				break
			}
			w := words[j]
			if strings.Contains(w.text, "{}") {
				w = word{text: w.text, dynamic: true}
			}
			sub = append(sub, w)
		}
		n.command(sub, nil, depth)
		i = j
	}
}

// gitArgOptions are git global options that take the next word as value.
var gitArgOptions = map[string]bool{
	"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--super-prefix": true, "--config-env": true, "--attr-source": true,
}

// gitRunOptions are options, after the subcommand, whose value is a program
// or a template git runs (--upload-pack, difftool --extcmd, grep
// --open-files-in-pager, clone --template, ...).
var gitRunOptions = []string{
	"--upload-pack", "--receive-pack", "--exec", "--extcmd", "--tool", "--open-files-in-pager",
	"--template",
}

// gitRunLong are long options with the same effect, per subcommand
// (send-email runs --to-cmd, and an --smtp-server that is a path), and
// gitOwnOptions the options of theirs that are not abbreviations of them
// (send-email --cc is its own option, not --cc-cmd).
var (
	gitRunLong    = map[string][]string{"send-email": {"--to-cmd", "--cc-cmd", "--header-cmd", "--sendmail-cmd", "--smtp-server"}}
	gitOwnOptions = map[string]bool{"--cc": true}
)

// gitRunShort are short options with the same effect, per subcommand.
var gitRunShort = map[string]string{
	"clone": "u", "ls-remote": "u", "archive": "", "grep": "O", "difftool": "xt", "mergetool": "t",
	"fetch-pack": "", "send-pack": "",
}

func (n *normalizer) git(words []word, depth int) {
	rest, ok := n.gitGlobal(words, depth)
	if !ok || len(rest) < 2 {
		return
	}
	if rest[1].dynamic {
		n.opaque("git with an expanded subcommand")
		return
	}
	sub := rest[1].text
	if !gitCommands[sub] {
		n.opaque(fmt.Sprintf("git %s is not a git command fluidbox knows: it may be an alias or a git-%s program", quoteWord(sub), quoteWord(sub)))
		return
	}
	for _, a := range rest[2:] {
		if !a.dynamic && !n.gitOption(sub, a, depth) {
			return
		}
	}
	n.gitRuns(sub, rest, depth)
}

// gitGlobal reads git's global options (-c, --config-env, --exec-path)
// and returns the command without them, recorded when it differs; ok is
// false when an option is an expansion.
func (n *normalizer) gitGlobal(words []word, depth int) ([]word, bool) {
	i := 1
	for i < len(words) {
		w := words[i]
		if w.dynamic {
			n.opaque("git with an expanded option")
			return nil, false
		}
		t := w.text
		if !strings.HasPrefix(t, "-") {
			break
		}
		switch {
		case t == "-c":
			if i+1 < len(words) {
				n.gitConfig(words[i+1], "git -c", depth)
			}
		case strings.HasPrefix(t, "-c"):
			n.gitConfig(word{text: t[2:]}, "git -c", depth)
		case t == "--config-env" || strings.HasPrefix(t, "--config-env="):
			n.opaque("git --config-env sets configuration from the environment")
		case t == "--exec-path" || strings.HasPrefix(t, "--exec-path="):
			n.opaque("git --exec-path runs git's programs from another directory")
		}
		i++
		if gitArgOptions[t] {
			i++
		}
	}
	if i == 1 {
		return words, true
	}
	rest := append([]word{words[0]}, words[min(i, len(words)):]...)
	n.emit(rest)
	return rest, true
}

// gitOption reads one word of a git subcommand: an option that runs a
// program makes the line opaque (false: stop reading), and a
// configuration it sets is read as git -c's.
func (n *normalizer) gitOption(sub string, a word, depth int) bool {
	for _, opt := range gitRunOptions {
		if opt == "--exec" && sub == "rebase" {
			continue // read by gitRuns: its command is visible
		}
		if _, _, ok := gitLong(a.text, opt); ok {
			n.opaque(fmt.Sprintf("git %s %s runs a program", sub, opt))
			return false
		}
	}
	for _, opt := range gitRunLong[sub] {
		name, _, _ := strings.Cut(a.text, "=")
		if _, _, ok := gitLong(a.text, opt); ok && !gitOwnOptions[name] {
			n.opaque(fmt.Sprintf("git %s %s runs a program", sub, opt))
			return false
		}
	}
	if short := gitRunShort[sub]; short != "" && len(a.text) > 1 && a.text[0] == '-' && a.text[1] != '-' {
		if k := strings.IndexAny(a.text[1:], short); k >= 0 {
			n.opaque(fmt.Sprintf("git %s option %s runs a program", sub, shortName(a.text[1+k])))
			return false
		}
	}
	value, attached, isConfig := gitLong(a.text, "--config")
	if isConfig && !attached || a.text == "-c" && sub == "clone" {
		n.opaque("git " + sub + " --config sets configuration")
		return false
	}
	if isConfig {
		n.gitConfig(word{text: value}, "git "+sub+" --config", depth)
	}
	return true
}

// gitRuns reads the subcommands that run a command string or set what git
// runs.
func (n *normalizer) gitRuns(sub string, rest []word, depth int) {
	switch sub {
	case "filter-branch", "filter-repo":
		n.opaque("git " + sub + " runs filter commands")
		for j := 2; j+1 < len(rest); j++ {
			if t := rest[j].text; strings.HasPrefix(t, "--") && strings.HasSuffix(t, "-filter") && !rest[j+1].dynamic {
				n.script(rest[j+1].text, depth+1, false, "git "+sub+" filter")
			}
		}
	case "config":
		n.gitConfigCommand(rest[2:], depth)
	case "submodule":
		n.gitForeach(rest, depth)
	case "rebase":
		n.gitRebaseExec(rest, depth)
	case "bisect":
		if len(rest) > 3 && !rest[2].dynamic && rest[2].text == "run" {
			n.runsWhy = "git bisect run runs a command"
			n.command(rest[3:], nil, depth)
		}
	}
}

// gitForeach: git submodule foreach runs its command in each submodule.
func (n *normalizer) gitForeach(rest []word, depth int) {
	for j := 2; j < len(rest); j++ {
		if rest[j].dynamic || rest[j].text != "foreach" {
			continue
		}
		n.runsWhy = "git submodule foreach runs a command"
		for _, cmd := range n.readings(rest[j:], "") {
			if text, ok := joinStatic(cmd); ok {
				n.script(text, depth+1, true, "git submodule foreach")
			} else {
				n.opaque("git submodule foreach of an expansion")
			}
		}
		return
	}
}

// gitRebaseExec: git rebase --exec (-x) runs its command after each
// commit.
func (n *normalizer) gitRebaseExec(rest []word, depth int) {
	for j := 2; j < len(rest); j++ {
		t := rest[j].text
		value, attached, isExec := gitLong(t, "--exec")
		if t == "-x" || isExec {
			n.runsWhy = "git rebase --exec runs a command"
		}
		switch {
		case (t == "-x" || isExec && !attached) && j+1 < len(rest):
			if rest[j+1].dynamic {
				n.opaque("git rebase --exec of an expansion")
				return
			}
			n.script(rest[j+1].text, depth+1, true, "git rebase --exec")
		case isExec && attached:
			n.script(value, depth+1, true, "git rebase --exec")
		}
	}
}

// gitLong reports whether t is the long option opt as git's option parser
// reads it: whole or any prefix of at least two letters (git takes unique
// abbreviations: --upload-p is --upload-pack), with its value if attached.
func gitLong(t, opt string) (value string, attached, ok bool) {
	name, value, attached := strings.Cut(t, "=")
	if len(name) < 4 || !strings.HasPrefix(opt, name) {
		return "", false, false
	}
	return value, attached, true
}

// inertGitConfig: configuration keys that cannot make git run a command or
// rename a subcommand. Any other key set by -c, --config or git config is
// opaque (alias.*, core.sshCommand, core.fsmonitor, core.pager, diff.external,
// help.autocorrect, includeIf, url.*.insteadOf, ...).
func inertGitConfig(key string) bool {
	k := strings.ToLower(key)
	for _, p := range []string{"color.", "advice.", "column.", "status."} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	switch k {
	case "user.name", "user.email", "init.defaultbranch", "core.quotepath", "core.autocrlf",
		"core.safecrlf", "core.filemode", "core.ignorecase", "pull.rebase", "pull.ff",
		"push.default", "push.autosetupremote", "commit.gpgsign", "tag.gpgsign", "log.date",
		"diff.renames", "merge.conflictstyle", "rebase.autosquash", "fetch.prune":
		return true
	}
	return false
}

// gitConfig inspects a "-c key=value".
func (n *normalizer) gitConfig(w word, what string, depth int) {
	if w.dynamic {
		n.opaque(what + " of an expansion")
		return
	}
	key, value, _ := strings.Cut(w.text, "=")
	// The value may be a command git runs (core.sshCommand, core.pager):
	// read it, so that a deny on what it runs still decides.
	n.script(strings.TrimPrefix(value, "!"), depth+1, false, what+" value")
	if strings.HasPrefix(strings.ToLower(key), "alias.") {
		n.opaque(what + " defines an alias, which can rename any git subcommand")
		return
	}
	if !inertGitConfig(key) {
		n.opaque(fmt.Sprintf("%s sets %s, which can make git run a command", what, quoteWord(key)))
	}
}

// gitConfigCommand: git config writes when it is not reading (--get*,
// --list, get, list); a write of a key that is not inert is opaque.
func (n *normalizer) gitConfigCommand(args []word, depth int) {
	var pos []word
	for j := 0; j < len(args); j++ {
		a := args[j]
		if a.dynamic {
			n.opaque("git config with an expanded argument")
			return
		}
		switch {
		case strings.HasPrefix(a.text, "--get") || a.text == "--list" || a.text == "-l":
			return
		case a.text == "--file" || a.text == "-f" || a.text == "--blob" || a.text == "--type" || a.text == "--default" || a.text == "--comment":
			j++
		case a.text == "-e" || a.text == "--edit":
			n.opaque("git config --edit runs an editor")
			return
		case strings.HasPrefix(a.text, "-"):
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) == 0 {
		return
	}
	switch pos[0].text {
	case "get", "list":
		return
	case "set", "unset", "rename-section", "remove-section", "edit":
		if pos[0].text == "edit" {
			n.opaque("git config edit runs an editor")
			return
		}
		pos = pos[1:]
	}
	if len(pos) == 0 {
		return
	}
	n.configWrite = "`git config` writes git's configuration (.git/config, or ~/.gitconfig with --global)"
	n.gitConfig(word{text: pos[0].text}, "git config", depth)
}

// gitCommands are the subcommands git itself provides (git help -a, git
// 2.39 to 2.50). Any other word after git is an alias from some
// configuration or a git-<name> program on PATH: opaque.
var gitCommands = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range strings.Fields(`add am annotate apply archimport archive bisect blame branch bugreport bundle
cat-file check-attr check-ignore check-mailmap check-ref-format checkout checkout-index cherry cherry-pick
citool clean clone column commit commit-graph commit-tree config count-objects credential credential-cache
credential-store cvsexportcommit cvsimport cvsserver daemon describe diagnose diff diff-files diff-index
diff-tree difftool fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref
for-each-repo format-patch fsck fsck-objects gc get-tar-commit-id grep gui hash-object help hook
http-backend imap-send index-pack init init-db instaweb interpret-trailers log ls-files ls-remote ls-tree
mailinfo mailsplit maintenance merge merge-base merge-file merge-index merge-one-file merge-tree mergetool
mktag mktree multi-pack-index mv name-rev notes p4 pack-objects pack-redundant pack-refs patch-id prune
prune-packed pull push quiltimport range-diff read-tree rebase reflog refs remote repack replace
request-pull rerere reset restore rev-list rev-parse revert rm scalar send-email send-pack shortlog show
show-branch show-index show-ref sparse-checkout stage stash status stripspace submodule svn switch
symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info upload-archive
upload-pack var verify-commit verify-pack verify-tag version whatchanged worktree write-tree replay
backfill last-modified repo`) {
		m[c] = true
	}
	return m
}()
