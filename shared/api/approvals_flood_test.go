package api_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestApprovalFloodIsCapped: one run filing approvals without end gets 20
// pending and then denials (source approval_limit, recorded like any other
// decision); another run's approval stays in sight, by session_id and in
// a paginated walk of the whole list.
func TestApprovalFloodIsCapped(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(approvalPolicy)
	flood, floodTok := s.gateRun(pol, runOpts{budget: 1})
	const asks = 30
	answers := make([]response, asks)
	var wg sync.WaitGroup
	for i := range asks {
		wg.Go(func() {
			answers[i] = s.ask(flood, floodTok, fmt.Sprintf("f%d", i), "Bash", bash(fmt.Sprintf("git push origin b%d", i)))
		})
	}
	wg.Wait()
	checkFloodAnswers(t, answers)
	reAskLimited(t, s, flood, floodTok, answers)
	decisions := 0
	for _, typ := range s.eventTypes(flood, 0) {
		if typ == "tool.decision" {
			decisions++
		}
	}
	if decisions != asks-20 {
		t.Errorf("tool.decision events = %d, want %d (one per limited call)", decisions, asks-20)
	}

	other, otherTok := s.gateRun(pol, runOpts{budget: 1})
	apr := s.pending(other, otherTok, "o1", "git push origin main")
	byRun := s.must(200, "GET", "/v1/approvals?session_id="+other, adminToken, nil)["approvals"].([]any)
	if len(byRun) != 1 || byRun[0].(map[string]any)["id"] != apr {
		t.Errorf("GET /v1/approvals?session_id=%s = %v, want exactly %s", other, byRun, apr)
	}
	if n := len(s.must(200, "GET", "/v1/approvals?session_id="+flood, adminToken, nil)["approvals"].([]any)); n != 20 {
		t.Errorf("flooding run's pending approvals = %d, want 20", n)
	}
	walkApprovals(t, s, apr)

	for _, bad := range []string{"?limit=0", "?limit=101", "?cursor=not-a-cursor", "?session_id=nope"} {
		if r := s.do("GET", "/v1/approvals"+bad, adminToken, nil); r.status != 400 {
			t.Errorf("GET /v1/approvals%s = %d %s, want 400", bad, r.status, r.raw)
		}
	}
}

// checkFloodAnswers: 20 asks are pending, the rest denied for the limit,
// with a reason that names it.
func checkFloodAnswers(t *testing.T, answers []response) {
	t.Helper()
	asks := len(answers)
	pending, limited := 0, 0
	for i, r := range answers {
		switch {
		case r.body["decision"] == "pending":
			pending++
		case r.body["decision"] == "deny" && r.body["source"] == "approval_limit":
			limited++
			if !strings.Contains(str(r.body["reason"]), "the most a run may have (20)") {
				t.Errorf("ask %d reason = %q, want it to name the limit", i, r.body["reason"])
			}
		default:
			t.Errorf("ask %d = %d %s, want pending or deny/approval_limit", i, r.status, r.raw)
		}
	}
	if pending != 20 || limited != asks-20 {
		t.Errorf("%d asks: %d pending, %d denied for the limit; want 20 and %d", asks, pending, limited, asks-20)
	}
}

// reAskLimited: a denial for the limit is an answer: asked again it is the
// same.
func reAskLimited(t *testing.T, s *stack, flood, floodTok string, answers []response) {
	t.Helper()
	for i, r := range answers {
		if r.body["source"] == "approval_limit" {
			again := s.ask(flood, floodTok, fmt.Sprintf("f%d", i), "Bash", bash(fmt.Sprintf("git push origin b%d", i)))
			if again.body["decision"] != "deny" || again.body["source"] != "approval_limit" {
				t.Errorf("re-ask of a limited call = %s, want the recorded deny", again.raw)
			}
			break
		}
	}
}

// walkApprovals: a walk of the whole list, 7 at a time, sees every
// approval once (the other run's apr too), in request order, and ends.
func walkApprovals(t *testing.T, s *stack, apr string) {
	t.Helper()
	seen := map[string]bool{}
	last := ""
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("the list did not end after 10 pages")
		}
		path := "/v1/approvals?limit=7"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := s.must(200, "GET", path, adminToken, nil)
		for _, v := range page["approvals"].([]any) {
			a := v.(map[string]any)
			id, at := a["id"].(string), a["requested_at"].(string)+"#"+a["id"].(string)
			if seen[id] || at < last {
				t.Errorf("approval %s listed twice or out of order", id)
			}
			seen[id], last = true, at
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 21 || !seen[apr] {
		t.Errorf("walk saw %d approvals (other run's: %v), want 21 including %s", len(seen), seen[apr], apr)
	}
}

// TestApprovalListIsBounded: fifty approvals of 130 KB inputs list in far
// less than Lambda's 6 MB response limit; each listed input is cut, with
// its size and digest, and the approval itself has it whole.
func TestApprovalListIsBounded(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(approvalPolicy)
	// Strings are at most 64 KiB each, so 130 KB of input is three of them.
	s.must(201, "POST", "/v1/capabilities", adminToken, map[string]any{"name": "notes", "tools": []any{map[string]any{
		"name": "Notes", "description": "keeps notes", "class": "write",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"parts": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
	}}})
	part := strings.Repeat("x", 45<<10)
	parts := []string{part, part, part}
	var ids []string
	for r := range 3 { // 20 + 20 + 10: the per-run limit is 20
		id, tok := s.session(map[string]any{"policy_id": pol, "capabilities": []string{"notes"}, "budget": map[string]any{"limit_usd": 1}})
		for i := range min(20, 50-20*r) {
			a := s.ask(id, tok, fmt.Sprintf("w%d", i), "Notes", map[string]any{"parts": parts})
			if a.body["decision"] != "pending" {
				t.Fatalf("Write %d of run %d = %s, want pending", i, r, a.raw)
			}
			ids = append(ids, a.body["approval_id"].(string))
		}
	}
	r := s.do("GET", "/v1/approvals?limit=100", adminToken, nil)
	if r.status != 200 {
		t.Fatalf("GET /v1/approvals = %d", r.status)
	}
	if len(r.raw) > 512<<10 {
		t.Errorf("list of 50 approvals of 130 KB = %d bytes, want under 512 KiB", len(r.raw))
	}
	list := r.body["approvals"].([]any)
	if len(list) != 50 {
		t.Fatalf("listed %d approvals, want 50", len(list))
	}
	for _, v := range list {
		a := v.(map[string]any)
		size, _ := a["input_size"].(float64)
		if a["input_truncated"] != true || a["input"] != nil || size < 130<<10 || !strings.HasPrefix(str(a["input_digest"]), "sha256:") ||
			!strings.HasPrefix(str(a["input_preview"]), `{"parts":["xxx`) || len(str(a["input_preview"])) > 4096 {
			t.Fatalf("listed approval = input_truncated %v, input %T, size %v, digest %v; want a cut input with size and digest", a["input_truncated"], a["input"], a["input_size"], a["input_digest"])
		}
	}
	one := s.must(200, "GET", "/v1/approvals/"+ids[0], adminToken, nil)
	in, _ := one["input"].(map[string]any)
	got, _ := in["parts"].([]any)
	if len(got) != 3 || got[2] != part || one["input_truncated"] != nil {
		t.Errorf("GET /v1/approvals/%s: %d parts, truncated %v; want the input whole", ids[0], len(got), one["input_truncated"])
	}
}
