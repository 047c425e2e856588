package permission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/trust"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// pullRequestRun creates a run as a pull_request delivery of repo by the
// given author would.
func pullRequestRun(t *testing.T, e *calltest.Env, policyID, repo, author string) string {
	t.Helper()
	return triggeredRun(t, e, policyID, "github", "trg_1", &store.GitHubTrigger{TriggerID: "trg_1", Event: "pull_request", Action: "synchronize", Repository: repo,
		HeadRepository: repo, PullRequest: 7, HeadSHA: "0123456789abcdef0123456789abcdef01234567", Author: author})
}

// triggeredRun creates a run as trigger triggerID of type typ would, on
// the GitHub event gh.
func triggeredRun(t *testing.T, e *calltest.Env, policyID, typ, triggerID string, gh *store.GitHubTrigger) string {
	t.Helper()
	limit := 10.0
	req := run.CreateRequest{PolicyID: policyID, Capabilities: []string{"claude-code"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	id := ids.New("ses_")
	if _, err := run.NewService(e.Led, e.Clock.Now).CreateForTrigger(context.Background(), req, run.Triggered{
		RunID: id, Type: typ, Invoker: string(auth.Trigger(triggerID)), Tier: trust.Trusted, GitHub: gh,
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func askPush(t *testing.T, e *calltest.Env, runID, callID string) permission.Answer {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"command": "git push origin " + callID})
	a, err := e.Perm.Decide(context.Background(), runID, permission.Request{ToolCallID: callID, ToolName: "Bash", Input: in}, 0)
	if err != nil {
		t.Fatalf("Decide(%s/%s): %v", runID, callID, err)
	}
	return a
}

// TestPendingCapPerSource is issue 25 item 6 (the gate's side): the cap of
// pending approvals was per run, and a fork gets a run per push, so a few
// pushes filled the first page of the inbox. The runs of one pull request
// author in one repository now share the cap: of 24 asks racing over three
// such runs, exactly the cap are filed and the rest are denied
// (approval_limit), while another author's run still files. Settling one
// frees its place.
func TestPendingCapPerSource(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	const limit = 5
	e.Perm.LimitPending(limit)
	pol := calltest.PutPolicy(t, e.St, policyText, e.Clock.Now())
	runs := []string{pullRequestRun(t, e, pol, "acme/app", "4242"), pullRequestRun(t, e, pol, "acme/app", "4242"), pullRequestRun(t, e, pol, "acme/app", "4242")}
	other := pullRequestRun(t, e, pol, "acme/app", "777")

	var mu sync.Mutex
	var filed []permission.Answer
	denied := 0
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := askPush(t, e, runs[i%3], fmt.Sprintf("c%02d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case a.Decision == vocab.Pending:
				filed = append(filed, a)
			case a.Decision == vocab.Deny && a.Source == string(gate.SourceApprovalLimit):
				denied++
			default:
				t.Errorf("answer %+v, want pending or an approval_limit deny", a)
			}
		}()
	}
	wg.Wait()
	if len(filed) != limit || denied != 24-limit {
		t.Fatalf("filed %d, denied %d; want %d and %d", len(filed), denied, limit, 24-limit)
	}
	var count store.SourcePending
	if err := e.St.Get(context.Background(), store.SourceKey("github:acme/app#author:4242"), &count); err != nil || count.Pending != limit {
		t.Errorf("source count = %+v, %v; want %d", count, err, limit)
	}
	if a := askPush(t, e, other, "o1"); a.Decision != vocab.Pending {
		t.Errorf("another author's run = %+v, want pending", a)
	}
	if _, ok, err := e.Approvals.Decide(context.Background(), admin, filed[0].ApprovalID, vocab.ChoiceApprovedOnce); !ok || err != nil {
		t.Fatalf("decide: %v %v", ok, err)
	}
	if a := askPush(t, e, runs[0], "after"); a.Decision != vocab.Pending {
		t.Errorf("after one was decided = %+v, want pending", a)
	}
	if a := askPush(t, e, runs[1], "after2"); a.Decision != vocab.Deny || a.Source != string(gate.SourceApprovalLimit) {
		t.Errorf("past the cap again = %+v, want an approval_limit deny", a)
	}
}

// TestScheduledRunsHaveTheirOwnCap: a scheduled run carries its repository
// but no author; it counts against its schedule, not against the
// repository's authorless pull request runs, so those filling their cap
// leave the schedule's approvals alone (and the other way round).
func TestScheduledRunsHaveTheirOwnCap(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	const capped = 2
	e.Perm.LimitPending(capped)
	pol := calltest.PutPolicy(t, e.St, policyText, e.Clock.Now())
	authorless := pullRequestRun(t, e, pol, "acme/app", "")
	for i := range capped + 1 {
		askPush(t, e, authorless, fmt.Sprintf("pr%d", i))
	}
	scheduled := triggeredRun(t, e, pol, "schedule", "trg_nightly", &store.GitHubTrigger{TriggerID: "trg_nightly", Event: "schedule", Repository: "acme/app",
		HeadRepository: "acme/app", HeadSHA: "0123456789abcdef0123456789abcdef01234567", Ref: "main", ScheduledFor: "2026-12-07T03:00:00Z"})
	if a := askPush(t, e, scheduled, "nightly"); a.Decision != vocab.Pending {
		t.Errorf("the scheduled run's ask with the authorless pull requests' cap full = %+v, want pending", a)
	}
	var count store.SourcePending
	if err := e.St.Get(context.Background(), store.SourceKey("invoker:"+string(auth.Trigger("trg_nightly"))), &count); err != nil || count.Pending != 1 {
		t.Errorf("the schedule's count = %+v, %v; want 1", count, err)
	}
}
