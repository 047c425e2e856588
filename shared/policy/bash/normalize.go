package bash

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// looseCommand is one simple command the line could run, normalized.
type looseCommand struct {
	words []word
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
	cmds      []looseCommand
	opaqueWhy string
	budget    int
}

func (n *normalizer) opaque(why string) {
	if n.opaqueWhy == "" {
		n.opaqueWhy = why
	}
}

// script re-parses text that a shell would run as code. When mustParse is
// false the text is only possibly code (a quoted string containing "$(",
// an assignment value), so a failure to parse it is not suspicious.
func (n *normalizer) script(text string, depth int, mustParse bool, what string) {
	if depth > maxDepth || n.budget <= 0 {
		if mustParse {
			n.opaque(what + ": nested too deeply")
		}
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
	syntax.Walk(root, func(node syntax.Node) bool {
		switch x := node.(type) {
		case *syntax.Stmt:
			if call, ok := x.Cmd.(*syntax.CallExpr); ok && len(call.Args) > 0 {
				words := make([]word, len(call.Args))
				for i, w := range call.Args {
					words[i] = convertWord(w)
				}
				n.command(words, x.Redirs, depth)
			}
		case *syntax.DeclClause:
			if x.Variant != nil {
				n.emit([]word{{text: x.Variant.Value}})
			}
		case *syntax.Assign:
			// Values of assignments may be run later by the program
			// (GIT_SSH_COMMAND, PAGER, PROMPT_COMMAND, ...).
			if x.Value != nil {
				if cw := convertWord(x.Value); !cw.dynamic {
					n.script(cw.text, depth+1, false, "assignment value")
				}
			}
		case *syntax.Lit:
			n.maybeCode(x.Value, depth)
		case *syntax.SglQuoted:
			n.maybeCode(x.Value, depth)
		}
		return true
	})
}

// maybeCode re-parses quoted text that contains a substitution, so that
// x='a[$(git push)]' followed by an arithmetic use of x is still seen.
// The text is read twice: as a script, and as the body of an unquoted
// here-document (where only expansions are special), which finds
// substitutions even in text that is not itself valid shell.
func (n *normalizer) maybeCode(s string, depth int) {
	if !strings.Contains(s, "$(") && !strings.Contains(s, "`") && !strings.Contains(s, "<(") && !strings.Contains(s, ">(") && !strings.Contains(s, "${") {
		return
	}
	n.script(s, depth+1, false, "quoted text")
	if depth+1 > maxDepth || n.budget <= 0 || len(s) > MaxCommandBytes {
		return
	}
	n.budget--
	w, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Document(strings.NewReader(s))
	if err != nil || w == nil || len(w.Parts) == 0 {
		return
	}
	n.walk(w, depth+1)
}

func (n *normalizer) emit(words []word) {
	c := looseCommand{words: append([]word(nil), words...)}
	if len(c.words) > 0 && !c.words[0].dynamic {
		c.words[0].text = basename(c.words[0].text)
	}
	n.cmds = append(n.cmds, c)
}

// skipOptions returns the words after the leading options of a wrapper.
// shortArg lists short options that take an argument; longArg long options
// that take one as the next word. A dynamic word ends option parsing: it
// may be anything, so it is read as the program.
func skipOptions(words []word, shortArg string, longArg ...string) []word {
	i := 1
	for i < len(words) {
		w := words[i]
		if w.dynamic {
			return words[i:]
		}
		t := w.text
		switch {
		case t == "--":
			return words[i+1:]
		case strings.HasPrefix(t, "--"):
			i++
			if !strings.Contains(t, "=") {
				for _, l := range longArg {
					if t == l {
						i++
						break
					}
				}
			}
		case len(t) > 1 && t[0] == '-':
			i++
			for j := 1; j < len(t); j++ {
				if strings.IndexByte(shortArg, t[j]) >= 0 {
					if j == len(t)-1 {
						i++ // argument is the next word
					}
					break
				}
			}
		default:
			return words[i:]
		}
	}
	return nil
}

// skipAssignments drops NAME=value words (env, sudo).
func (n *normalizer) skipAssignments(words []word, depth int) []word {
	for len(words) > 0 && !words[0].dynamic {
		name, value, ok := strings.Cut(words[0].text, "=")
		if !ok || !validName(name) {
			break
		}
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

// command records one simple command and, for wrappers, the command they
// run, repeatedly.
func (n *normalizer) command(words []word, redirs []*syntax.Redirect, depth int) {
	for guard := 0; len(words) > 0 && guard < 64; guard++ {
		n.emit(words)
		w0 := words[0]
		if w0.dynamic {
			return // a dynamic program name matches every prefix
		}
		if strings.ContainsAny(w0.text, " \t\n;&|<>()$`") {
			// A program name with spaces only runs through a shell
			// (sudo -s "git push", watch "git push").
			n.script(w0.text, depth+1, false, "program name")
		}
		switch prog := basename(w0.text); prog {
		case "env":
			words = n.env(words, depth)
		case "command", "builtin", "nohup", "setsid", "unbuffer", "time":
			words = skipOptions(words, "fo", "--format", "--output")
		case "exec":
			words = skipOptions(words, "a")
		case "nice":
			words = skipOptions(words, "n", "--adjustment")
		case "ionice":
			words = skipOptions(words, "cnpPu", "--class", "--classdata", "--pid", "--pgid", "--uid")
		case "stdbuf":
			words = skipOptions(words, "ioe", "--input", "--output", "--error")
		case "timeout":
			words = skipOptions(words, "sk", "--signal", "--kill-after")
			if len(words) > 0 && !words[0].dynamic {
				words = words[1:] // the duration
			}
		case "strace", "ltrace":
			words = skipOptions(words, "eopsuabEIOPSX")
		case "chroot":
			words = skipOptions(words, "", "--userspec", "--groups")
			if len(words) > 0 && !words[0].dynamic {
				words = words[1:] // the new root
			}
			if len(words) == 0 {
				n.opaque("chroot runs an interactive shell")
			}
		case "sudo", "doas":
			rest := skipOptions(words, "ugCDhprtUTR", "--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--command-timeout")
			rest = n.skipAssignments(rest, depth)
			if len(rest) == 0 && hasShellFlag(words) {
				n.opaque(prog + " runs a shell reading stdin")
			}
			words = rest
		case "busybox":
			words = words[1:]
		case "xargs":
			rest := skipOptions(words, "adEILnPs", "--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var")
			if len(rest) == 0 {
				rest = []word{{text: "echo"}}
			}
			// xargs appends words read from stdin.
			words = append(append([]word(nil), rest...), word{dynamic: true, split: true})
		case "eval":
			text, ok := joinStatic(words[1:])
			if !ok {
				n.opaque("eval of an expansion")
				return
			}
			n.script(text, depth+1, true, "eval argument")
			return
		case "watch", "parallel":
			rest := skipOptions(words, "nd", "--interval")
			text, ok := joinStatic(rest)
			if !ok {
				n.opaque(prog + " of an expansion")
				return
			}
			n.script(text, depth+1, true, prog+" argument")
			return
		case "su", "runuser", "flock":
			n.commandString(words, prog, depth)
			return
		case "find":
			n.findExec(words, depth)
			return
		case "git":
			n.git(words, depth)
			return
		default:
			if shells[prog] {
				n.shell(words, redirs, depth)
			}
			return
		}
	}
}

func hasShellFlag(words []word) bool {
	for _, w := range words[1:] {
		if w.text == "-s" || w.text == "-i" || w.text == "--shell" || w.text == "--login" {
			return true
		}
	}
	return false
}

func (n *normalizer) env(words []word, depth int) []word {
	i := 1
	for i < len(words) {
		w := words[i]
		if w.dynamic {
			return words[i:]
		}
		t := w.text
		switch {
		case t == "--":
			i++
			return n.skipAssignments(words[i:], depth)
		case t == "-S" || t == "--split-string" || strings.HasPrefix(t, "-S") || strings.HasPrefix(t, "--split-string="):
			// env -S 'git push' splits the string into a command.
			var s string
			switch {
			case strings.HasPrefix(t, "--split-string="):
				s = strings.TrimPrefix(t, "--split-string=")
			case len(t) > 2 && t[1] == 'S':
				s = t[2:]
			case i+1 < len(words) && !words[i+1].dynamic:
				i++
				s = words[i].text
			default:
				n.opaque("env -S of an expansion")
				return nil
			}
			rest, ok := joinStatic(words[i+1:])
			if !ok {
				n.opaque("env -S with an expansion")
				return nil
			}
			n.script(s+" "+rest, depth+1, true, "env -S string")
			return nil
		case t == "-u" || t == "-C" || t == "-P" || t == "--unset" || t == "--chdir":
			i += 2
		case strings.HasPrefix(t, "-"):
			i++
		default:
			return n.skipAssignments(words[i:], depth)
		}
	}
	return nil
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
		var s string
		switch {
		case t == "-c" || t == "--command":
			if i+1 >= len(words) || words[i+1].dynamic {
				n.opaque(prog + " -c of an expansion")
				return
			}
			s = words[i+1].text
		case strings.HasPrefix(t, "--command="):
			s = strings.TrimPrefix(t, "--command=")
		default:
			continue
		}
		n.script(s, depth+1, true, prog+" command")
		return
	}
	if prog == "flock" {
		// flock [options] file command [args]
		rest := skipOptions(words, "wEn", "--timeout", "--conflict-exit-code")
		if len(rest) > 1 {
			n.command(rest[1:], nil, depth)
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
		}
		// Otherwise a script file, which is not inspected.
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
	n.opaque("shell reading commands from stdin")
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
	"--super-prefix": true, "--config-env": true, "--attr-source": true, "--exec-path": false,
}

func (n *normalizer) git(words []word, depth int) {
	i := 1
	for i < len(words) {
		w := words[i]
		if w.dynamic || !strings.HasPrefix(w.text, "-") {
			break
		}
		t := w.text
		if t == "-c" || t == "--config-env" {
			if i+1 < len(words) {
				n.gitConfig(words[i+1], depth)
			}
		} else if strings.HasPrefix(t, "--config-env=") {
			n.gitConfig(word{text: strings.TrimPrefix(t, "--config-env=")}, depth)
		} else if strings.HasPrefix(t, "-c") {
			n.gitConfig(word{text: t[2:]}, depth)
		}
		if gitArgOptions[t] {
			i += 2
		} else {
			i++
		}
	}
	if i > len(words) {
		i = len(words)
	}
	rest := append([]word{words[0]}, words[i:]...)
	if i > 1 {
		n.emit(rest)
	}
	if len(rest) < 2 || rest[1].dynamic {
		return
	}
	// Subcommands that run a command string.
	switch rest[1].text {
	case "submodule":
		for j := 2; j < len(rest); j++ {
			if !rest[j].dynamic && rest[j].text == "foreach" {
				if text, ok := joinStatic(skipOptions(rest[j:], "")); ok {
					n.script(text, depth+1, true, "git submodule foreach")
				} else {
					n.opaque("git submodule foreach of an expansion")
				}
				return
			}
		}
	case "rebase":
		for j := 2; j < len(rest); j++ {
			t := rest[j].text
			if (t == "-x" || t == "--exec") && j+1 < len(rest) {
				if rest[j+1].dynamic {
					n.opaque("git rebase --exec of an expansion")
					return
				}
				n.script(rest[j+1].text, depth+1, true, "git rebase --exec")
			} else if strings.HasPrefix(t, "--exec=") {
				n.script(strings.TrimPrefix(t, "--exec="), depth+1, true, "git rebase --exec")
			}
		}
	case "bisect":
		if len(rest) > 3 && !rest[2].dynamic && rest[2].text == "run" {
			n.command(rest[3:], nil, depth)
		}
	}
}

// gitConfig inspects a "-c key=value": an alias can rename any subcommand,
// and many values are commands git runs (core.pager, core.sshCommand, ...).
func (n *normalizer) gitConfig(w word, depth int) {
	if w.dynamic {
		n.opaque("git -c of an expansion")
		return
	}
	key, value, _ := strings.Cut(w.text, "=")
	if strings.HasPrefix(strings.ToLower(key), "alias.") {
		n.opaque("git -c defines an alias")
		return
	}
	n.script(strings.TrimPrefix(value, "!"), depth+1, false, "git config value")
}
