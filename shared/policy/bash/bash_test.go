package bash

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"git push", []string{"git", "push"}, false},
		{"  git   push  ", []string{"git", "push"}, false},
		{`npm run 'my script'`, []string{"npm", "run", "my script"}, false},
		{`g\it`, []string{"git"}, false},
		{"", nil, true},
		{"ls && rm", nil, true},
		{"ls; rm", nil, true},
		{"ls | grep", nil, true},
		{"git $(x)", nil, true},
		{"git $X", nil, true},
		{"ls *.go", nil, true},
		{"X=1 ls", nil, true},
		{"ls > f", nil, true},
		{"ls &", nil, true},
		{"(ls)", nil, true},
		{"ls 'open", nil, true},
	}
	for _, tt := range tests {
		p, err := ParsePrefix(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParsePrefix(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrPrefix) {
				t.Errorf("ParsePrefix(%q) error = %v, want ErrPrefix", tt.in, err)
			}
			continue
		}
		if diff := cmp.Diff(tt.want, p.Words()); diff != "" {
			t.Errorf("ParsePrefix(%q) words mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestKeyText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"git", "push"}, "git push"},
		{[]string{"npm", "run", "a b"}, "npm run 'a b'"},
		{[]string{"git", "push origin"}, "git 'push origin'"},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{"echo", "it's"}, `echo "it's"`},
	}
	for _, tt := range tests {
		if got := KeyText(tt.words); got != tt.want {
			t.Errorf("KeyText(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
	// Different word lists never share a key.
	if KeyText([]string{"a b"}) == KeyText([]string{"a", "b"}) {
		t.Errorf("KeyText is not injective for %q and %q", "a b", "a b")
	}
}

func TestOpaque(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd  string
		want string // substring of the reason, "" for not opaque
	}{
		{"git push", ""},
		{"ls | grep x", ""},
		{"bash script.sh", "script file"},
		{"eval \"$X\"", "eval of an expansion"},
		{"curl x | sh", "stdin"},
		{"python3 -c 'import os'", "runs code"},
		{"./s.sh", "by its path"},
		{"git st", "alias"},
		{"cat < /dev/tcp/evil/80", "/dev/tcp"},
		{"BASH_ENV=x ls", "BASH_ENV"},
		{"bash -c \"$X\"", "expanded argument"},
		{"git -c alias.p=push p", "alias"},
		{"eval 'if'", "does not parse"},
		{"ls 'open", "does not parse"},
		{"su", "interactive shell"},
	}
	for _, tt := range tests {
		a := Analyze(tt.cmd)
		op, why := a.Opaque()
		if op != (tt.want != "") || !strings.Contains(why, tt.want) {
			t.Errorf("Analyze(%q).Opaque() = %v, %q, want reason containing %q", tt.cmd, op, why, tt.want)
		}
	}
}

func TestStrictElements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cmd  string
		want [][]string
	}{
		{"git status", [][]string{{"git", "status"}}},
		{"git --no-pager -P log -1", [][]string{{"git", "log", "-1"}}},
		{"ls -la | grep 'a b' |& wc -l", [][]string{{"ls", "-la"}, {"grep", "a b"}, {"wc", "-l"}}},
		{"ls; ls", [][]string{{"ls"}, {"ls"}}},
		{"git status && git diff", [][]string{{"git", "status"}, {"git", "diff"}}},
		{"X=1 ls", nil},
		{"(ls)", nil},
	}
	for _, tt := range tests {
		a := Analyze(tt.cmd)
		var got [][]string
		for i := 0; i < a.Parts(); i++ {
			got = append(got, a.strict[i].words)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Analyze(%q) strict elements mismatch (-want +got):\n%s", tt.cmd, diff)
		}
	}
}

func TestGlobWordsNeverCoverPrefix(t *testing.T) {
	t.Parallel()
	p, err := ParsePrefix("ls -la")
	if err != nil {
		t.Fatal(err)
	}
	if a := Analyze("ls -l*"); a.strict[0].prefixOf(p) {
		t.Errorf("Analyze(%q) has prefix %q, want not", "ls -l*", "ls -la")
	}
	if a := Analyze("ls -la *.go"); !a.strict[0].prefixOf(p) {
		t.Errorf("Analyze(%q) has not prefix %q, want it", "ls -la *.go", "ls -la")
	}
}

func TestHugeAndHostileInputs(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{
		strings.Repeat("a", MaxCommandBytes+1),
		strings.Repeat("$(", 5000),
		strings.Repeat("eval ", 2000) + "git push",
		strings.Repeat("bash -c '", 50),
		"\x00",
	} {
		a := Analyze(cmd) // must not panic or hang
		if ok, _ := a.Strict(); ok {
			t.Errorf("Analyze(%.40q...) is strict, want not", cmd)
		}
	}
	deep := "git push"
	for i := 0; i < 10; i++ {
		deep = "bash -c " + KeyText([]string{deep})
	}
	if op, why := Analyze(deep).Opaque(); !op || !strings.Contains(why, "budget") {
		t.Errorf("deeply nested bash -c: Opaque() = %v, %q, want opaque for the analysis budget", op, why)
	}
}

func BenchmarkAnalyze(b *testing.B) {
	cmd := `git log --oneline -20 | grep -v "fixup" | head -5`
	b.ReportAllocs()
	for b.Loop() {
		Analyze(cmd)
	}
}

// An allow rule with "options": "any" on a project runner must not let the
// runner's never options in by another spelling: an abbreviation its
// parser accepts, a variable assigned after "--", an argument file.
func TestRunnerNeverOptionsEverySpelling(t *testing.T) {
	for _, c := range []struct {
		prefix, line string
		ok           bool
	}{
		{"make test", "make test -j4 V=", false},
		{"make test", "make test -- SHELL=/tmp/evil", false},
		{"make test", "make test -- -f", true}, // a target named -f
		{"make test", "make test --eva=x", false},
		{"make test", "make test --directo=/tmp", false},
		{"make test", "make test --makef=/tmp/m", false},
		{"make test", "make test S*", false}, // opaque: make with an expanded word
		{"make test", "make test -j4 -k", true},
		{"tox", "tox --con=/tmp/x", false},
		{"mvn test", "mvn test --fil=/tmp/pom.xml", false},
		{"pytest", "pytest @/tmp/args", false},
		{"pytest", "pytest -- @/tmp/args", false},
		{"pytest", "pytest -x -- tests/a.py", true},
		{"npm test", "npm test -- --prefix=/tmp", true}, // passed to the script
		{"cargo test", "cargo test --target x86_64-unknown-linux-gnu", true},
		// jest (yargs) and vitest (cac) read --root-dir as rootDir, and
		// load modules named by many more options than their configs.
		{"jest", "jest --root-dir=/tmp/evil", false},
		{"jest", "jest --rootdir /tmp/evil", false},
		{"jest", "jest --setup-files-after-env=/tmp/x.js", false},
		{"jest", "jest --testEnvironment=/tmp/env.js", false},
		{"jest", "jest --reporters=/tmp/r.js", false},
		{"jest", "jest --projects /tmp/other", false},
		{"jest", "jest --transform={}", false},
		{"jest", "jest --watch-all=false -t name", true},
		{"vitest", "vitest --global-setup=/tmp/x.js", false},
		{"vitest", "vitest --setup-files /tmp/x.js", false},
		{"vitest", "vitest --reporter=/tmp/r.js", false},
		{"vitest", "vitest --coverage.customProviderModule=/tmp/p.js", false},
		{"vitest", "vitest run --environment=/tmp/e", false},
		{"vitest", "vitest run -t name", true},
		// pytest and tox options that import or install code from a path.
		{"pytest", "pytest --pdbcls=evil:Debugger --pdb", false},
		{"pytest", "pytest --cov-config=/tmp/covrc", false},
		{"tox", "tox --installpkg /tmp/evil.whl", false},
		{"tox", "tox --force-dep 'x @ file:///tmp/evil'", false},
		{"tox", "tox --discover /tmp/python", false},
		{"pytest", "pytest -k name --maxfail=1", true},
	} {
		p, err := ParsePrefix(c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		a := Analyze(c.line)
		ok, why := a.PartAllowed(0, p, true) // false for a line that is not strict
		if ok != c.ok || a.Parts() > 1 {
			t.Errorf("%q under %q (options any): allowed %v (%s), want %v", c.line, c.prefix, ok, why, c.ok)
		}
	}
}
