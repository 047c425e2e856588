package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestApprovalsApproveDeny(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()

	if r := fluidbox(ctx, s.env(), "", "approvals"); r.code != 0 || r.stdout != "no pending approvals\n" {
		t.Fatalf("fluidbox approvals on an empty stack = %+v, want \"no pending approvals\"", r)
	}

	ses, token := s.newRun(t)
	first := s.ask(t, ses, token, "c1", "rm build.log")
	second := s.ask(t, ses, token, "c2", "rm 'a\x1b[2Jb.log'")
	if first.Decision != "pending" || second.Decision != "pending" {
		t.Fatalf("asks = %+v, %+v; want pending twice", first, second)
	}

	r := fluidbox(ctx, s.env(), "", "approvals")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("fluidbox approvals = %+v, want a header and two rows", r)
	}
	header := regexp.MustCompile(`^APPROVAL\s+RUN\s+TOOL\s+INPUT\s+RULE\s+LEFT$`)
	if !header.MatchString(lines[0]) {
		t.Errorf("header = %q", lines[0])
	}
	row := regexp.MustCompile(`^` + first.ApprovalID + `\s+` + ses + `\s+Bash\s+rm build\.log\s+ask-rm\s+1[45]m\d+s$`)
	if !row.MatchString(lines[1]) {
		t.Errorf("first row = %q, want id, run, tool, command, rule and about 15m left", lines[1])
	}
	if strings.ContainsRune(r.stdout, '\x1b') || !strings.Contains(lines[2], "rm 'a [2Jb.log'") {
		t.Errorf("second row = %q: agent input must reach the terminal without control characters", lines[2])
	}
	col := strings.Index(lines[0], "TOOL")
	for _, l := range lines[1:] {
		if len(l) < col || !strings.HasPrefix(l[col:], "Bash") {
			t.Errorf("row %q is not aligned under TOOL (column %d)", l, col)
		}
	}

	var js struct {
		Approvals []struct{ ID, Status, ToolName string } `json:"approvals"`
	}
	r = fluidbox(ctx, s.env(), "", "approvals", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || len(js.Approvals) != 2 || js.Approvals[0].ID != first.ApprovalID {
		t.Fatalf("fluidbox approvals --json = %q (%v), want both approvals oldest first", r.stdout, err)
	}

	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{[]string{"approve", first.ApprovalID}, 0, first.ApprovalID + " approved_once: applied (run " + ses + ", Bash rm build.log)", ""},
		{[]string{"approve", first.ApprovalID}, 0, first.ApprovalID + " was already approved_once (by admin", ""},
		{[]string{"deny", first.ApprovalID}, 1, "", "fluidbox deny: not applied: " + first.ApprovalID + " was already approved_once by admin"},
		{[]string{"approve", second.ApprovalID, "--session"}, 0, second.ApprovalID + " approved_session: applied", ""},
		{[]string{"approve", "--session", second.ApprovalID}, 0, "was already approved_session", ""},
	}
	for _, tt := range tests {
		r := fluidbox(ctx, s.env(), "", tt.args...)
		if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantStdout) || !strings.Contains(r.stderr, tt.wantStderr) {
			t.Errorf("fluidbox %v = %+v, want exit %d, stdout with %q, stderr with %q", tt.args, r, tt.wantCode, tt.wantStdout, tt.wantStderr)
		}
	}
	if r := fluidbox(ctx, s.env(), "", "approvals"); r.stdout != "no pending approvals\n" {
		t.Errorf("after deciding both, fluidbox approvals = %q", r.stdout)
	}

	// approve --session granted "rm" for the rest of that run: a new run asks again.
	ses2, token2 := s.newRun(t)
	third := s.ask(t, ses2, token2, "c3", "rm other.log")
	r = fluidbox(ctx, s.env(), "", "deny", third.ApprovalID, "--json", "--reason", "not today")
	var settled struct {
		ID, Status string
		Applied    *bool `json:"applied"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &settled); err != nil || r.code != 0 || settled.Status != "denied" || settled.Applied == nil || !*settled.Applied {
		t.Errorf("fluidbox deny --json = %+v (%v), want the settled approval, applied", r, err)
	}
	again := s.ask(t, ses2, token2, "c3", "rm other.log")
	if again.Decision != "deny" || again.Source != "approval" {
		t.Errorf("the runner after a human denied = %+v, want deny from approval", again)
	}
	if r := fluidbox(ctx, s.env(), "", "approve"); r.code != 1 || !strings.Contains(r.stderr, "want exactly one approval id") {
		t.Errorf("fluidbox approve with no id = %+v", r)
	}
}
