package bash

import (
	"fmt"
	"strings"
)

// Files that programs obey. The read-only catalogue says which words of git
// diff, rg or jq cannot write or run anything, but each of those programs
// also reads configuration or code from files: a .git/config with
// core.fsmonitor makes git status run a program, a .gitattributes naming a
// diff driver makes git diff run one, a ~/.jq is loaded into every jq
// program. An agent that may write such a file makes the catalogue's
// "read-only" command run anything. So a write to one of these paths is
// never covered by a broad allow rule (a path glob such as /work/** or a
// default allow): it needs a rule whose path names it, and a Bash line that
// writes one is never allowed (see Writes).
//
// The list is data, one entry per file or directory, each naming the
// program that obeys it; catalogue_test.go and the policy package's tests
// check every entry with its example path.

// Protected is one kind of path a program reads as configuration or code.
type Protected struct {
	// Glob is a doublestar glob over the cleaned path, matched
	// case-insensitively (file systems that fold case read .GIT as .git)
	// and at any depth (every entry starts with **/: the home directory
	// and the working directory of a sandbox are not known).
	Glob string
	// Name is the path segment an allow rule's glob must contain as a
	// literal segment to cover the path ("names it").
	Name string
	// Program is the program that obeys the file.
	Program string
	// Why says what the program does with it.
	Why string
	// Example is a path the entry protects, for its test.
	Example string
	// Revision: a command's operand that is just the name is a git
	// revision (git reset HEAD), not this file; a redirection to it, a
	// file tool's path or an operand with a directory still is.
	Revision bool
}

// protected is the list; ProtectedPaths hands out a copy.
var protected = []Protected{
	// git: every catalogue git subcommand reads these.
	{Glob: "**/.git/**", Name: ".git", Program: "git", Example: "/work/repo/.git/config",
		Why: "git's own directory: config (core.fsmonitor, core.pager, core.hooksPath, include.path, diff and filter drivers, aliases), hooks and info/attributes; a .git file names another directory git then uses"},
	{Glob: "**/.git", Name: ".git", Program: "git", Example: "/work/repo/sub/.git",
		Why: "a .git file (a worktree's or a submodule's) names the directory git uses as the repository"},
	{Glob: "**/.gitattributes", Name: ".gitattributes", Program: "git", Example: "/work/repo/src/.gitattributes",
		Why: "assigns the diff, textconv, filter and merge drivers git diff, git show and git log run"},
	{Glob: "**/.gitmodules", Name: ".gitmodules", Program: "git", Example: "/work/repo/.gitmodules",
		Why: "submodule configuration git status and git diff read"},
	{Glob: "**/.gitconfig", Name: ".gitconfig", Program: "git", Example: "/home/agent/.gitconfig",
		Why: "the global configuration (~/.gitconfig), read by every git command"},
	{Glob: "**/git/config", Name: "git", Program: "git", Example: "/home/agent/.config/git/config",
		Why: "the XDG configuration ($XDG_CONFIG_HOME/git/config), read by every git command"},
	{Glob: "**/git/attributes", Name: "git", Program: "git", Example: "/home/agent/.config/git/attributes",
		Why: "the XDG attributes file, which assigns diff and filter drivers"},
	{Glob: "**/gitconfig", Name: "gitconfig", Program: "git", Example: "/etc/gitconfig",
		Why: "the system configuration ($(prefix)/etc/gitconfig)"},
	{Glob: "**/HEAD", Name: "HEAD", Program: "git", Example: "/work/repo/vendor/x/HEAD", Revision: true,
		Why: "a directory holding HEAD, objects/ and refs/ is a repository git discovers from inside it, and its config then drives git"},
	// Hook directories that core.hooksPath usually names (husky's, and the
	// conventional one), and the configuration a pre-commit hook runs.
	{Glob: "**/.husky/**", Name: ".husky", Program: "git", Example: "/work/repo/.husky/pre-commit",
		Why: "husky sets core.hooksPath to it: git commit, merge and checkout run the hooks there"},
	{Glob: "**/.githooks/**", Name: ".githooks", Program: "git", Example: "/work/repo/.githooks/pre-commit",
		Why: "the usual core.hooksPath of a repository that keeps its hooks in the tree"},
	{Glob: "**/.pre-commit-config.yaml", Name: ".pre-commit-config.yaml", Program: "pre-commit", Example: "/work/repo/.pre-commit-config.yaml",
		Why: "the commands pre-commit's git hook runs on every commit"},
	// rg reads the file RIPGREP_CONFIG_PATH names; these are its usual names.
	{Glob: "**/.ripgreprc", Name: ".ripgreprc", Program: "rg", Example: "/home/agent/.ripgreprc",
		Why: "the usual file RIPGREP_CONFIG_PATH names; a line such as --pre makes rg run a program for every file it searches"},
	{Glob: "**/ripgrep/**", Name: "ripgrep", Program: "rg", Example: "/home/agent/.config/ripgrep/config",
		Why: "ripgrep's configuration directory, where RIPGREP_CONFIG_PATH usually points"},
	{Glob: "**/.jq", Name: ".jq", Program: "jq", Example: "/home/agent/.jq",
		Why: "~/.jq is loaded into every jq program (a file) or is jq's module directory"},
	// less is git's pager; lesskey files can set LESSOPEN, a program less runs.
	{Glob: "**/.lesskey", Name: ".lesskey", Program: "less", Example: "/home/agent/.lesskey",
		Why: "lesskey settings, which can set LESSOPEN, a program less runs on every file it shows (less is git's pager)"},
	{Glob: "**/lesskey", Name: "lesskey", Program: "less", Example: "/home/agent/.config/lesskey",
		Why: "lesskey settings ($XDG_CONFIG_HOME/lesskey), which can set LESSOPEN"},
	// The shell every Bash line runs in, and the shells it starts.
	{Glob: "**/.bashrc", Name: ".bashrc", Program: "bash", Example: "/home/agent/.bashrc", Why: "run by every interactive bash, and read into Claude Code's shell snapshot"},
	{Glob: "**/.bash_profile", Name: ".bash_profile", Program: "bash", Example: "/home/agent/.bash_profile", Why: "run by every login bash"},
	{Glob: "**/.bash_login", Name: ".bash_login", Program: "bash", Example: "/home/agent/.bash_login", Why: "run by a login bash without ~/.bash_profile"},
	{Glob: "**/.bash_logout", Name: ".bash_logout", Program: "bash", Example: "/home/agent/.bash_logout", Why: "run when a login bash exits"},
	{Glob: "**/.bash_aliases", Name: ".bash_aliases", Program: "bash", Example: "/home/agent/.bash_aliases", Why: "sourced by the usual ~/.bashrc; aliases rename any command"},
	{Glob: "**/.profile", Name: ".profile", Program: "sh", Example: "/home/agent/.profile", Why: "run by every login shell"},
	{Glob: "**/.zshrc", Name: ".zshrc", Program: "zsh", Example: "/home/agent/.zshrc", Why: "run by every interactive zsh"},
	{Glob: "**/.zshenv", Name: ".zshenv", Program: "zsh", Example: "/home/agent/.zshenv", Why: "run by every zsh, interactive or not"},
	{Glob: "**/.zprofile", Name: ".zprofile", Program: "zsh", Example: "/home/agent/.zprofile", Why: "run by every login zsh"},
	{Glob: "**/.zlogin", Name: ".zlogin", Program: "zsh", Example: "/home/agent/.zlogin", Why: "run by every login zsh"},
	{Glob: "**/.zlogout", Name: ".zlogout", Program: "zsh", Example: "/home/agent/.zlogout", Why: "run when a login zsh exits"},
	{Glob: "**/.kshrc", Name: ".kshrc", Program: "ksh", Example: "/home/agent/.kshrc", Why: "run by every interactive ksh"},
	{Glob: "**/.inputrc", Name: ".inputrc", Program: "bash", Example: "/home/agent/.inputrc", Why: "readline's key bindings, which can type commands"},
	{Glob: "**/.envrc", Name: ".envrc", Program: "direnv", Example: "/work/repo/.envrc", Why: "run by direnv's shell hook on entering the directory"},
	{Glob: "**/fish/**", Name: "fish", Program: "fish", Example: "/home/agent/.config/fish/config.fish", Why: "fish's configuration and functions, run by every fish"},
	{Glob: "**/etc/profile", Name: "profile", Program: "sh", Example: "/etc/profile", Why: "run by every login shell"},
	{Glob: "**/profile.d/**", Name: "profile.d", Program: "sh", Example: "/etc/profile.d/x.sh", Why: "run by /etc/profile"},
	{Glob: "**/bash.bashrc", Name: "bash.bashrc", Program: "bash", Example: "/etc/bash.bashrc", Why: "run by every interactive bash"},
	// Claude Code: its settings run hooks and start MCP servers.
	{Glob: "**/.claude/**", Name: ".claude", Program: "claude", Example: "/work/repo/.claude/settings.json",
		Why: "Claude Code's settings (hooks run commands; permissions), commands, agents, skills and shell snapshots"},
	{Glob: "**/.claude.json", Name: ".claude.json", Program: "claude", Example: "/home/agent/.claude.json",
		Why: "Claude Code's user configuration, including the MCP servers it starts"},
	{Glob: "**/.mcp.json", Name: ".mcp.json", Program: "claude", Example: "/work/repo/.mcp.json",
		Why: "the project's MCP servers, programs Claude Code starts"},
	// Project runners an allow rule may name (npm test, go test, cargo test).
	{Glob: "**/.npmrc", Name: ".npmrc", Program: "npm", Example: "/work/repo/.npmrc",
		Why: "npm's configuration: script-shell, node-options and the like change what every npm command runs"},
	{Glob: "**/.yarnrc", Name: ".yarnrc", Program: "yarn", Example: "/work/repo/.yarnrc", Why: "yarn's configuration (yarn-path runs another program as yarn)"},
	{Glob: "**/.yarnrc.yml", Name: ".yarnrc.yml", Program: "yarn", Example: "/work/repo/.yarnrc.yml", Why: "yarn's configuration (yarnPath runs another program as yarn)"},
	{Glob: "**/.pnpmfile.cjs", Name: ".pnpmfile.cjs", Program: "pnpm", Example: "/work/repo/.pnpmfile.cjs", Why: "code pnpm runs while resolving packages"},
	{Glob: "**/bunfig.toml", Name: "bunfig.toml", Program: "bun", Example: "/work/repo/bunfig.toml", Why: "bun's configuration (preload runs code before every script and test)"},
	{Glob: "**/.cargo/config", Name: ".cargo", Program: "cargo", Example: "/work/repo/.cargo/config", Why: "cargo's configuration (build.rustc-wrapper, target runners run programs)"},
	{Glob: "**/.cargo/config.toml", Name: ".cargo", Program: "cargo", Example: "/home/agent/.cargo/config.toml", Why: "cargo's configuration (build.rustc-wrapper, target runners run programs)"},
	{Glob: "**/go/env", Name: "go", Program: "go", Example: "/home/agent/.config/go/env", Why: "go's environment file (GOENV): GOFLAGS=-toolexec runs a program for every build step"},
	// ssh runs commands from its configuration whenever git reaches a remote.
	{Glob: "**/.ssh/**", Name: ".ssh", Program: "ssh", Example: "/home/agent/.ssh/config", Why: "ssh's configuration (ProxyCommand, LocalCommand, Match exec run commands), run by git fetch and git push"},
}

// ProtectedPaths returns the list of paths programs obey.
func ProtectedPaths() []Protected { return append([]Protected(nil), protected...) }

// treeWriters are programs that write files whose names no word of the
// line shows (an archive's members, a patch's targets, a remote tree):
// what they write may be any protected path. The function says whether
// the words ask for such a write ("" when they do not).
var treeWriters = map[string]func(words []word) bool{
	"tar":    tarExtracts,
	"bsdtar": tarExtracts,
	"unzip":  func(w []word) bool { return !hasAnyWord(w, "-l", "-t", "-v", "-Z", "-p", "-c", "-z") },
	"cpio":   func(w []word) bool { return hasShort(w, 'i') || hasAnyWord(w, "--extract") },
	"7z":     func(w []word) bool { return hasAnyWord(w, "x", "e") },
	"7za":    func(w []word) bool { return hasAnyWord(w, "x", "e") },
	"7zr":    func(w []word) bool { return hasAnyWord(w, "x", "e") },
	"ar": func(w []word) bool {
		return len(w) > 1 && strings.ContainsRune(strings.TrimPrefix(w[1].text, "-"), 'x')
	},
	"jar": func(w []word) bool {
		return len(w) > 1 && strings.ContainsRune(strings.TrimPrefix(w[1].text, "-"), 'x')
	},
	"pax":        func(w []word) bool { return hasShort(w, 'r') },
	"patch":      func([]word) bool { return true },
	"rsync":      remoteOperand, // a remote tree's names are not on the line
	"scp":        remoteOperand,
	"unsquashfs": func([]word) bool { return true },
	"curl": func(w []word) bool {
		return hasShort(w, 'J') || hasShort(w, 'K') || hasAnyWord(w, "--remote-header-name", "--config")
	},
	"wget": func(w []word) bool {
		for _, c := range []byte("rmxpi") {
			if hasShort(w, c) {
				return true
			}
		}
		return hasAnyWord(w, "--recursive", "--mirror", "--force-directories", "--page-requisites", "--input-file", "--content-disposition", "--trust-server-names")
	},
}

// GitTreeWrite says why the line may write, through git, files whose
// names are in the repository, not on the line ("" when it does not): git
// writes the working tree from a patch, another revision or another
// repository, and a commit made with git's plumbing may hold a
// .claude/settings.json that no word of a later checkout shows. A session
// grant never covers such a line; allow rules and a default allow are not
// changed by it (git pull and git reset --hard stay what they were).
func (a *Analysis) GitTreeWrite() string {
	for _, c := range a.loose {
		if len(c.words) > 0 && !c.words[0].dynamic && c.words[0].text == "git" && gitWritesTree(c.words) {
			sub := "git"
			if !c.words[1].dynamic {
				sub += " " + c.words[1].text
			}
			return fmt.Sprintf("`%s` writes files named in the repository, not on the line", sub)
		}
	}
	return ""
}

// gitWritesTree: the forms of git that leave the working tree alone are
// not such writes; a subcommand known only at run time is.
func gitWritesTree(w []word) bool {
	if len(w) < 2 {
		return false
	}
	if w[1].dynamic {
		return true
	}
	next := func(reads ...string) bool {
		if len(w) < 3 {
			return false
		}
		for _, r := range reads {
			if !w[2].dynamic && w[2].text == r {
				return false
			}
		}
		return true
	}
	switch w[1].text {
	case "apply":
		return hasAnyWord(w, "--apply") || !hasAnyWord(w, "--check", "--stat", "--numstat", "--summary")
	case "checkout":
		return !newBranchOnly(w, "-b", "-B")
	case "switch":
		return !newBranchOnly(w, "-c", "-C")
	case "reset":
		return hasAnyWord(w, "--hard", "--merge", "--keep")
	case "stash":
		return len(w) == 2 || next("list", "show")
	case "worktree":
		return next("list")
	case "submodule":
		return next("status", "summary")
	case "bisect":
		return next("log", "visualize", "view")
	case "am", "merge", "pull", "rebase", "cherry-pick", "revert", "restore", "read-tree", "checkout-index", "clone", "init", "sparse-checkout":
		return true
	}
	return false
}

// newBranchOnly: git checkout -b NAME (or switch -c NAME) with no start
// point, which makes a branch at HEAD and leaves the tree as it is.
func newBranchOnly(w []word, flags ...string) bool {
	if len(w) != 4 || w[2].dynamic || w[3].dynamic || strings.HasPrefix(w[3].text, "-") {
		return false
	}
	for _, f := range flags {
		if w[2].text == f {
			return true
		}
	}
	return false
}

func remoteOperand(words []word) bool {
	for _, w := range words[1:] {
		if w.dynamic || !strings.HasPrefix(w.text, "-") && strings.Contains(w.text, ":") {
			return true
		}
	}
	return false
}

func tarExtracts(w []word) bool {
	if len(w) > 1 && !strings.HasPrefix(w[1].text, "-") && strings.ContainsAny(w[1].text, "x") {
		return true // tar xf a.tar: the first word needs no dash
	}
	return hasShort(w, 'x') || hasAnyWord(w, "--extract", "--get")
}

// hasShort: some option cluster (-xzf) holds the letter.
func hasShort(words []word, c byte) bool {
	for _, w := range words[1:] {
		if w.dynamic || len(w.text) < 2 || w.text[0] != '-' || w.text[1] == '-' {
			continue
		}
		if strings.IndexByte(w.text[1:], c) >= 0 {
			return true
		}
	}
	return false
}

func hasAnyWord(words []word, texts ...string) bool {
	for _, w := range words[1:] {
		for _, t := range texts {
			if !w.dynamic && (w.text == t || strings.HasPrefix(w.text, t+"=")) {
				return true
			}
		}
	}
	return false
}

// configWriters are subcommands that write a protected file without
// naming it (git config writes .git/config or ~/.gitconfig); each entry
// is the words, and the forms that only read.
var configWriters = []struct {
	words []string
	reads []string // a word among these after the prefix makes it a read
	file  string
}{
	{[]string{"git", "submodule", "add"}, nil, ".gitmodules and .git/config"},
	{[]string{"git", "submodule", "init"}, nil, ".git/config"},
	{[]string{"git", "submodule", "sync"}, nil, ".git/config"},
	{[]string{"git", "submodule", "set-url"}, nil, ".gitmodules"},
	{[]string{"git", "submodule", "set-branch"}, nil, ".gitmodules"},
	{[]string{"git", "remote", "add"}, nil, ".git/config"},
	{[]string{"git", "remote", "set-url"}, nil, ".git/config"},
	{[]string{"git", "remote", "rename"}, nil, ".git/config"},
	{[]string{"git", "maintenance", "register"}, nil, "~/.gitconfig"},
	{[]string{"npm", "config"}, []string{"get", "list", "ls"}, ".npmrc"},
	{[]string{"npm", "set"}, nil, ".npmrc"},
	{[]string{"yarn", "config"}, []string{"get", "list"}, ".yarnrc"},
	{[]string{"pnpm", "config"}, []string{"get", "list"}, ".npmrc"},
	{[]string{"claude", "mcp"}, []string{"list", "get"}, ".mcp.json or ~/.claude.json"},
	{[]string{"claude", "config"}, []string{"get", "list"}, "~/.claude.json"},
}
