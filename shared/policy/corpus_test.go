package policy

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"testing"
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
