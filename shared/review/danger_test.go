package review

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// TestBashDanger: opaque lines and destructive commands are named, once
// each and in order, wherever they sit in a compound line and however
// they are wrapped; ordinary lines name nothing.
func TestBashDanger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want []string // prefixes of the entries
	}{
		{"git status", nil},
		{"rm build.log", nil},
		{"ls && rm -rf /srv/app", []string{"destructive: rm"}},
		{"sudo rm -fr x; rm -R y", []string{"destructive: rm"}},
		{"git push --force origin main", []string{"destructive: git push"}},
		{"git -C repo push origin +main", []string{"destructive: git push"}},
		{"git push origin :old-branch", []string{"destructive: git push"}},
		{"git push origin main", nil},
		{"git reset --hard HEAD~3 && git clean -fdx", []string{"destructive: git reset", "destructive: git clean"}},
		{"find . -name '*.o' -delete", []string{"destructive: find"}},
		{"dd if=/dev/zero of=/dev/sda", []string{"destructive: dd"}},
		{"python3 -c 'import os'", []string{"opaque: "}},
		{"eval \"$X\"; rm -rf /", []string{"opaque: ", "destructive: rm"}},
		{"echo 'unclosed", []string{"opaque: "}},
		{"rm -- -rf", nil},
	}
	for _, tt := range tests {
		got := bashDanger(policy.TraceBash(map[string]any{"command": tt.line}))
		if len(got) != len(tt.want) {
			t.Errorf("bashDanger(%q) = %q, want %d entries %q", tt.line, got, len(tt.want), tt.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tt.want[i]) {
				t.Errorf("bashDanger(%q)[%d] = %q, want it to start %q", tt.line, i, got[i], tt.want[i])
			}
		}
	}
}

// TestMatchedPart: the part of a compound line that the rule asked about
// is found by judging each part alone, and shown in words the shell reads
// back as the same words.
func TestMatchedPart(t *testing.T) {
	t.Parallel()
	p, _, err := policy.Parse([]byte(`{"name":"p","default_verdict":"deny","rules":[
	  {"id":"read","tool":"Bash","match":{"command_prefix":["git status","ls"]},"verdict":"allow"},
	  {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	trace := func(line string) *policy.BashTrace { return policy.TraceBash(map[string]any{"command": line}) }
	if m := matchedPart(p, policy.Env{}, trace("git status && rm -rf 'my dir' && ls"), "ask-rm"); m == nil || m.Index != 2 || m.Of != 3 || m.Text != "rm -rf 'my dir'" {
		t.Errorf("matchedPart = %+v, want part 2 of 3, rm -rf 'my dir'", m)
	}
	if m := matchedPart(p, policy.Env{}, trace("rm x"), "ask-rm"); m != nil {
		t.Errorf("matchedPart of a one-part line = %+v, want nil", m)
	}
	if m := matchedPart(p, policy.Env{}, trace("ls; git status"), "ask-rm"); m != nil {
		t.Errorf("matchedPart with no part of the rule = %+v, want nil", m)
	}
	if got := shellWords([]string{"echo", "it's", "", "a b", "x=1"}); got != `echo 'it'\''s' '' 'a b' x=1` {
		t.Errorf("shellWords = %s", got)
	}
}

// TestGrantCovers: approving for the run is said to cover force pushes
// when the rule's prefixes reach git push, and nothing is said otherwise.
func TestGrantCovers(t *testing.T) {
	t.Parallel()
	for rule, want := range map[string]bool{
		`{"id":"p","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval"}`:      true,
		`{"id":"g","tool":"Bash","match":{"command_prefix":["git"]},"verdict":"require_approval"}`:           true,
		`{"id":"r","tool":"Bash","match":{"command_prefix":["rm","git pull"]},"verdict":"require_approval"}`: false,
		`{"id":"w","tool":"Write","verdict":"require_approval"}`:                                             false,
	} {
		if got := grantCovers(json.RawMessage(rule)); (got != "") != want || want && !strings.Contains(got, "force pushes") {
			t.Errorf("grantCovers(%s) = %q, want said: %v", rule, got, want)
		}
	}
}
