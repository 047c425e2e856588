package bash

import (
	"fmt"
	"strings"
)

// Programs that run the project's own code (package scripts, makefiles,
// test suites) carry options that change what runs or from where. Those
// options never ride an allow rule, even one that opts in to any options:
// "npm test" allowed must not become another package's script
// (--prefix=DIR) or another shell (--script-shell).
type runner struct {
	// never lists the options, without leading dashes.
	never []string
	// style is how the program reads options: "getopt" (short clusters,
	// -Cdir), "getopt_long" (getopt plus long options that may be
	// abbreviated: GNU getopt_long, Python's argparse), "nopt" (npm's
	// parser: long options may be abbreviated), "go" (one or two
	// dashes, names matched whole), or "js" (yargs and cac: --root-dir
	// is rootDir, so names are compared without case or dashes, dotted
	// names whole).
	style string
	// noAssign: an operand NAME=value overrides a variable (make SHELL=...),
	// after "--" too.
	noAssign bool
	// argFile: an operand starting with this byte names a file the
	// program reads further arguments from (pytest @args), 0 for none.
	argFile byte
}

var runners = map[string]runner{
	"npm":    {never: npmNever, style: "nopt"},
	"npx":    {never: npmNever, style: "nopt"},
	"pnpm":   {never: npmNever, style: "nopt"},
	"yarn":   {never: append([]string{"cwd"}, npmNever...), style: "nopt"},
	"bun":    {never: append([]string{"cwd", "preload", "r", "config"}, npmNever...), style: "nopt"},
	"make":   {never: makeNever, style: "getopt_long", noAssign: true},
	"gmake":  {never: makeNever, style: "getopt_long", noAssign: true},
	"go":     {never: []string{"C", "exec", "toolexec", "overlay", "modfile", "ldflags", "gcflags", "asmflags", "gccgoflags", "compiler", "vettool", "o", "pkgdir", "pgo"}, style: "go"},
	"cargo":  {never: []string{"manifest-path", "config", "Z", "target-dir", "C", "lockfile-path"}, style: "getopt"},
	"pytest": {never: []string{"p", "c", "config-file", "rootdir", "confcutdir", "o", "override-ini", "basetemp", "pyargs", "inifile", "pdbcls", "cov-config"}, style: "getopt", argFile: '@'},
	"tox":    {never: []string{"c", "conf", "workdir", "root", "x", "override", "installpkg", "force-dep", "discover"}, style: "getopt_long"},
	// jest and vitest load modules named by many options (setup files,
	// environments, reporters, transforms, runners, resolvers, ...).
	"jest": {never: []string{"c", "config", "rootDir", "roots", "setupFiles", "setupFilesAfterEnv", "testRunner", "globalSetup",
		"globalTeardown", "preset", "projects", "testEnvironment", "env", "reporters", "transform", "resolver", "runner",
		"testSequencer", "testResultsProcessor", "watchPlugins", "snapshotResolver", "moduleNameMapper", "modulePaths",
		"moduleDirectories", "dependencyExtractor", "prettierPath", "filter"}, style: "js"},
	"vitest": {never: []string{"c", "config", "r", "root", "dir", "globalSetup", "setupFiles", "reporter", "reporters",
		"environment", "workspace", "pool", "coverage.customProviderModule", "browser.provider", "typecheck.checker"}, style: "js"},
	"mvn":    {never: []string{"f", "file", "s", "settings", "gs", "global-settings"}, style: "getopt_long"},
	"gradle": {never: []string{"b", "build-file", "c", "settings-file", "p", "project-dir", "I", "init-script", "g", "gradle-user-home"}, style: "getopt"},
}

var makeNever = []string{"C", "directory", "f", "file", "makefile", "I", "include-dir", "e", "environment-overrides", "eval", "E"}

var npmNever = []string{"prefix", "C", "dir", "script-shell", "userconfig", "globalconfig", "node-options", "shell", "call", "c", "global", "g", "location", "workspace", "w", "workspaces", "include-workspace-root"}

// runnerSafe returns "" unless a word after the trusted prefix is one of a
// project runner's never options.
func runnerSafe(words []string, glob []bool, trusted int) string {
	r, ok := runners[basename(words[0])]
	if !ok {
		return ""
	}
	operands := false
	for i := trusted; i < len(words); i++ {
		w := words[i]
		if r.argFile != 0 && strings.HasPrefix(w, string(r.argFile)) {
			// Read wherever it stands: the file is expanded before "--" is.
			return fmt.Sprintf("%s operand %s reads further options from a file, which changes what runs", quoteWord(basename(words[0])), quoteWord(string(r.argFile)+"..."))
		}
		if w == "--" && !operands {
			if !r.noAssign && r.argFile == 0 {
				return "" // the rest are operands passed to the scripts or tests
			}
			// No more options, but NAME=value still assigns, and an
			// argument file is still read.
			operands = true
			continue
		}
		if r.noAssign && !strings.HasPrefix(w, "-") && strings.Contains(w, "=") {
			name, _, _ := strings.Cut(w, "=")
			if validName(name) {
				return fmt.Sprintf("%s operand %s overrides a variable, which changes what runs", quoteWord(words[0]), quoteWord(name))
			}
		}
		if operands || !strings.HasPrefix(w, "-") || len(w) < 2 {
			continue
		}
		if o := r.hits(w); o != "" {
			return fmt.Sprintf("%s option %s changes what runs or where, so no allow rule covers it", quoteWord(basename(words[0])), quoteWord(o))
		}
	}
	return ""
}

// jsName is an option name as yargs and cac compare it: --root-dir,
// --rootDir and --rootdir are one option.
func jsName(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "")) }

// hits returns the never option a word names, or "".
func (r runner) hits(w string) string {
	long := strings.HasPrefix(w, "--")
	name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
	for _, o := range r.never {
		switch {
		case name == o:
			return "-" + o
		case r.style == "js":
			if long && jsName(name) == jsName(o) {
				return "--" + o
			}
			if !long && len(o) == 1 && strings.Contains(name, o) {
				return "-" + o
			}
		case r.style == "go":
		case long && (r.style == "nopt" || r.style == "getopt_long") && len(name) >= 2 && strings.HasPrefix(o, name):
			// npm, getopt_long and argparse accept any unambiguous
			// abbreviation: --pre is --prefix, --eva is --eval.
			return "--" + o
		case !long && len(o) == 1 && strings.Contains(name, o):
			// A short option in a cluster or with an attached value
			// (-Cdir, -sC dir). Conservatively, anywhere in the word.
			return "-" + o
		}
	}
	return ""
}
