package bash

import (
	"strings"
	"testing"
)

// Reads finds the paths a line reads, by the catalogue's reading of each
// program's words, and marks the searches.
func TestReads(t *testing.T) {
	t.Parallel()
	type want struct {
		text string
		tree bool
	}
	tests := []struct {
		line string
		want []want
		not  []string // texts that must not be read as paths
	}{
		{"cat .env", []want{{".env", false}}, nil},
		{"grep KEY .env", []want{{".env", false}}, []string{"KEY"}},
		{"grep -e KEY .env", []want{{".env", false}}, nil},
		{"grep -f pats.txt src", []want{{"pats.txt", false}, {"src", false}}, nil},
		{"grep -r KEY", []want{{".", true}}, []string{"KEY"}},
		{"rg KEY src", []want{{"src", true}}, []string{"KEY"}},
		{"rg -uu KEY", []want{{".", true}}, nil},
		{"sed -n 1p secrets/k", []want{{"secrets/k", false}}, []string{"1p"}},
		{"jq --slurpfile x .env . a.json", []want{{".env", false}, {"a.json", false}}, nil},
		{"cp -r secrets /tmp/s", []want{{"secrets", true}}, nil},
		{"git show HEAD:.env", []want{{".env", false}}, nil},
		{"cat < .env", []want{{".env", false}}, nil},
		{"sudo cat .env", []want{{".env", false}}, nil},
		{"echo .env", nil, []string{".env"}},
		{"cd sub && cat x", []want{{"sub/x", false}}, nil},
	}
	for _, tt := range tests {
		got := Analyze(tt.line).Reads()
		for _, w := range tt.want {
			found := false
			for _, op := range got {
				found = found || op.Text == w.text && op.Tree == w.tree
			}
			if !found {
				t.Errorf("Reads(%q) = %+v, want %q (tree %v)", tt.line, got, w.text, w.tree)
			}
		}
		for _, n := range tt.not {
			for _, op := range got {
				if op.Text == n {
					t.Errorf("Reads(%q) reads %q, a pattern or a string", tt.line, n)
				}
			}
		}
	}
}

// Narrow adds the exclusions to every rg and recursive grep, and refuses
// searches that follow links; Excludes recognises what it wrote.
func TestNarrow(t *testing.T) {
	t.Parallel()
	ex := []Exclusion{{Tail: ".env"}, {Tail: "secrets/**"}}
	tests := []struct {
		line string
		want []string
		ok   bool
	}{
		{"rg KEY", []string{"'--iglob=!**/.env'", "'--iglob=!**/secrets/**'"}, true},
		{"grep -r KEY . | head", []string{"'--exclude=.[eE][nN][vV]'", "'--exclude-dir=[sS][eE][cC][rR][eE][tT][sS]'"}, true},
		{"echo $(rg KEY)", []string{"'--iglob=!**/.env'"}, true},
		{"git diff", []string{"'--' ':/' ':(top,exclude,icase,glob)**/.env'"}, true},
		{"git log -p -- src", []string{"src ':(top,exclude,icase,glob)**/.env'"}, true},
		{"rg -L KEY", nil, false},
		{"grep -R KEY .", nil, false},
		{"rg 'unterminated", nil, false},
	}
	for _, tt := range tests {
		got, ok := Narrow(tt.line, ex)
		if ok != tt.ok {
			t.Errorf("Narrow(%q) ok = %v, want %v (%q)", tt.line, ok, tt.ok, got)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("Narrow(%q) = %q, want it to hold %s", tt.line, got, w)
			}
		}
		if ok {
			a := Analyze(got)
			for _, e := range ex {
				found := false
				for part := 1; part <= 3; part++ {
					found = found || a.Excludes(part, e)
				}
				if !found {
					t.Errorf("Excludes(%q) of %q = false for every part", e.Tail, got)
				}
			}
		}
	}
	// What could undo an exclusion: a later glob that brings files back
	// (rg: the last matching glob wins), an --include that may name the
	// file (grep), following links, a word known only at run time.
	for _, line := range []string{
		"rg KEY", "rg '--iglob=!**/.env' -g '*' KEY", "rg '--iglob=!**/.env' --glob=.env KEY", "rg '--iglob=!**/.env' -L KEY",
		"rg '--iglob=!**/.env' \"$G\" KEY", "grep '--exclude=.[eE][nN][vV]' '--include=*' -r KEY .",
		"grep '--exclude=.[eE][nN][vV]' --incl=.env -r KEY .", "grep '--exclude=.[eE][nN][vV]' -R KEY .",
	} {
		if Analyze(line).Excludes(1, ex[0]) {
			t.Errorf("Excludes(%q) of .env = true", line)
		}
	}
	for _, line := range []string{"rg -g '*.go' KEY '--iglob=!**/.env'", "rg '--iglob=!**/.env' -g '!*.md' KEY", "grep '--exclude=.[eE][nN][vV]' '--include=*.go' -r KEY ."} {
		if !Analyze(line).Excludes(1, ex[0]) {
			t.Errorf("Excludes(%q) of .env = false", line)
		}
	}
}
