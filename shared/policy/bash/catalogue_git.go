package bash

// git's read-only subcommands. Options with an optional value (--stat,
// --color, -M, -U, ...) are spelt "?" because git reads their value only
// when attached: reading the next word as their value would let that word
// hide an option from this check.

// gitDiffOpts format a diff; none writes, runs a program or leaves the
// repository (--output, --ext-diff, --textconv and --no-index are left out).
const gitDiffOpts = "-p -u --patch -s --no-patch -U? --unified? --output-indicator-new= --output-indicator-old= --output-indicator-context= " +
	"--raw --patch-with-raw --patch-with-stat -t --indent-heuristic --no-indent-heuristic --minimal --patience --histogram --anchored= --diff-algorithm= " +
	"--stat? --compact-summary --numstat --shortstat -X? --dirstat? --cumulative --dirstat-by-file? --summary -z --name-only --name-status " +
	"--submodule? --color? --no-color --color-moved? --no-color-moved --color-moved-ws= --no-color-moved-ws --word-diff? --word-diff-regex= --color-words? " +
	"--no-renames --rename-empty --no-rename-empty --check --ws-error-highlight= --full-index --binary --abbrev? -B? --break-rewrites? -M? --find-renames? " +
	"-C? --find-copies? --find-copies-harder -D --irreversible-delete -l: --diff-filter= -S: -G: --find-object= --pickaxe-all --pickaxe-regex -O: " +
	"--skip-to= --rotate-to= -R --relative? --no-relative -a --text --ignore-cr-at-eol --ignore-space-at-eol -b --ignore-space-change -w --ignore-all-space " +
	"--ignore-blank-lines -I: --ignore-matching-lines= --inter-hunk-context= -W --function-context --exit-code --quiet --no-ext-diff --no-textconv " +
	"--ignore-submodules? --src-prefix= --dst-prefix= --no-prefix --default-prefix --line-prefix= --ita-invisible-in-index --ita-visible-in-index " +
	"-m -c --cc --dd --combined-all-paths --diff-merges= --no-diff-merges -r --root --merge-base"

// gitLogOpts limit and format a history walk.
const gitLogOpts = gitDiffOpts + " --follow --no-decorate --decorate? --decorate-refs= --decorate-refs-exclude= --source --mailmap --no-mailmap " +
	"--use-mailmap --no-use-mailmap --full-diff --log-size -L: -n: --max-count= --skip= --since= --after= --since-as-filter= --until= --before= " +
	"--author= --committer= --grep-reflog= --grep= --all-match --invert-grep -i --regexp-ignore-case --basic-regexp -E --extended-regexp -F " +
	"--fixed-strings -P --perl-regexp --remove-empty --merges --no-merges --min-parents= --max-parents= --no-min-parents --no-max-parents " +
	"--first-parent --exclude-first-parent-only --not --all --branches? --tags? --remotes? --glob= --exclude= --exclude-hidden= --reflog " +
	"--alternate-refs --single-worktree --ignore-missing --bisect --cherry-mark --cherry-pick --left-only --right-only --cherry -g --walk-reflogs " +
	"--merge --boundary --simplify-by-decoration --show-pulls --full-history --dense --sparse --simplify-merges --ancestry-path? --date-order " +
	"--author-date-order --topo-order --reverse --no-walk? --do-walk --pretty? --format= --abbrev-commit --no-abbrev-commit --oneline --encoding= " +
	"--expand-tabs? --no-expand-tabs --notes? --no-notes --show-notes? --standard-notes --no-standard-notes --relative-date --date= --parents " +
	"--children --left-right --graph --show-linear-break? -NUM"

func gitEntry() *entry {
	e := &entry{name: "git", source: "git", subs: map[string]*entry{}}
	// Global options that only reduce what git does.
	e.opts, _ = parseSpec("--no-pager -P --no-optional-locks --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-replace-objects --version")
	sub := func(name, spec string, check func(p *parsed) string) {
		s := mk("git "+name, spec, anyPos, "git")
		s.check = check
		e.subs[name] = s
	}
	sub("status", "-s --short -b --branch --show-stash --porcelain? --long -v --verbose -u? --untracked-files? --ignore-submodules? --ignored? -z --column? --no-column --ahead-behind --no-ahead-behind --renames --no-renames --find-renames?", nil)
	sub("diff", gitDiffOpts+" --cached --staged", nil)
	sub("log", gitLogOpts, nil)
	sub("show", gitLogOpts, nil)
	sub("whatchanged", gitLogOpts, nil)
	sub("diff-tree", gitDiffOpts+" --stdin --no-commit-id --always -v --pretty? --format=", nil)
	sub("diff-index", gitDiffOpts+" --cached", nil)
	sub("diff-files", gitDiffOpts+" -q -0 -1 -2 -3 --base --ours --theirs", nil)
	sub("rev-list", gitLogOpts+" --count --objects --objects-edge --no-object-names --timestamp --header", nil)
	sub("shortlog", "-n --numbered -s --summary -e --email -c --committer --group= -w? --format= --all --branches? --tags? --remotes? --since= --until= --author= --no-merges --merges --first-parent", nil)
	sub("branch", "-a --all -r --remotes -l --list -v --verbose --contains? --no-contains? --merged? --no-merged? --points-at= --sort= --format= --show-current --color? --no-color --column? --no-column --abbrev? --no-abbrev -i --ignore-case --omit-empty", listOnly("branch"))
	sub("tag", "-l --list -n? --contains? --no-contains? --merged? --no-merged? --points-at= --sort= --format= --column? --no-column -i --ignore-case --color? --omit-empty", listOnly("tag"))
	sub("rev-parse", "--abbrev-ref? --short? --verify -q --quiet --show-toplevel --show-prefix --show-cdup --git-dir --git-common-dir --absolute-git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --show-superproject-working-tree --symbolic --symbolic-full-name --all --branches? --tags? --remotes? --default= --revs-only --no-revs --flags --no-flags --sq --not --show-object-format? --show-ref-format", nil)
	sub("ls-files", "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -u --unmerged -k --killed -z -t -v -f --full-name --exclude-standard -x: --exclude= -X: --exclude-from= --exclude-per-directory= --error-unmatch --abbrev? --debug --eol --directory --no-empty-directory --recurse-submodules --deduplicate --sparse --format=", nil)
	sub("ls-tree", "-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree --abbrev? --format=", nil)
	sub("cat-file", "-t -s -e -p --batch? --batch-check? --batch-command? --batch-all-objects --buffer --unordered --allow-unknown-type --follow-symlinks -Z -z", nil)
	sub("blame", "-b --root --show-stats -L: -l -t -S: --reverse= --first-parent -p --porcelain --line-porcelain --incremental --encoding= --contents= --date= --progress --no-progress -M? -C? --ignore-rev= --ignore-revs-file= --color-lines --color-by-age --score-debug -f --show-name -n --show-number -s -e --show-email -w --abbrev? -c", nil)
	sub("annotate", "-b --root --show-stats -L: -l -t -S: --reverse= -p --porcelain --encoding= --contents= --date= -M? -C? -w --abbrev?", nil)
	sub("describe", "--tags --all --long --abbrev? --always --exact-match --contains --first-parent --match= --exclude= --candidates= --debug", nil)
	sub("grep", "--cached --untracked --no-exclude-standard --exclude-standard --recurse-submodules -a --text --textconv --no-textconv -i --ignore-case -I --max-depth= -r --recursive --no-recursive -w --word-regexp -v --invert-match -h -H --full-name -E --extended-regexp -G --basic-regexp -P --perl-regexp -F --fixed-strings -n --line-number --column -l --files-with-matches --name-only -L --files-without-match -z --null -o --only-matching -c --count --color? --no-color --break --heading -p --show-function -C: --context= -A: --after-context= -B: --before-context= -W --function-context -m: --max-count= --threads= -f: -e: --and --or --not --all-match -q --quiet -NUM", func(p *parsed) string {
		if p.has("--textconv") {
			return "git grep --textconv runs a configured program"
		}
		return ""
	})
	sub("merge-base", "-a --all --octopus --independent --is-ancestor --fork-point", nil)
	sub("name-rev", "--tags --refs= --exclude= --all --annotate-stdin --name-only --no-undefined --always", nil)
	sub("for-each-ref", "--count= --shell --perl --python --tcl --sort= --format= --color? --points-at= --merged? --no-merged? --contains? --no-contains? --ignore-case --omit-empty --exclude=", nil)
	sub("show-ref", "--head --heads --branches --tags -d --dereference -s --hash? --abbrev? -q --quiet --verify --exists", nil)
	sub("show-branch", "-a --all -r --remotes --topo-order --date-order --sparse --more? --list --merge-base --independent --no-name --current --sha1-name --topics -g --reflog? --color? --no-color", nil)
	sub("count-objects", "-v --verbose -H --human-readable", nil)
	sub("check-ignore", "-q --quiet -v --verbose --stdin -z -n --non-matching --no-index", nil)
	sub("check-attr", "-a --all --cached --stdin -z --source=", nil)
	sub("cherry", "-v --abbrev?", nil)
	sub("version", "--build-options", nil)
	sub("config", "--get --get-all --get-regexp --get-urlmatch -l --list --show-origin --show-scope --name-only -z --null --global --system --local --worktree --includes --no-includes --type= --bool --int --bool-or-int --path --expiry-date --default=", configRead)
	sub("remote", "-v --verbose", remoteRead)
	e.subs["stash"] = nested("stash", map[string]string{"list": gitLogOpts, "show": gitDiffOpts + " --include-untracked --only-untracked -u"})
	e.subs["worktree"] = nested("worktree", map[string]string{"list": "--porcelain -v --verbose -z --expire="})
	sub("reflog", gitLogOpts, func(p *parsed) string {
		if len(p.pos) > 0 {
			switch p.posText(0) {
			case "expire", "delete", "drop":
				return "git reflog " + p.posText(0) + " writes"
			}
		}
		return ""
	})
	return e
}

// listOnly: git branch and git tag create, rename or delete with a name
// operand unless they are listing: --list, or a filter that makes git
// list (builtin/branch.c and builtin/tag.c switch to listing for them).
func listOnly(name string) func(p *parsed) string {
	return func(p *parsed) string {
		if len(p.pos) == 0 || p.has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "-v", "--verbose", "-n") {
			return ""
		}
		return "git " + name + " with a name operand and no --list creates a " + name
	}
}

// configRead: git config reads only with --get*, --list or the get/list
// subcommands of newer git.
func configRead(p *parsed) string {
	if p.has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list") {
		return ""
	}
	if len(p.pos) > 0 && !p.glob[p.pos[0]] {
		switch p.posText(0) {
		case "get", "list":
			return ""
		}
	}
	return "git config without --get or --list writes the configuration"
}

// remoteRead: git remote lists; get-url prints. show and prune reach the
// network; add, remove, set-url and the rest write.
func remoteRead(p *parsed) string {
	if len(p.pos) == 0 {
		return ""
	}
	if p.posText(0) == "get-url" && !p.globPos {
		return ""
	}
	return "git remote " + quoteWord(p.posText(0)) + " writes or reaches the network"
}

// nested: subcommands with their own subcommands (git stash list), each
// read against its own options; the bare form writes.
func nested(name string, forms map[string]string) *entry {
	e := &entry{name: "git " + name, source: "git", opts: map[string]optKind{}, subs: map[string]*entry{}}
	for f, spec := range forms {
		e.subs[f] = mk("git "+name+" "+f, spec, anyPos, "git")
	}
	return e
}
