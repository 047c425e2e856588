package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
)

func TestEventsTimeline(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	ses, token := s.newRun(t)
	s.ask(t, ses, token, "e1", "git status")
	s.ask(t, ses, token, "e2", "git push origin main")
	p := s.ask(t, ses, token, "e3", "rm build.log")
	if r := fluidbox(ctx, s.env(), "", "deny", p.ApprovalID); r.code != 0 {
		t.Fatalf("deny: %+v", r)
	}

	r := fluidbox(ctx, s.env(), "", "events", ses)
	if r.code != 0 {
		t.Fatalf("fluidbox events = %+v", r)
	}
	want := []string{
		`^\s+1  \d\d:\d\d:\d\d  session\.created     policy pol_\S+ v1, 16 tools, trust \S+,`,
		`^\s+2  \d\d:\d\d:\d\d  tool\.requested      e1 Bash$`,
		`^\s+3  \d\d:\d\d:\d\d  tool\.decision       e1 Bash -> allow \(rule git-read\)$`,
		`^\s+4  \d\d:\d\d:\d\d  tool\.requested      e2 Bash$`,
		`^\s+5  \d\d:\d\d:\d\d  tool\.decision       e2 Bash -> deny \(policy, rule no-push\)$`,
		`^\s+6  \d\d:\d\d:\d\d  tool\.requested      e3 Bash$`,
		`approval\.requested  ` + p.ApprovalID + ` e3 Bash rule ask-rm scope once expires \d\d:\d\d:\d\d$`,
		`approval\.decided    ` + p.ApprovalID + ` e3 denied by admin$`,
		`tool\.decision       e3 Bash -> deny \(approval, rule ask-rm, approval ` + p.ApprovalID + `\)$`,
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("fluidbox events printed %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d = %q, want match for %q", i+1, lines[i], w)
		}
	}

	r = fluidbox(ctx, s.env(), "", "events", ses, "--json", "--after", "5")
	var page struct {
		Events []struct {
			Seq  int64
			Type string
		}
		LastSeq int64 `json:"last_seq"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Events) != 4 || page.Events[0].Seq != 6 || page.LastSeq != 9 {
		t.Errorf("fluidbox events --json --after 5 = %q (%v), want seqs 6..9 and last_seq 9", r.stdout, err)
	}
}

// dropStreams cuts every event stream after two events, and records the
// Last-Event-ID each stream was opened with.
type dropStreams struct {
	mu      sync.Mutex
	resumes []string
}

func (d *dropStreams) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			next.ServeHTTP(w, r)
			return
		}
		d.mu.Lock()
		d.resumes = append(d.resumes, r.Header.Get("Last-Event-ID"))
		d.mu.Unlock()
		next.ServeHTTP(&cutAfter{ResponseWriter: w, left: 2}, r)
	})
}

type cutAfter struct {
	http.ResponseWriter
	left int
}

func (c *cutAfter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), "id: ") {
		if c.left == 0 {
			c.Flush()
			panic(http.ErrAbortHandler) // the connection drops mid-stream
		}
		c.left--
	}
	return c.ResponseWriter.Write(b)
}

func (c *cutAfter) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// --follow prints what is there, then what comes, each event once, even
// when the connection drops every two events.
func TestEventsFollowResumesExactly(t *testing.T) {
	t.Parallel()
	drop := &dropStreams{}
	s := newStack(t, drop.wrap)
	ses, token := s.newRun(t)
	s.ask(t, ses, token, "f1", "git status")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"events", ses, "--follow"}, env(s.env()), nil, &out, &errb) }()

	waitFor(t, 10*time.Second, "the first three events", func() bool { return strings.Count(out.String(), "\n") >= 3 })
	s.ask(t, ses, token, "f2", "git push")
	s.ask(t, ses, token, "f3", "git status")
	waitFor(t, 15*time.Second, "seven events", func() bool { return strings.Count(out.String(), "\n") >= 7 })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("fluidbox events --follow exited %d after Ctrl-C (stderr %q), want 0", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fluidbox events --follow did not stop on cancel")
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != strconv.Itoa(i+1) {
			t.Fatalf("--follow printed %q; want seqs 1.. each once, in order", out.String())
		}
	}
	if len(lines) != 7 {
		t.Errorf("--follow printed %d events, want 7", len(lines))
	}
	if !strings.Contains(lines[4], "f2 Bash -> deny (policy, rule no-push)") {
		t.Errorf("line 5 = %q", lines[4])
	}
	if !strings.Contains(errb.String(), "resuming after seq 2") {
		t.Errorf("stderr %q should tell the human the stream resumed", errb.String())
	}
	drop.mu.Lock()
	defer drop.mu.Unlock()
	if len(drop.resumes) < 3 || drop.resumes[0] != "" || drop.resumes[1] != "2" {
		t.Errorf("streams opened with Last-Event-ID %q, want \"\", \"2\", ...", drop.resumes)
	}
}

// TestDescribeShadow: where a run's shadow policy would have differed, the
// timeline says what it would have decided.
func TestDescribeShadow(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"tool_call_id":"c1","tool_name":"Bash","decision":"allow","source":"policy","rule_id":"git","shadow_verdict":"deny","shadow_rule_id":"no-git"}`:     "c1 Bash -> allow (policy, rule git) [shadow: deny, rule no-git]",
		`{"tool_call_id":"c2","tool_name":"Bash","decision":"allow","source":"policy","shadow_verdict":"require_approval","shadow_rewritten_verdict":"deny"}`: "c2 Bash -> allow (policy) [shadow: require_approval rewritten to deny]",
		`{"tool_call_id":"c3","tool_name":"Read","decision":"deny","source":"policy","shadow_error":"shadow_unavailable"}`:                                    "c3 Read -> deny (policy) [shadow: shadow_unavailable]",
		`{"tool_call_id":"c4","tool_name":"Read","decision":"allow","source":"policy","rule_id":"read"}`:                                                      "c4 Read -> allow (policy, rule read)",
	}
	for data, want := range cases {
		if got := describeEvent(client.Event{Type: "tool.decision", Data: json.RawMessage(data)}); got != want {
			t.Errorf("describeEvent(%s) = %q, want %q", data, got, want)
		}
	}
	created := `{"policy_id":"pol_a","policy_version":2,"tools":7,"trust_tier":"trusted","shadow_policy_id":"pol_b","shadow_policy_version":3}`
	if got, want := describeEvent(client.Event{Type: "session.created", Data: json.RawMessage(created)}), "policy pol_a v2, 7 tools, trust trusted, shadow pol_b v3"; got != want {
		t.Errorf("describeEvent(%s) = %q, want %q", created, got, want)
	}
}

// TestEventsExport: every event of every run, one JSON line each, in seq
// order per run without a gap, as fluidbox's schema or as OCSF; usage
// errors exit 2.
func TestEventsExport(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	a, atok := s.newRun(t)
	b, btok := s.newRun(t)
	s.ask(t, a, atok, "e1", "git status")
	s.ask(t, b, btok, "e2", "git push origin main")
	p := s.ask(t, a, atok, "e3", "rm build.log")
	if r := fluidbox(ctx, s.env(), "", "deny", p.ApprovalID); r.code != 0 {
		t.Fatalf("deny: %+v", r)
	}

	r := fluidbox(ctx, s.env(), "", "events", "export", "--since", "1h")
	if r.code != 0 {
		t.Fatalf("events export = %+v", r)
	}
	seqs := map[string][]int64{}
	for _, line := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		var rec struct {
			Schema string `json:"schema"`
			RunID  string `json:"run_id"`
			Seq    int64  `json:"seq"`
			Type   string `json:"type"`
			Data   map[string]any
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Schema != "fluidbox.ledger.v1" || rec.Type == "" || rec.Data == nil {
			t.Fatalf("line %q: %+v, %v", line, rec, err)
		}
		seqs[rec.RunID] = append(seqs[rec.RunID], rec.Seq)
	}
	for _, run := range []string{a, b} {
		got := seqs[run]
		if len(got) == 0 {
			t.Fatalf("no events of %s exported", run)
		}
		for i, seq := range got {
			if seq != int64(i+1) {
				t.Fatalf("%s exported seqs %v, want 1..%d in order", run, got, len(got))
			}
		}
	}

	r = fluidbox(ctx, s.env(), "", "events", "export", "--since", "1h", "--format", "ocsf")
	if r.code != 0 {
		t.Fatalf("events export --format ocsf = %+v", r)
	}
	dispositions := map[string]float64{}
	for _, line := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["class_uid"] != float64(6003) || ev["type_uid"] != float64(600399) {
			t.Fatalf("OCSF line %q: %v", line, err)
		}
		md := ev["metadata"].(map[string]any)
		if d, ok := ev["disposition_id"].(float64); ok {
			dispositions[ev["activity_name"].(string)+" "+md["uid"].(string)] = d
		}
	}
	// e1 allowed; e2 denied; e3 waits (delayed), its approval is denied
	// (blocked) and so is the call.
	want := map[string]int{"tool.decision 1": 1, "tool.decision 2": 2, "approval.requested 14": 1, "approval.decided 2": 1}
	got := map[string]int{}
	for k, d := range dispositions {
		got[strings.Fields(k)[0]+" "+strconv.Itoa(int(d))]++
	}
	if len(got) != len(want) {
		t.Errorf("OCSF dispositions = %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("OCSF %s: %d events, want %d (all: %v)", k, got[k], n, dispositions)
		}
	}

	// Nothing is in the future.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r := fluidbox(ctx, s.env(), "", "events", "export", "--since", future); r.code != 0 || r.stdout != "" {
		t.Errorf("events export --since an hour ahead = %+v, want nothing", r)
	}
	for _, args := range [][]string{{"events", "export"}, {"events", "export", "--since", "1h", "--format", "csv"}, {"events", "export", "--since", "yesterday"}} {
		if r := fluidbox(ctx, s.env(), "", args...); r.code != 2 {
			t.Errorf("fluidbox %v = exit %d, want 2 (usage)", args, r.code)
		}
	}
}
