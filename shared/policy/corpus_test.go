package policy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// The corpus (testdata/bash_corpus.jsonl) holds hostile and ordinary Bash
// lines, each with its class and the decision expected under two
// policies: a tripwire (default allow; deny git push and curl, approval for
// rm) and a read-only allow list (default deny). The policies use only
// fields every version of the engine reads, so the same test can be run
// against an older engine to count what it allowed
// (FLUIDBOX_CORPUS_COUNT_ONLY=1 prints the counts and asserts nothing).
const corpusTripwire = `{"name":"tripwire","default_verdict":"allow","rules":[
  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
  {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"},
  {"id":"no-curl","tool":"Bash","match":{"command_prefix":["curl","wget"]},"verdict":"deny"}]}`

const corpusReadOnly = `{"name":"read-only","default_verdict":"deny","rules":[
  {"id":"read","tool":"Bash","match":{"command_prefix":["git status","git diff","git log","git show","git branch",
    "ls","cat","head","tail","wc","grep","find","sed","awk","jq","sort","uniq","cut","echo","pwd","diff"]},"verdict":"allow"},
  {"id":"tests","tool":"Bash","match":{"command_prefix":["npm test"]},"verdict":"allow"}]}`

type corpusLine struct {
	Class        string  `json:"class"`
	Cmd          string  `json:"cmd"`
	DefaultAllow Verdict `json:"default_allow"`
	DefaultDeny  Verdict `json:"default_deny"`
}

func readCorpus(t *testing.T) []corpusLine {
	t.Helper()
	f, err := os.Open("testdata/bash_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []corpusLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l corpusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("corpus line %d: %v", len(lines)+1, err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestBashCorpus(t *testing.T) {
	t.Parallel()
	lines := readCorpus(t)
	if len(lines) < 200 {
		t.Fatalf("corpus has %d lines, want at least 200", len(lines))
	}
	tripwire, readOnly := mustParse(t, corpusTripwire), mustParse(t, corpusReadOnly)
	countOnly := os.Getenv("FLUIDBOX_CORPUS_COUNT_ONLY") != ""
	// Per class: lines, allowed under the tripwire, allowed read-only.
	perClass := map[string]*[3]int{}
	allowedTripwire, allowedReadOnly := 0, 0
	for _, l := range lines {
		n := perClass[l.Class]
		if n == nil {
			n = new([3]int)
			perClass[l.Class] = n
		}
		n[0]++
		a := tripwire.Evaluate("Bash", bashInput(l.Cmd))
		d := readOnly.Evaluate("Bash", bashInput(l.Cmd))
		if a.Verdict == VerdictAllow {
			allowedTripwire++
			n[1]++
		}
		if d.Verdict == VerdictAllow {
			allowedReadOnly++
			n[2]++
		}
		if countOnly {
			continue
		}
		if a.Verdict != l.DefaultAllow {
			t.Errorf("[%s] %q under the tripwire policy: %s (%s), want %s", l.Class, l.Cmd, a.Verdict, a.Reason, l.DefaultAllow)
		}
		if d.Verdict != l.DefaultDeny {
			t.Errorf("[%s] %q under the read-only policy: %s (%s), want %s", l.Class, l.Cmd, d.Verdict, d.Reason, l.DefaultDeny)
		}
		if a.Verdict != VerdictAllow && a.Reason == "" || d.Verdict != VerdictAllow && d.Reason == "" {
			t.Errorf("[%s] %q: a refusal without a reason", l.Class, l.Cmd)
		}
	}
	classes := make([]string, 0, len(perClass))
	for c := range perClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	for _, c := range classes {
		n := perClass[c]
		t.Logf("class %-14s %3d lines, allowed %3d tripwire, %3d read-only", c, n[0], n[1], n[2])
	}
	t.Logf("%d lines; allowed: %d under the tripwire policy, %d under the read-only policy", len(lines), allowedTripwire, allowedReadOnly)
}

// corpusStrict is a read-only allow list that also denies pushes and
// refuses opaque lines outright, so that bash.opaque decides with a deny.
const corpusStrict = `{"name":"strict","default_verdict":"deny","bash":{"opaque":"deny"},"rules":[
  {"id":"read","tool":"Bash","match":{"command_prefix":["git status","git diff","git log","ls","cat","grep","head","wc"]},"verdict":"allow"},
  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`

// TestBashCorpusReasons: every refusal of a corpus line under every policy
// teaches. It names the deciding rule; for an opaque line, the construct,
// and bash.opaque when that is what decided; for "no rule matched" on a
// line of several commands, the part that matched no allow rule. It never
// carries the command's arguments.
func TestBashCorpusReasons(t *testing.T) {
	t.Parallel()
	policies := map[string]*Policy{
		"tripwire":  mustParse(t, corpusTripwire),
		"read-only": mustParse(t, corpusReadOnly),
		"strict":    mustParse(t, corpusStrict),
	}
	for _, l := range readCorpus(t) {
		a := bash.Analyze(l.Cmd)
		opaque, construct := a.Opaque()
		for name, p := range policies {
			r := p.Evaluate("Bash", bashInput(l.Cmd))
			if r.Verdict == VerdictAllow {
				continue
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Errorf("[%s] %q under %s: %s %q: %s", l.Class, l.Cmd, name, r.Verdict, r.Reason, fmt.Sprintf(format, args...))
			}
			if r.RuleID != "" && !strings.Contains(r.Reason, strconv.Quote(r.RuleID)) {
				fail("does not name rule %q", r.RuleID)
			}
			direct := strings.HasPrefix(r.Reason, "denied by rule ") || strings.HasSuffix(r.Reason, " requires approval")
			if opaque && !direct {
				if !strings.Contains(r.Reason, construct) {
					fail("does not name the construct %q", construct)
				}
				if r.RuleID != "" && !strings.Contains(r.Reason, "(bash.opaque)") {
					fail("does not say bash.opaque decided")
				}
			}
			if !opaque && strings.HasPrefix(r.Reason, "no rule matched") && a.Parts() > 1 && !strings.Contains(r.Reason, fmt.Sprintf(" of %d (", a.Parts())) {
				fail("does not name the part that matched no allow rule")
			}
			for _, arg := range []string{"evil.example", "sk-live", "/tmp/evil", "origin main"} {
				if strings.Contains(r.Reason, arg) {
					fail("quotes the argument %q", arg)
				}
			}
		}
	}
}

// TestCompoundReasons: a line of several commands refused because of one
// of them says which.
func TestCompoundReasons(t *testing.T) {
	t.Parallel()
	p := mustParse(t, corpusStrict)
	tests := []struct{ cmd, want string }{
		{"git status && touch x", "part 2 of 2 (`touch`) matches no allow rule"},
		{"git status && git commit -m x", "part 2 of 2 (`git commit`) matches no allow rule"},
		{"ls | grep -r x * | wc -l", "part 2 of 3 (`grep`) starts with a prefix of rule \"read\" but unquoted pattern `*` could expand to an option"},
		{"git diff --output=x && ls", "part 1 of 2 (`git diff`) starts with a prefix of rule \"read\" but option `--output` is not in the read-only catalogue for git diff"},
		{"git status; cat f > out", "part 2 (`cat`): output redirection \">\" to a file"},
		{"ls && foo=1 ls", "part 2 (`ls`): environment assignment before the command"},
		{"git status; nice ls", "part 2 (`nice`): `nice` runs or alters another command"},
		{"ls && (cd x && ls)", "compound command (subshell)"},
	}
	for _, tt := range tests {
		r := p.Evaluate("Bash", bashInput(tt.cmd))
		if r.Verdict != VerdictDeny || !strings.Contains(r.Reason, tt.want) {
			t.Errorf("Evaluate(%q) = %s %q, want deny naming %q", tt.cmd, r.Verdict, r.Reason, tt.want)
		}
	}
	// Unparsable lines never carry the text the parser stopped at.
	for _, cmd := range []string{"echo $((1 s3cr3t-t0ken+ 2))", "[[ a -s3cr3t b ]]", "x s3cr3t/t0ken("} {
		r := p.Evaluate("Bash", bashInput(cmd))
		if r.Verdict != VerdictDeny || strings.Contains(r.Reason, "s3cr3t") || !strings.Contains(r.Reason, "does not parse") {
			t.Errorf("Evaluate(%q) = %s %q, want a deny that does not quote the input", cmd, r.Verdict, r.Reason)
		}
	}
}
