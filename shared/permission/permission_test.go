package permission_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const policyText = `{"name":"p","default_verdict":"deny","rules":[
 {"id":"ls","tool":"Bash","match":{"command_prefix":["ls"]},"verdict":"allow"},
 {"id":"push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session"}]}`

func count(list []string, typ string) int {
	n := 0
	for _, s := range list {
		if s == typ {
			n++
		}
	}
	return n
}

func TestDecideRecordsOnce(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	first, err := e.Bash(t, "c1", "ls -la", 0)
	if err != nil || first.Decision != vocab.Allow || first.RuleID != "ls" {
		t.Fatalf("allow = %+v, %v", first, err)
	}
	again, err := e.Bash(t, "c1", "ls -la", 0)
	if err != nil || again != first {
		t.Errorf("retry = %+v, %v; want %+v", again, err, first)
	}
	if _, err := e.Bash(t, "c1", "ls /", 0); !errors.Is(err, permission.ErrConflict) {
		t.Errorf("same id, other input = %v, want ErrConflict", err)
	}
	deny, err := e.Bash(t, "c2", "curl example.test", 0)
	if err != nil || deny.Decision != vocab.Deny || deny.Source != "policy" {
		t.Errorf("deny = %+v, %v", deny, err)
	}
	var inv *permission.InvalidError
	_, err = e.Perm.Decide(context.Background(), e.RunID, permission.Request{ToolCallID: "c3", ToolName: "Bash", Input: []byte(`[1]`)}, 0)
	if !errors.As(err, &inv) {
		t.Errorf("non-object input = %v, want InvalidError", err)
	}
	_, err = e.Perm.Decide(context.Background(), e.RunID, permission.Request{ToolName: "Bash"}, 0)
	if !errors.As(err, &inv) {
		t.Errorf("no tool_call_id = %v, want InvalidError", err)
	}
	evs := e.Events(t)
	if count(evs, "tool.requested") != 2 || count(evs, "tool.decision") != 2 {
		t.Errorf("events = %v; want one pair per call", evs)
	}
}

// TestConcurrentAsks: dozens of concurrent asks of one call get one answer
// and one recorded pair of events.
func TestConcurrentAsks(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	answers := make([]permission.Answer, 24)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.Bash(t, "c1", "git push origin main", 0)
			if err != nil {
				t.Errorf("ask: %v", err)
			}
			answers[i] = a
		}()
	}
	wg.Wait()
	for _, a := range answers {
		if a != answers[0] || a.Decision != vocab.Pending {
			t.Fatalf("answers differ: %+v vs %+v", a, answers[0])
		}
	}
	evs := e.Events(t)
	if count(evs, "tool.requested") != 1 || count(evs, "approval.requested") != 1 {
		t.Errorf("events = %v", evs)
	}
}

// TestWaitForTheHuman: a waiting ask returns the decision as soon as it
// lands.
func TestWaitForTheHuman(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	done := make(chan permission.Answer, 1)
	go func() {
		a, err := e.Bash(t, "c1", "git push origin main", 5*time.Second)
		if err != nil {
			t.Errorf("waiting ask: %v", err)
		}
		done <- a
	}()
	var id string
	for id == "" {
		list, err := e.Approvals.ForRun(context.Background(), e.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			id = list[0].ID
		}
	}
	if _, ok, err := e.Approvals.Decide(context.Background(), auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, id, vocab.ChoiceApprovedOnce); !ok || err != nil {
		t.Fatalf("decide: %v %v", ok, err)
	}
	if a := <-done; a.Decision != vocab.Allow || a.ApprovalID != id {
		t.Errorf("waited answer = %+v", a)
	}
}
