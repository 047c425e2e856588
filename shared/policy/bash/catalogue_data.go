package bash

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Sources the entries were checked against (each entry names one):
//   - coreutils: GNU coreutils 9.x --help and info pages (ls, cat, head,
//     tail, wc, sort, uniq, cut, tr, stat, du, ...); the dangerous ones
//     left out are sort -o/--output/--compress-program/-T, uniq's second
//     operand (an output file), tail -f/--pid (never ends), du/wc
//     --files0-from.
//   - grep: GNU grep 3.x --help; it has no option that writes or runs.
//   - rg: ripgrep's --help; left out --pre/--pre-glob (run a program per
//     file), -z/--search-zip (runs decompressors), --hostname-bin (runs a
//     program).
//   - sed: GNU sed 4.9 manual; left out -i/--in-place, -f (a script the
//     analyser cannot see), and the e, w, W, r, R commands and the e and w
//     flags of s inside scripts.
//   - awk: POSIX awk, gawk and mawk manuals; left out -f, gawk's -e/-i/-l/-E
//     and programs using system(), getline, pipes, redirection, ENVIRON.
//   - find: GNU findutils manual; left out -exec, -execdir, -ok, -okdir,
//     -delete, -fprint, -fprint0, -fprintf, -fls.
//   - jq: jq 1.7 manual; left out -f/--from-file (a program the analyser
//     cannot see) and programs reading the environment ($ENV, env).
//   - tree: tree(1) 2.x; left out -o (writes a file) and -R (writes
//     00Tree.html in every directory).
//   - file: file(1) 5.x; left out -C (compiles a magic file: writes).
//   - git: git-scm.com/docs for each subcommand (git 2.39+); left out
//     --output (writes any file), --ext-diff and --textconv (run configured
//     programs), --no-index (reads any file outside the repository), git
//     grep -O (runs a pager), every global option but the ones that only
//     reduce what git does, and every writing form (branch/tag with a name
//     and no --list, config without --get/--list, stash/worktree/reflog/
//     remote subcommands other than their listing forms).
//   - claude-code: Claude Code's own read-only validation (its published
//     per-command flag allowlists) and the reports against it (git diff
//     --output, sed e/w, rg --pre, the 50-subcommand fall-through), read
//     for what each entry must leave out.

const anyPos = -1

// catalogue is built on first use, not at package init: a function that
// links the analyser but never reads a Bash line does not pay for it
// before its first invocation.
var catalogue = sync.OnceValue(func() map[string]*entry {
	m := map[string]*entry{}
	add := func(e *entry) { m[e.name] = e }

	add(mk("ls", "-a --all -A --almost-all --author -b --escape --block-size= -B --ignore-backups -c -C --color? -d --directory -D --dired -f -F --classify? --file-type --format= --full-time -g --group-directories-first -G --no-group -h --human-readable --si -H --dereference-command-line --dereference-command-line-symlink-to-dir --hide= --hyperlink? --indicator-style= -i --inode -I: --ignore= -k --kibibytes -l -L --dereference -m -n --numeric-uid-gid -N --literal -o -p -q --hide-control-chars --show-control-chars -Q --quote-name --quoting-style= -r --reverse -R --recursive -s --size -S --sort= --time= --time-style= -t -T: --tabsize= -u -U -v -w: --width= -x -X -Z --context --zero -1", anyPos, "coreutils"))
	add(mk("cat", "-A --show-all -b --number-nonblank -e -E --show-ends -n --number -s --squeeze-blank -t -T --show-tabs -u -v --show-nonprinting", anyPos, "coreutils"))
	add(mk("head", "-c: --bytes= -n: --lines= -q --quiet --silent -v --verbose -z --zero-terminated -NUM", anyPos, "coreutils"))
	add(mk("tail", "-c: --bytes= -n: --lines= -q --quiet --silent -v --verbose -z --zero-terminated -NUM", anyPos, "coreutils"))
	add(mk("wc", "-c --bytes -m --chars -l --lines -L --max-line-length -w --words", anyPos, "coreutils"))
	add(mk("sort", "-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g --general-numeric-sort -i --ignore-nonprinting -M --month-sort -h --human-numeric-sort -n --numeric-sort -R --random-sort -r --reverse --sort= -V --version-sort -c --check? -C -k: --key= -m --merge -s --stable -S: --buffer-size= -t: --field-separator= --parallel= -u --unique -z --zero-terminated --debug", anyPos, "coreutils"))
	add(mk("uniq", "-c --count -d --repeated -D --all-repeated? -f: --skip-fields= --group? -i --ignore-case -s: --skip-chars= -u --unique -z --zero-terminated -w: --check-chars=", 1, "coreutils"))
	add(mk("cut", "-b: --bytes= -c: --characters= -d: --delimiter= -f: --fields= -n --complement -s --only-delimited --output-delimiter= -z --zero-terminated", anyPos, "coreutils"))
	add(mk("tr", "-c -C --complement -d --delete -s --squeeze-repeats -t --truncate-set1", 2, "coreutils"))
	add(mk("stat", "-L --dereference -f --file-system --cached= -c: --format= --printf= -t --terse", anyPos, "coreutils"))
	add(mk("du", "-0 --null -a --all --apparent-size -B: --block-size= -b --bytes -c --total -D --dereference-args -d: --max-depth= -H -h --human-readable --inodes -k -L --dereference -l --count-links -m -P --no-dereference -S --separate-dirs --si -s --summarize -t: --threshold= --time? --time-style= --exclude= -x --one-file-system", anyPos, "coreutils"))
	add(mk("df", "-a --all -B: --block-size= -h --human-readable -H --si -i --inodes -k -l --local --output? -P --portability --total -t: --type= -T --print-type -x: --exclude-type=", anyPos, "coreutils"))
	add(mk("pwd", "-L -P", 0, "coreutils"))
	add(mk("basename", "-a --multiple -s: --suffix= -z --zero", anyPos, "coreutils"))
	add(mk("dirname", "-z --zero", anyPos, "coreutils"))
	add(mk("realpath", "-e --canonicalize-existing -m --canonicalize-missing -L --logical -P --physical -q --quiet -s --strip --no-symlinks -z --zero --relative-to= --relative-base=", anyPos, "coreutils"))
	add(mk("readlink", "-f --canonicalize -e --canonicalize-existing -m --canonicalize-missing -n --no-newline -q --quiet -s --silent -v --verbose -z --zero", anyPos, "coreutils"))
	add(mk("nl", "-b: --body-numbering= -d: --section-delimiter= -f: --footer-numbering= -h: --header-numbering= -i: --line-increment= -l: --join-blank-lines= -n: --number-format= -p --no-renumber -s: --number-separator= -v: --starting-line-number= -w: --number-width=", anyPos, "coreutils"))
	add(mk("tac", "-b --before -r --regex -s: --separator=", anyPos, "coreutils"))
	add(mk("rev", "", anyPos, "util-linux"))
	add(mk("comm", "-1 -2 -3 --check-order --nocheck-order --output-delimiter= --total -z --zero-terminated", 2, "coreutils"))
	add(mk("paste", "-d: --delimiters= -s --serial -z --zero-terminated", anyPos, "coreutils"))
	add(mk("fold", "-b --bytes -s --spaces -w: --width=", anyPos, "coreutils"))
	add(mk("expand", "-i --initial -t: --tabs=", anyPos, "coreutils"))
	add(mk("seq", "-f: --format= -s: --separator= -w --equal-width", 3, "coreutils"))
	for _, name := range []string{"md5sum", "sha1sum", "sha256sum", "sha512sum"} {
		add(mk(name, "-b --binary -c --check --tag -t --text -z --zero --ignore-missing --quiet --status --strict -w --warn", anyPos, "coreutils"))
	}
	add(mk("base64", "-d --decode -i --ignore-garbage -w: --wrap=", 1, "coreutils"))
	add(mk("od", "-A: --address-radix= -j: --skip-bytes= -N: --read-bytes= -S: --strings? -t: --format= -v --output-duplicates -w? --width? -a -b -c -d -f -i -l -o -s -x --endian=", anyPos, "coreutils"))
	add(mk("cmp", "-b --print-bytes -i: --ignore-initial= -l --verbose -n: --bytes= -s --quiet --silent", 4, "diffutils"))
	add(mk("diff", "-q --brief -s --report-identical-files -c -C: --context? -u -U: --unified? -e --ed -n --rcs -y --side-by-side -W: --width= --left-column --suppress-common-lines -p --show-c-function -F: --show-function-line= --label= -t --expand-tabs -T --initial-tab --tabsize= --suppress-blank-empty -r --recursive --no-dereference -N --new-file --unidirectional-new-file --ignore-file-name-case --no-ignore-file-name-case -x: --exclude= -S: --starting-file= --from-file= --to-file= -i --ignore-case -E --ignore-tab-expansion -Z --ignore-trailing-space -b --ignore-space-change -w --ignore-all-space -B --ignore-blank-lines -I: --ignore-matching-lines= -a --text --strip-trailing-cr -D: --ifdef= --line-format= --old-line-format= --new-line-format= --unchanged-line-format= -d --minimal --horizon-lines= --speed-large-files --color? --palette= --normal", anyPos, "diffutils"))
	add(mk("file", "-b --brief -c --checking-printout -E -e: --exclude= --exclude-quiet= --extension -F: --separator= -f: --files-from= -h --no-dereference -i --mime --mime-type --mime-encoding -k --keep-going -L --dereference -l --list -N --no-pad -n --no-buffer -p --preserve-date -P: --parameter= -r --raw -s --special-files -S --no-sandbox -z --uncompress -Z --uncompress-noreport -0 --print0", anyPos, "file"))
	add(mk("tree", "-a -d -l -f -x -L: -R -P: -I: --gitignore --gitfile= --ignore-case --matchdirs --metafirst --prune --info --infofile= --noreport --charset= --filelimit= --timefmt= -q -N -Q -p -u -g -s -h --si --du -D --inodes --device -F -v -t -c -U -r --dirsfirst --filesfirst --sort= -i -A -S -n -C -X -J", anyPos, "tree").with(func(p *parsed) string {
		if p.has("-R") {
			return "tree -R writes 00Tree.html into every directory"
		}
		return ""
	}))
	add(mk("grep", "-E --extended-regexp -F --fixed-strings -G --basic-regexp -P --perl-regexp -e: --regexp= -f: --file= -i --ignore-case --no-ignore-case -y -w --word-regexp -x --line-regexp -z --null-data -s --no-messages -v --invert-match -m: --max-count= -b --byte-offset -n --line-number --line-buffered -H --with-filename -h --no-filename --label= -o --only-matching -q --quiet --silent --binary-files= -a --text -I -d: --directories= -D: --devices= -r --recursive -R --dereference-recursive --include= --exclude= --exclude-from= --exclude-dir= -L --files-without-match -l --files-with-matches -c --count -T --initial-tab -Z --null -B: --before-context= -A: --after-context= -C: --context= -NUM --group-separator= --no-group-separator --color? --colour? -U --binary", anyPos, "grep"))
	add(mk("rg", "-e: --regexp= -f: --file= -i --ignore-case -S --smart-case -s --case-sensitive -F --fixed-strings -w --word-regexp -x --line-regexp -v --invert-match -c --count --count-matches -l --files-with-matches --files-without-match --files -n --line-number -N --no-line-number -H --with-filename -I --no-filename -o --only-matching -A: --after-context= -B: --before-context= -C: --context= -m: --max-count= -d: --max-depth= --max-filesize= -g: --glob= --iglob= -t: --type= -T: --type-not= --type-list -u --unrestricted -. --hidden --no-ignore --no-ignore-vcs --no-ignore-dot --no-ignore-parent -L --follow -U --multiline --multiline-dotall -P --pcre2 --engine= --json --vimgrep --heading --no-heading --color= --colors= -p --pretty -q --quiet -r: --replace= -0 --null --null-data --sort= --sortr= --stats -j: --threads= -a --text --binary --trim -M: --max-columns= --max-columns-preview --column --no-messages --passthru --byte-offset -b --line-buffered --block-buffered --crlf --no-config --path-separator= --field-context-separator= --field-match-separator= --context-separator= --no-context-separator --include-zero -E: --encoding= --debug --trace", anyPos, "rg"))
	add(mk("echo", "", anyPos, "bash").lit())
	add(mk("printf", "", anyPos, "bash").with(func(p *parsed) string {
		if len(p.pos) > 0 && p.posText(0) == "-v" {
			return "printf -v assigns a shell variable"
		}
		return ""
	}).lit())
	add(mk("true", "", anyPos, "bash").lit())
	add(mk("false", "", anyPos, "bash").lit())
	add(mk("which", "-a -s", anyPos, "debianutils"))
	add(mk("whoami", "", 0, "coreutils"))
	add(mk("id", "-a -Z --context -g --group -G --groups -n --name -r --real -u --user -z --zero", 1, "coreutils"))
	add(mk("uname", "-a --all -s --kernel-name -n --nodename -r --kernel-release -v --kernel-version -m --machine -p --processor -i --hardware-platform -o --operating-system", 0, "coreutils"))
	add(mk("nproc", "--all --ignore=", 0, "coreutils"))
	add(mk("date", "-d: --date= -I? --iso-8601? -R --rfc-email --rfc-3339= -r: --reference= -u --utc --universal", 1, "coreutils").with(func(p *parsed) string {
		// An operand that is not +FORMAT sets the clock.
		for i := range p.pos {
			if !strings.HasPrefix(p.posText(i), "+") {
				return "date with an operand other than +FORMAT sets the clock"
			}
		}
		return ""
	}))
	add(mk("sed", "-n --quiet --silent --debug -e: --expression= -E -r --regexp-extended -s --separate -z --null-data -u --unbuffered -l: --line-length= --posix --sandbox", anyPos, "sed").with(sedCheck))
	add(mk("awk", "-F: -v:", anyPos, "awk").with(awkCheck))
	m["gawk"], m["mawk"], m["nawk"] = m["awk"], m["awk"], m["awk"]
	add(mk("jq", "-r --raw-output -j --join-output -a --ascii-output -c --compact-output -C --color-output -M --monochrome-output -S --sort-keys -e --exit-status -n --null-input -s --slurp -R --raw-input --tab --indent= --arg:: --argjson:: --slurpfile:: --rawfile:: --args --jsonargs --seq --stream --raw-output0", anyPos, "jq").with(jqCheck))
	add(findEntry())
	add(gitEntry())
	return m
})

func (e *entry) lit() *entry {
	e.literal = true
	return e
}

// sedCheck accepts only scripts made of commands that print, delete,
// substitute (flags g, p, i, I, m, M, digits) or move between lines; e, w,
// W, r, R, and s///e and s///w are refused, as is a script from a file.
func sedCheck(p *parsed) string {
	scripts := p.values("-e")
	scripts = append(scripts, p.values("--expression")...)
	if len(scripts) == 0 {
		if len(p.pos) == 0 {
			return "sed without a script"
		}
		if p.glob[p.pos[0]] {
			return "sed script is a pattern"
		}
		scripts = []string{p.posText(0)}
	}
	for _, s := range scripts {
		if why := sedScript(s); why != "" {
			return why
		}
	}
	return ""
}

func sedScript(s string) string {
	sc := sedScanner{s: s}
	for {
		sc.skipSpace()
		if sc.i >= len(s) {
			return ""
		}
		if !sc.addresses() {
			return "sed script does not parse"
		}
		if why := sc.command(); why != "" {
			return why
		}
	}
}

// sedScanner reads a sed script, one command at a time.
type sedScanner struct {
	s string
	i int
}

func (sc *sedScanner) more() bool { return sc.i < len(sc.s) }

// skipWhile skips the bytes of set.
func (sc *sedScanner) skipWhile(set string) {
	for sc.more() && strings.IndexByte(set, sc.s[sc.i]) >= 0 {
		sc.i++
	}
}

func (sc *sedScanner) skipSpace() { sc.skipWhile(" \t\n;") }

// delimited reads a /re/ style part ending at delim; escapes allowed.
func (sc *sedScanner) delimited(delim byte) bool {
	for sc.more() {
		c := sc.s[sc.i]
		if c == '\\' {
			sc.i += 2
			continue
		}
		if c == '\n' {
			return false
		}
		sc.i++
		if c == delim {
			return true
		}
	}
	return false
}

// address reads an optional address: $, a line number (first~step), a
// /re/ with its flags, or a \cREc.
func (sc *sedScanner) address() bool {
	switch {
	case sc.more() && sc.s[sc.i] == '$':
		sc.i++
	case sc.more() && sc.s[sc.i] >= '0' && sc.s[sc.i] <= '9':
		sc.skipWhile("0123456789~")
	case sc.more() && sc.s[sc.i] == '/':
		sc.i++
		if !sc.delimited('/') {
			return false
		}
		sc.skipWhile("IM")
	case sc.i+1 < len(sc.s) && sc.s[sc.i] == '\\':
		d := sc.s[sc.i+1]
		sc.i += 2
		return sc.delimited(d)
	}
	return true
}

// addresses reads an address or a range of two (addr1,+N and addr1,~N
// too), then the spaces and '!' before the command.
func (sc *sedScanner) addresses() bool {
	if !sc.address() {
		return false
	}
	if sc.more() && sc.s[sc.i] == ',' {
		sc.i++
		if sc.more() && (sc.s[sc.i] == '+' || sc.s[sc.i] == '~') {
			sc.i++
		}
		if !sc.address() {
			return false
		}
	}
	sc.skipWhile(" !")
	return sc.more()
}

// command reads one command and what ends it; "" when it is read-only.
func (sc *sedScanner) command() string {
	c := sc.s[sc.i]
	sc.i++
	switch c {
	case 'p', 'P', 'd', 'D', 'n', 'N', 'g', 'G', 'h', 'H', 'x', '=', 'l', 'q', 'Q', '{', '}', 'z':
		if c == 'q' || c == 'Q' || c == 'l' {
			sc.skipWhile("0123456789")
		}
	case 's', 'y':
		if !sc.substitution(c) {
			return "sed script does not parse"
		}
	default:
		return fmt.Sprintf("sed command %q is not in the read-only catalogue (e runs, w writes, r reads a file)", string(c))
	}
	sc.skipWhile(" ")
	if sc.more() && sc.s[sc.i] != ';' && sc.s[sc.i] != '\n' && sc.s[sc.i] != '}' {
		return "sed script does not parse"
	}
	return ""
}

// substitution reads s/re/text/flags or y/src/dst/ after its command.
func (sc *sedScanner) substitution(c byte) bool {
	if !sc.more() || sc.s[sc.i] == '\\' || sc.s[sc.i] == '\n' {
		return false
	}
	d := sc.s[sc.i]
	sc.i++
	if !sc.delimited(d) || !sc.delimited(d) {
		return false
	}
	if c == 's' {
		sc.skipWhile("gpiImM0123456789")
	}
	return true
}

// awkUnsafe finds what lets an awk program run a command, write a file or
// read beyond its operands. '>' is refused even as a comparison: telling
// one from a redirection needs the whole grammar. '@' is refused wherever it
// stands: it starts gawk's @load and @include, and its indirect call @f(),
// which calls the function a string names, built-ins included, so
// f = "sys" "tem"; @f("cmd") runs a command no word of the program names.
var awkUnsafe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`system|getline|close|fflush|ENVIRON|PROCINFO|[@|>]`)
})

func awkCheck(p *parsed) string {
	if len(p.pos) == 0 {
		return "awk without a program (or with -f)"
	}
	if p.glob[p.pos[0]] {
		return "awk program is a pattern"
	}
	if m := awkUnsafe().FindString(p.posText(0)); m != "" {
		return fmt.Sprintf("awk program uses %q, which can run a command, write a file or read the environment", m)
	}
	return ""
}

var jqUnsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$ENV|\benv\b|\binput_filename\b|\$__loc__`) })

func jqCheck(p *parsed) string {
	// With --args or --jsonargs the words after the program are values;
	// the program is still the first positional word.
	if len(p.pos) == 0 {
		return ""
	}
	if p.glob[p.pos[0]] {
		return "jq program is a pattern"
	}
	if m := jqUnsafe().FindString(p.posText(0)); m != "" {
		return fmt.Sprintf("jq program reads %q", m)
	}
	return ""
}

// findEntry: find's expression looks like options, so it has its own
// reader: options, starting points, then primaries with their arities.
func findEntry() *entry {
	primaries := map[string]int{
		"-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-iwholename": 1,
		"-regex": 1, "-iregex": 1, "-regextype": 1, "-type": 1, "-xtype": 1, "-maxdepth": 1,
		"-mindepth": 1, "-size": 1, "-mtime": 1, "-mmin": 1, "-atime": 1, "-amin": 1, "-ctime": 1,
		"-cmin": 1, "-newer": 1, "-anewer": 1, "-cnewer": 1, "-newermt": 1, "-newerct": 1, "-empty": 0,
		"-perm": 1, "-user": 1, "-group": 1, "-uid": 1, "-gid": 1, "-links": 1, "-readable": 0,
		"-writable": 0, "-executable": 0, "-print": 0, "-print0": 0, "-printf": 1, "-ls": 0,
		"-prune": 0, "-quit": 0, "-not": 0, "!": 0, "-a": 0, "-o": 0, "-and": 0, "-or": 0, "(": 0,
		")": 0, ",": 0, "-depth": 0, "-d": 0, "-follow": 0, "-xdev": 0, "-mount": 0, "-noleaf": 0,
		"-samefile": 1, "-inum": 1, "-lname": 1, "-ilname": 1, "-true": 0, "-false": 0,
		"-nouser": 0, "-nogroup": 0, "-daystart": 0, "-ignore_readdir_race": 0, "-used": 1,
	}
	e := &entry{name: "find", maxPos: anyPos, source: "findutils"}
	findCheck := func(words []string, glob []bool, trusted int) string {
		i := 1
		for i < len(words) && !glob[i] && (words[i] == "-H" || words[i] == "-L" || words[i] == "-P") {
			i++
		}
		for i < len(words) && (glob[i] || !strings.HasPrefix(words[i], "-") && words[i] != "!" && words[i] != "(") {
			if glob[i] && optionLike(words[i]) {
				return fmt.Sprintf("unquoted pattern %s could expand to an option", quotePattern(words[i]))
			}
			i++
		}
		for ; i < len(words); i++ {
			w := words[i]
			if glob[i] {
				return "find expression with an unquoted pattern"
			}
			n, ok := primaries[w]
			if !ok {
				if i < trusted {
					return errTrusted
				}
				return fmt.Sprintf("find %s is not in the read-only catalogue (it may run a program, delete or write a file)", quoteWord(w))
			}
			if i+n >= len(words) {
				if n > 0 {
					return fmt.Sprintf("find %s needs a value", quoteWord(w))
				}
				continue
			}
			for k := 1; k <= n; k++ {
				if glob[i+k] {
					return "find expression with an unquoted pattern"
				}
			}
			i += n
		}
		return ""
	}
	e.custom = findCheck
	return e
}
