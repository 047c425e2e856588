package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/elicitation/elicitationtest"
	"github.com/fluidbox/fluidbox/shared/store"
)

// fileInput files a pending input request on run runID, as the broker
// does, and returns its id.
func (s *stack) fileInput(t *testing.T, runID, callID, server, url string) string {
	t.Helper()
	return elicitationtest.File(t, s.led, store.InputRequest{RunID: runID, ToolCallID: callID, Server: server, URL: url}).ID
}

// TestApprovalsListsInputRequests: `fluidbox approvals` lists the links to
// open after the approvals (each link without its query, the server's name
// cleaned for the terminal), with --json too; `approvals show` prints one whole, its query
// included, and says not to open a link that is not http or https;
// `approvals done` and `decline` answer them once, saying so when someone
// was first.
func TestApprovalsListsInputRequests(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	ses, _ := s.newRun(t)
	first := s.fileInput(t, ses, "c1", "docs\u202e", "https://auth.example.test/consent?state=abc123")
	second := s.fileInput(t, ses, "c2", "odd", "javascript:alert(1)")

	r := fluidbox(ctx, s.env(), "", "approvals")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 6 || lines[0] != "no pending approvals" || lines[1] != "" {
		t.Fatalf("fluidbox approvals = %+v, want no approvals, then the links' header, two rows and the total", r)
	}
	if !regexp.MustCompile(`^INPUT REQUEST\s+RUN\s+SERVER\s+TOOL\s+LINK\s+LEFT$`).MatchString(lines[2]) {
		t.Errorf("header = %q", lines[2])
	}
	row := regexp.MustCompile(`^` + first + `\s+` + ses + `\s+docs\s+mcp__docs__connect\s+https://auth\.example\.test/consent\s+1[45]m\d+s$`)
	if !row.MatchString(lines[3]) {
		t.Errorf("first row = %q, want id, run, server (its bidi override dropped), tool, link without its query and time left", lines[3])
	}
	if strings.Contains(r.stdout, "abc123") || strings.ContainsRune(r.stdout, '\u202e') {
		t.Errorf("the list shows a query or a raw bidi override:\n%s", r.stdout)
	}
	if !strings.HasPrefix(lines[5], "2 links to open") || !strings.Contains(lines[5], "fluidbox approvals done ID") {
		t.Errorf("footer = %q, want the count and how to answer", lines[5])
	}

	var js struct {
		Approvals     []json.RawMessage          `json:"approvals"`
		InputRequests []struct{ ID, URL string } `json:"input_requests"`
	}
	r = fluidbox(ctx, s.env(), "", "approvals", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || len(js.Approvals) != 0 || len(js.InputRequests) != 2 || js.InputRequests[0].ID != first {
		t.Fatalf("fluidbox approvals --json = %q (%v), want no approvals and both input requests", r.stdout, err)
	}

	r = fluidbox(ctx, s.env(), "", "approvals", "show", first)
	for _, want := range []string{"input request     " + first, "link              https://auth.example.test/consent?state=abc123",
		`connection        docs\u{202E} (con_docs)`, "fluidbox approvals done " + first, "fluidbox approvals decline " + first} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("approvals show = %+v, want %q in it", r, want)
		}
	}
	if strings.Contains(r.stdout, "do not open it") {
		t.Errorf("approvals show of an https link warns against it:\n%s", r.stdout)
	}
	if r := fluidbox(ctx, s.env(), "", "approvals", "show", second); !strings.Contains(r.stdout, "not an http or https link fluidbox offers to open: do not open it") {
		t.Errorf("approvals show of a javascript: link = %q, want a warning", r.stdout)
	}

	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{[]string{"approvals", "done", first}, 0, first + " completed: applied (run " + ses + ", docs)", ""},
		{[]string{"approvals", "done", first}, 0, first + " was already completed (by admin", ""},
		{[]string{"approvals", "decline", first}, 1, "", "not applied: " + first + " was already completed by admin"},
		{[]string{"approvals", "decline", second}, 0, second + " declined: applied", ""},
		{[]string{"approvals", "done"}, 2, "", "want exactly one input request id"},
		{[]string{"approvals", "done", "inp_nosuchrequest"}, 1, "", "not found"},
	}
	for _, tt := range tests {
		r := fluidbox(ctx, s.env(), "", tt.args...)
		if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantStdout) || !strings.Contains(r.stderr, tt.wantStderr) {
			t.Errorf("fluidbox %v = %+v, want exit %d, stdout with %q, stderr with %q", tt.args, r, tt.wantCode, tt.wantStdout, tt.wantStderr)
		}
	}
	if r := fluidbox(ctx, s.env(), "", "approvals"); r.stdout != "no pending approvals\n" {
		t.Errorf("fluidbox approvals after both were answered = %q, want nothing pending", r.stdout)
	}
}
