package bash

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Which words of a command are paths it reads, so that the file rules
// (Read rules for what is read, Write rules for what is written) judge a
// Bash line as they judge the file tools: cat .env is a Read of .env, and
// grep -r KEY . a search of the tree under ".". The catalogue's option
// parser tells options from operands; this table says, per program, which
// operands and option values are paths. A program outside it has every
// word taken as a path it may read (the deny side's reading).

// Operand is a path a command line may read.
type Operand struct {
	// Part is the command's place among the commands the line may run
	// (1-based), Index the word's place in that command (1-based), for a
	// reason that names a position, never the text.
	Part, Index int
	// Program is the command's program (base name).
	Program string
	Target
	// Tree: the program reads every file under the path (grep -r, rg,
	// cp -r), not the path alone.
	Tree bool
	// Narrow: the search can be narrowed by a rewrite (rg, grep -r; see
	// Narrow).
	Narrow bool
}

// pathRule is how one program's words name the paths it reads.
type pathRule struct {
	// none: no word is a path it reads (echo, date).
	none bool
	// script: the first operand is a pattern or a program, not a path,
	// unless one of these options gives it.
	script []string
	// files: options whose value is a file the program reads; files2:
	// options whose second value is (jq --slurpfile name file).
	files  []string
	files2 []string
	// tree says whether the command reads whole trees under its
	// operands; dot: with no path operand it searches ".".
	tree func(words []word) bool
	dot  bool
	// narrow: a rewrite can exclude paths from its search.
	narrow bool
}

func always([]word) bool { return true }

var pathRules = map[string]pathRule{
	"echo": {none: true}, "printf": {none: true}, "true": {none: true}, "false": {none: true},
	"seq": {none: true}, "date": {none: true}, "pwd": {none: true}, "whoami": {none: true},
	"id": {none: true}, "uname": {none: true}, "nproc": {none: true}, "which": {none: true},
	"basename": {none: true}, "dirname": {none: true}, "tr": {none: true},
	"cd": {none: true}, "pushd": {none: true}, "popd": {none: true},
	"grep":  {script: []string{"-e", "--regexp", "-f", "--file"}, files: []string{"-f", "--file", "--exclude-from"}, tree: grepRecursive, narrow: true},
	"egrep": {script: []string{"-e", "--regexp", "-f", "--file"}, files: []string{"-f", "--file", "--exclude-from"}, tree: grepRecursive, narrow: true},
	"fgrep": {script: []string{"-e", "--regexp", "-f", "--file"}, files: []string{"-f", "--file", "--exclude-from"}, tree: grepRecursive, narrow: true},
	"rg":    {script: []string{"-e", "--regexp", "-f", "--file"}, files: []string{"-f", "--file", "--ignore-file"}, tree: always, dot: true, narrow: true},
	"sed":   {script: []string{"-e", "--expression", "-f", "--file"}, files: []string{"-f", "--file"}},
	"awk":   {script: []string{"-f"}, files: []string{"-f"}},
	"gawk":  {script: []string{"-f"}, files: []string{"-f"}},
	"mawk":  {script: []string{"-f"}, files: []string{"-f"}},
	"nawk":  {script: []string{"-f"}, files: []string{"-f"}},
	"jq":    {script: []string{"-f", "--from-file"}, files: []string{"-f", "--from-file"}, files2: []string{"--slurpfile", "--rawfile"}},
	"diff":  {files: []string{"--from-file", "--to-file", "-X", "--exclude-from"}, tree: func(w []word) bool { return hasShort(w, 'r') || hasAnyWord(w, "--recursive") }},
	"file":  {files: []string{"-f", "--files-from", "-m", "--magic-file"}},
	"cp":    {tree: copiesTree},
	"mv":    {},
	"scp":   {tree: copiesTree},
	"rsync": {tree: always},
	"tar":   {files: []string{"-f", "--file", "-T", "--files-from", "-X", "--exclude-from"}, tree: always},
	"zip":   {tree: func(w []word) bool { return hasShort(w, 'r') || hasAnyWord(w, "--recurse-paths") }},
}

// grepRecursive: grep reads trees with -r, -R or --directories=recurse.
func grepRecursive(w []word) bool {
	return hasShort(w, 'r') || hasShort(w, 'R') || hasAnyWord(w, "--recursive", "--dereference-recursive", "--directories=recurse") || hasAdjacent(w, "-d", "recurse")
}

func hasAdjacent(words []word, opt, value string) bool {
	for i := 1; i+1 < len(words); i++ {
		if !words[i].dynamic && words[i].text == opt && !words[i+1].dynamic && words[i+1].text == value {
			return true
		}
	}
	return false
}

// copiesTree: cp and scp copy a directory's tree with -r, -R or -a.
func copiesTree(w []word) bool {
	return hasShort(w, 'r') || hasShort(w, 'R') || hasShort(w, 'a') || hasAnyWord(w, "--recursive", "--archive")
}

// Reads returns the paths the line may read: the path operands and file
// option values of every command it may run (inside substitutions and
// re-read strings, after wrappers), files redirected into a command, and,
// for a search, the tree it reads ("." when it names none). git's
// "rev:path" words name path at the repository's root, which may be
// anywhere: they are read as a tail at an unknown place.
func (a *Analysis) Reads() []Operand {
	a.readsOnce.Do(func() { a.reads = a.computeReads() })
	return a.reads
}

func (a *Analysis) computeReads() []Operand {
	var out []Operand
	for _, w := range a.redirectedIn {
		for _, t := range wordTargets(w, "") {
			out = append(out, Operand{Target: t})
		}
	}
	for k, c := range a.loose {
		out = commandReads(out, k+1, c)
	}
	return out
}

// commandReads appends what one command (part of the line) may read.
func commandReads(out []Operand, part int, c looseCommand) []Operand {
	if len(c.words) == 0 || c.words[0].dynamic {
		return out
	}
	prog := c.words[0].text
	if prog == "git" {
		return append(out, gitReads(part, c)...)
	}
	rule, known := pathRules[prog]
	if rule.none {
		return out
	}
	r := operandReader{out: out, part: part, c: c, prog: prog, rule: rule, tree: rule.tree != nil && rule.tree(c.words)}
	if !known {
		for i, w := range c.words[1:] {
			r.add(i+1, w)
		}
		return r.out
	}
	paths, scriptGiven := r.operands()
	if rule.script != nil && !scriptGiven && paths > 0 {
		paths--
	}
	if paths == 0 && (rule.dot || r.tree && rule.narrow) {
		// A search without a path reads the working directory.
		r.out = append(r.out, Operand{Part: part, Program: prog, Target: Target{Text: path.Join(c.dir, "."), Partial: c.anyDir}, Tree: true, Narrow: rule.narrow})
	}
	return r.out
}

// operandReader collects the paths one command of a known program reads.
type operandReader struct {
	out  []Operand
	part int
	c    looseCommand
	prog string
	rule pathRule
	tree bool
}

// add records word i (or an option's value) as a path the command reads.
func (r *operandReader) add(i int, w word) {
	for _, t := range wordTargets(w, r.c.dir) {
		if r.c.anyDir && !t.Partial && !strings.HasPrefix(t.Text, "/") {
			t.Partial = true
		}
		r.out = append(r.out, Operand{Part: r.part, Index: i, Program: r.prog, Target: t, Tree: r.tree, Narrow: r.tree && r.rule.narrow})
	}
}

// operands reads the command's words: its operands (but the pattern or
// program, unless an option gave it) and the files its options name.
// It returns how many operands there are and whether an option gave the
// pattern or program.
func (r *operandReader) operands() (operands int, scriptGiven bool) {
	ws := r.c.words
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		if !strings.HasPrefix(w.text, "-") || w.text == "-" {
			operands++
			if operands == 1 && r.rule.script != nil && !scriptGiven {
				continue // the pattern or the program
			}
			r.add(i, w)
			continue
		}
		name, value, attached := strings.Cut(w.text, "=")
		scriptGiven = scriptGiven || r.rule.givesScript(name)
		i = r.optionFiles(i, name, value, attached)
	}
	return operands, scriptGiven
}

// givesScript: option name gives the pattern or the program (-e, -f,
// --regexp=...), so no operand is one.
func (rule pathRule) givesScript(name string) bool {
	for _, s := range rule.script {
		if name == s || !strings.HasPrefix(name, "--") && len(s) == 2 && strings.HasPrefix(name, s) {
			return true
		}
	}
	return false
}

// optionFiles records the files option i names (its value, attached or
// the next word, -fFILE, or jq's second value) and returns the index of
// the last word it took.
func (r *operandReader) optionFiles(i int, name, value string, attached bool) int {
	ws := r.c.words
	for _, f := range r.rule.files2 {
		if name == f && i+2 < len(ws) {
			i += 2
			r.add(i, ws[i])
		}
	}
	for _, f := range r.rule.files {
		switch {
		case name == f && attached:
			r.add(i, word{text: value})
		case name == f && i+1 < len(ws):
			i++
			r.add(i, ws[i])
		case len(f) == 2 && !strings.HasPrefix(name, "--") && strings.HasPrefix(name, f) && len(name) > 2:
			r.add(i, word{text: name[2:]}) // -fFILE
		}
	}
	return i
}

// gitReads: every operand of a git command may be a path it shows (git
// show HEAD:.env, git diff -- .env, git blame .env); rev:path names a path
// at the repository's root.
func gitReads(part int, c looseCommand) []Operand {
	var out []Operand
	if len(c.words) > 1 && !c.words[1].dynamic && gitContent[c.words[1].text] {
		// It shows the content of the repository's files (a diff, a
		// patch, matching lines): the whole tree, narrowed by pathspecs.
		out = append(out, Operand{Part: part, Program: "git", Target: Target{Partial: true}, Tree: true, Narrow: true})
	}
	for i := 2; i < len(c.words); i++ {
		w := c.words[i]
		if !w.dynamic && excludePathspec(w.text) {
			continue // leaves paths out; reads nothing
		}
		if !w.dynamic && strings.HasPrefix(w.text, "-") {
			if _, v, ok := strings.Cut(w.text, "="); ok && strings.Contains(v, ":") {
				w = word{text: v} // --contents=... and the like
			} else {
				continue
			}
		}
		for _, t := range wordTargets(w, c.dir) {
			out = append(out, Operand{Part: part, Index: i, Program: "git", Target: t})
		}
		if _, p, ok := strings.Cut(w.text, ":"); ok {
			if j := strings.LastIndexByte(p, ')'); j >= 0 {
				p = p[j+1:] // :(top,icase)path
			}
			if p != "" {
				out = append(out, Operand{Part: part, Index: i, Program: "git", Target: Target{Text: p, Pattern: w.glob, Partial: true}})
			}
		}
	}
	return out
}

// gitContent are the catalogue's git subcommands that show files' content
// (git show's patch, git grep's lines) of any path in the repository.
var gitContent = map[string]bool{"diff": true, "log": true, "show": true, "whatchanged": true, "grep": true,
	"diff-tree": true, "diff-index": true, "diff-files": true}

// excludePathspec: a pathspec with the exclude magic (:(exclude)x, :!x,
// :^x), which removes paths from what git shows.
func excludePathspec(t string) bool {
	if strings.HasPrefix(t, ":!") || strings.HasPrefix(t, ":^") {
		return true
	}
	magic, _, ok := strings.Cut(strings.TrimPrefix(t, ":("), ")")
	if !ok || !strings.HasPrefix(t, ":(") {
		return false
	}
	for _, m := range strings.Split(magic, ",") {
		if m == "exclude" {
			return true
		}
	}
	return false
}

// gitExclusion is the pathspec that leaves the tail out of what git
// shows: from the top, case-insensitive, ** crossing directories; an
// excluded path stays out whatever other pathspecs say.
func gitExclusion(tail string) string { return ":(top,exclude,icase,glob)**/" + tail }

// Exclusion is a path a narrowed search leaves out: Tail, a relative
// glob matched at any depth, case-insensitively ("secrets/**", ".env").
type Exclusion struct{ Tail string }

// rgExclusion is the rg option that leaves the tail out: --iglob is
// case-insensitive and, like every glob flag, overrides rg's ignore files
// (a planted .ignore cannot bring the file back).
func rgExclusion(tail string) string { return "--iglob=!**/" + tail }

// grepExclusion is the grep option that leaves the tail out: a tail
// ending in /** is a directory (--exclude-dir of its last name), any other
// a file (--exclude of its last name); grep matches both against base names
// at every depth, and case-sensitively, so every ASCII letter is written
// as a class of both cases. ok is false when the name holds a character
// that cannot be folded that way.
func grepExclusion(tail string) (string, bool) {
	opt := "--exclude="
	name := tail
	if d, ok := strings.CutSuffix(tail, "/**"); ok {
		opt, name = "--exclude-dir=", d
	}
	name = name[strings.LastIndexByte(name, '/')+1:]
	if name == "" || name == "**" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 0x80 || c == '[' || c == ']' || c == '\\':
			return "", false
		case c >= 'a' && c <= 'z':
			b.WriteString("[" + string(c) + string(c-32) + "]")
		case c >= 'A' && c <= 'Z':
			b.WriteString("[" + string(c+32) + string(c) + "]")
		default:
			b.WriteByte(c)
		}
	}
	return opt + b.String(), true
}

// Excludes reports whether command part of the line (Operand.Part) holds
// the options that leave ex out of its search, as Narrow writes them.
func (a *Analysis) Excludes(part int, ex Exclusion) bool {
	if part < 1 || part > len(a.loose) {
		return false
	}
	c := a.loose[part-1]
	want := ""
	switch c.words[0].text {
	case "git":
		return gitExcludes(c.words, ex)
	case "rg":
		want = rgExclusion(ex.Tail)
	case "grep", "egrep", "fgrep":
		w, ok := grepExclusion(ex.Tail)
		if !ok {
			return false
		}
		want = w
	default:
		return false
	}
	// Where the exclusion stands, and whether anything could undo it: a
	// later glob brings files back in rg (the last matching glob wins), an
	// --include that may name the file in grep (the last matching one
	// wins), following links reaches the file under another name, and a
	// word known only at run time could be any of these.
	at, end, ok := exclusionAt(c.words, want)
	if !ok || at < 0 || followsLinks(c.words[:end]) {
		return false
	}
	for i := 1; i < end; i++ {
		if undoes(c.words, i, at, end, ex) {
			return false
		}
	}
	return true
}

// gitExcludes: an exclude pathspec cannot be undone by another; it counts
// after "--", where git reads only pathspecs.
func gitExcludes(words []word, ex Exclusion) bool {
	dashes := false
	for _, w := range words[1:] {
		if w.dynamic && !w.glob {
			return false
		}
		dashes = dashes || w.text == "--"
		if dashes && w.text == gitExclusion(ex.Tail) {
			return true
		}
	}
	return false
}

// exclusionAt returns the last place of the option want among the
// command's options, -1 for none, and where its options end ("--", else
// the end); ok is false when a word is known only at run time.
func exclusionAt(words []word, want string) (at, end int, ok bool) {
	at, end = -1, len(words)
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.dynamic && !w.glob {
			return 0, 0, false
		}
		if w.text == "--" {
			return at, i, true
		}
		if w.text == want {
			at = i
		}
	}
	return at, end, true
}

// followsLinks: the search follows symbolic links (rg -L, grep -R,
// --follow, --dereference-recursive), reaching a file under another name.
func followsLinks(opts []word) bool {
	rg := opts[0].text == "rg"
	return hasShort(opts, 'L') && rg || hasShort(opts, 'R') && !rg || hasAnyWord(opts, "--follow", "--dereference-recursive")
}

// undoes: option i could bring back what the exclusion at leaves out: for
// rg, any option after it but exclusions; for grep, an --include that may
// name the excluded file.
func undoes(words []word, i, at, end int, ex Exclusion) bool {
	if words[0].text == "rg" {
		return i > at && !onlyExcludes(words, i, end)
	}
	name, value, _ := strings.Cut(words[i].text, "=")
	return len(name) >= 5 && strings.HasPrefix("--include", name) && mayName(value, ex.Tail)
}

// onlyExcludes: rg word i is no glob option, or one whose glob starts with
// '!' (it leaves more out, never brings anything back).
func onlyExcludes(words []word, i, end int) bool {
	t := words[i].text
	next := ""
	if i+1 < end {
		next = words[i+1].text
	}
	name, value, attached := strings.Cut(t, "=")
	switch {
	case strings.HasPrefix(name, "--glob") || strings.HasPrefix(name, "--iglob"):
		if name == "--glob-case-insensitive" {
			return true
		}
		if !attached {
			value = next
		}
		return strings.HasPrefix(value, "!")
	case len(t) > 1 && t[0] == '-' && t[1] != '-' && strings.ContainsRune(t, 'g'):
		return t == "-g" && strings.HasPrefix(next, "!")
	}
	return true
}

// mayName reports whether an --include pattern may match a file the
// exclusion leaves out (the exclusion's last name): told apart only when
// one is a literal name, or both are * and a literal suffix.
func mayName(include, tail string) bool {
	name := strings.TrimSuffix(tail, "/**")
	name = strings.ToLower(name[strings.LastIndexByte(name, '/')+1:])
	include = strings.ToLower(include)
	switch {
	case !strings.ContainsAny(name, "*?[{"):
		ok, err := path.Match(include, name)
		return ok || err != nil
	case !strings.ContainsAny(include, "*?[{"):
		ok, err := path.Match(name, include)
		return ok || err != nil
	case strings.HasPrefix(include, "*") && strings.HasPrefix(name, "*") && !strings.ContainsAny(include[1:]+name[1:], "*?[{"):
		return strings.HasSuffix(include, name[1:]) || strings.HasSuffix(name, include[1:])
	}
	return true
}

// narrowGit appends the exclusion pathspecs to a git command that shows
// content: after its "--" (with ":/", the whole tree, when no pathspec
// follows it, so that nothing is narrowed to less than asked), or after
// a "--" it adds. Without "--" its operands become revisions only, so a
// path given without "--" makes git refuse the line rather than widen it.
func narrowGit(args []*syntax.Word, words []word, excl []Exclusion) []*syntax.Word {
	sub := 1
	for sub < len(words) && !words[sub].dynamic && strings.HasPrefix(words[sub].text, "-") {
		sub++
	}
	if sub >= len(words) || words[sub].dynamic || !gitContent[words[sub].text] {
		return args
	}
	lit := func(s string) *syntax.Word {
		return &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: s}}}
	}
	out := append([]*syntax.Word{}, args...)
	dashes := -1
	for i := sub + 1; i < len(words); i++ {
		if !words[i].dynamic && words[i].text == "--" {
			dashes = i
			break
		}
	}
	if dashes < 0 {
		out = append(out, lit("--"))
	}
	if dashes < 0 || dashes == len(words)-1 {
		out = append(out, lit(":/"))
	}
	for _, e := range excl {
		out = append(out, lit(gitExclusion(e.Tail)))
	}
	return out
}

// Narrow rewrites a command line so that every rg and grep in it leaves
// the exclusions out of its search: their options are added after the
// program's name. ok is false when that cannot be done safely: the line
// does not parse, a search follows symbolic links (rg -L, grep -R: a link
// under another name reaches the file), or an exclusion cannot be
// written for grep. The caller analyses the result again.
func Narrow(cmd string, excl []Exclusion) (string, bool) {
	f, err := parse(cmd)
	if err != nil || len(excl) == 0 {
		return "", false
	}
	ok := true
	syntax.Walk(f, func(node syntax.Node) bool {
		call, is := node.(*syntax.CallExpr)
		if !is || len(call.Args) == 0 || !ok {
			return ok
		}
		ok = narrowCall(call, excl)
		return ok
	})
	if !ok {
		return "", false
	}
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, f); err != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// narrowCall adds the exclusions to one simple command that searches (git,
// rg, a recursive grep); false when the search cannot be narrowed.
func narrowCall(call *syntax.CallExpr, excl []Exclusion) bool {
	prog := convertWord(call.Args[0])
	if prog.dynamic {
		return true
	}
	words := make([]word, 0, len(call.Args))
	for _, a := range call.Args {
		words = append(words, convertWord(a))
	}
	name := basename(prog.text)
	if name == "git" {
		call.Args = narrowGit(call.Args, words, excl)
		return true
	}
	opts, searches, ok := searchExclusions(name, words, excl)
	if !searches || !ok {
		return ok
	}
	var added []*syntax.Word
	for _, o := range opts {
		added = append(added, &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: o}}})
	}
	// rg: after every other option (before "--"), since its last
	// matching glob wins. grep: right after its name, where an option
	// is one even when POSIXLY_CORRECT stops option parsing at the
	// first operand; an --include that may undo it is refused by
	// Excludes.
	at := 1
	if name == "rg" {
		at = len(call.Args)
		for i, w := range words {
			if i > 0 && !w.dynamic && w.text == "--" {
				at = i
				break
			}
		}
	}
	args := append([]*syntax.Word{}, call.Args[:at]...)
	args = append(args, added...)
	call.Args = append(args, call.Args[at:]...)
	return true
}

// searchExclusions returns the options that leave the exclusions out of
// an rg or a recursive grep (searches false for any other command); ok is
// false for a search that follows links or an exclusion grep cannot
// express.
func searchExclusions(name string, words []word, excl []Exclusion) (opts []string, searches, ok bool) {
	switch name {
	case "rg":
		if hasShort(words, 'L') || hasAnyWord(words, "--follow") {
			return nil, true, false
		}
		for _, ex := range excl {
			opts = append(opts, rgExclusion(ex.Tail))
		}
		return opts, true, true
	case "grep", "egrep", "fgrep":
		if !grepRecursive(words) {
			return nil, false, true
		}
		if hasShort(words, 'R') || hasAnyWord(words, "--dereference-recursive") {
			return nil, true, false
		}
		for _, ex := range excl {
			o, good := grepExclusion(ex.Tail)
			if !good {
				return nil, true, false
			}
			opts = append(opts, o)
		}
		return opts, true, true
	}
	return nil, false, true
}
