package approval_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func TestPendingThenSettled(t *testing.T) {
	t.Parallel()
	f := calltest.NewFixture(t)
	rec := recordPending(t, f)
	a := settleForSession(t, f, rec)
	checkSettledForSession(t, f)
	checkSettledOnce(t, f, rec, a)

	want := "session.created tool.requested approval.requested approval.decided tool.decision"
	if got := strings.Join(f.Events(t), " "); got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
}

// recordPending records a pending call with its approval apr_1: listed,
// and the run awaiting it.
func recordPending(t *testing.T, f calltest.Fixture) permission.Recorded {
	t.Helper()
	ctx := context.Background()
	c := f.Asked(t, "toolu_2", map[string]any{"command": "git push"})
	rec, err := f.Record(t, c, calltest.Pending, permission.Pin{ApprovalID: "apr_1", ToolDigest: "sha256:t", PolicyDigest: "sha256:p"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Answer.Decision != vocab.Pending || rec.Answer.ApprovalID != "apr_1" {
		t.Fatalf("answer = %+v", rec.Answer)
	}
	listed, err := f.St.PendingApprovals(ctx, 10)
	if err != nil || len(listed) != 1 || listed[0].ID != "apr_1" || listed[0].ExpiresAt != store.FormatTime(calltest.T0.Add(time.Minute)) {
		t.Fatalf("pending = %+v, %v", listed, err)
	}
	h, _ := f.St.GetHead(ctx, f.Run)
	if h.Status != vocab.AwaitingApproval || h.PendingApprovals != 1 {
		t.Errorf("head = %s/%d", h.Status, h.PendingApprovals)
	}
	return rec
}

// settleForSession: an expiry before the time does not hold; carol's
// approval for the session does.
func settleForSession(t *testing.T, f calltest.Fixture, rec permission.Recorded) store.Approval {
	t.Helper()
	ctx := context.Background()
	build, _, err := approval.Settle(f.St, rec.Approval, vocab.ApprovalExpired, auth.System(auth.ExpiryRole), "", calltest.T0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Led.Append(ctx, f.Run, build); !errors.Is(err, call.ErrSettled) {
		t.Fatalf("early expiry = %v, want ErrSettled", err)
	}
	build, after, err := approval.Settle(f.St, rec.Approval, vocab.ApprovedSession, "carol", "", calltest.T0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Led.Append(ctx, f.Run, build); err != nil {
		t.Fatal(err)
	}
	a, err := f.St.GetApprovalByID(ctx, "apr_1")
	if err != nil || a != after || a.Status != vocab.ApprovedSession || a.DecidedBy != "carol" {
		t.Errorf("approval = %+v, %v; want %+v", a, err, after)
	}
	return a
}

// checkSettledForSession: the call is allowed by carol, nothing listed is
// pending, the run is running again, and the session grant is there.
func checkSettledForSession(t *testing.T, f calltest.Fixture) {
	t.Helper()
	ctx := context.Background()
	got, _ := f.St.GetCall(ctx, f.Run, "toolu_2")
	if got.Decision != vocab.Allow || got.Reason != "approved by carol" || got.ApprovalID != "apr_1" {
		t.Errorf("call = %+v", got)
	}
	// DynamoDB drops the row from the sparse index when the settlement
	// removes its index keys; minidyn v0.8.2 applies no REMOVE clause, so
	// what can be checked here is that nothing listed is still pending.
	listed, _ := f.St.PendingApprovals(ctx, 10)
	for _, l := range listed {
		if l.Status == vocab.ApprovalPending {
			t.Errorf("still pending in the index: %+v", l)
		}
	}
	h, _ := f.St.GetHead(ctx, f.Run)
	if h.Status != vocab.Running || h.PendingApprovals != 0 {
		t.Errorf("head = %s/%d", h.Status, h.PendingApprovals)
	}
	grants, err := f.St.Grants(ctx, f.Run)
	if err != nil || len(grants) != 1 || grants[0].ScopeKey != "Bash:git push" || grants[0].RuleID != "r2" || grants[0].GrantedBy != "carol" {
		t.Errorf("grants = %+v, %v", grants, err)
	}
}

// checkSettledOnce: settled once, neither a second decision nor an expiry
// holds, and from a settled state the machine has no move.
func checkSettledOnce(t *testing.T, f calltest.Fixture, rec permission.Recorded, a store.Approval) {
	t.Helper()
	ctx := context.Background()
	for _, to := range []vocab.ApprovalStatus{vocab.ApprovalDenied, vocab.ApprovalExpired} {
		pend := rec.Approval // as a racer read it, still calltest.Pending
		build, _, err := approval.Settle(f.St, pend, to, "dave", "", calltest.T0.Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Led.Append(ctx, f.Run, build); !errors.Is(err, call.ErrSettled) {
			t.Errorf("second settlement %s = %v, want ErrSettled", to, err)
		}
	}
	// From a settled state the machine has no move.
	if _, _, err := approval.Settle(f.St, a, vocab.ApprovalDenied, "dave", "", calltest.T0); !errors.Is(err, call.ErrIllegal) {
		t.Errorf("settle a settled approval = %v, want ErrIllegal", err)
	}
}

func TestDecisionAfterExpiryIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := calltest.NewFixture(t)
	rec, err := f.Record(t, f.Asked(t, "toolu_3", map[string]any{"command": "git push"}), calltest.Pending, permission.Pin{ApprovalID: "apr_3"})
	if err != nil {
		t.Fatal(err)
	}
	build, _, err := approval.Settle(f.St, rec.Approval, vocab.ApprovedOnce, "carol", "", calltest.T0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Led.Append(ctx, f.Run, build); !errors.Is(err, call.ErrSettled) {
		t.Fatalf("approval at its expiry = %v, want ErrSettled", err)
	}
	build, _, err = approval.Settle(f.St, rec.Approval, vocab.ApprovalExpired, auth.System(auth.ExpiryRole), "", calltest.T0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Led.Append(ctx, f.Run, build); err != nil {
		t.Fatal(err)
	}
	got, _ := f.St.GetCall(ctx, f.Run, "toolu_3")
	if got.Decision != vocab.Deny || got.Source != "approval_expired" {
		t.Errorf("call = %+v", got)
	}
}

// TestSourceCountFollowsTheApproval: filing an approval of a trigger
// source adds to its count, past the limit the append refuses
// (ErrSourceFull), and a settlement, by a human or by expiry, takes it off.
func TestSourceCountFollowsTheApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := calltest.NewFixture(t)
	pin := func(id string) permission.Pin {
		return permission.Pin{ApprovalID: id, Source: "github:acme/app#author:1", SourceLimit: 2}
	}
	count := func() int64 {
		var c store.SourcePending
		if err := f.St.Get(ctx, store.SourceKey("github:acme/app#author:1"), &c); err != nil {
			t.Fatal(err)
		}
		return c.Pending
	}
	var recs []permission.Recorded
	for _, id := range []string{"s1", "s2"} {
		rec, err := f.Record(t, f.Asked(t, id, map[string]any{"command": "git push " + id}), calltest.Pending, pin("apr_"+id))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if _, err := f.Record(t, f.Asked(t, "s3", map[string]any{"command": "git push s3"}), calltest.Pending, pin("apr_s3")); !errors.Is(err, call.ErrSourceFull) {
		t.Fatalf("a third of two = %v, want ErrSourceFull", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	settle := func(a store.Approval, to vocab.ApprovalStatus, by auth.Subject, at time.Time) {
		t.Helper()
		build, _, err := approval.Settle(f.St, a, to, by, "", at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Led.Append(ctx, f.Run, build); err != nil {
			t.Fatalf("settle %s: %v", to, err)
		}
	}
	settle(recs[0].Approval, vocab.ApprovedOnce, "carol", calltest.T0)
	settle(recs[1].Approval, vocab.ApprovalExpired, auth.System(auth.ExpiryRole), calltest.T0.Add(time.Hour))
	if n := count(); n != 0 {
		t.Errorf("count after a decision and an expiry = %d, want 0", n)
	}
	if _, err := f.Record(t, f.Asked(t, "s4", map[string]any{"command": "git push s4"}), calltest.Pending, pin("apr_s4")); err != nil {
		t.Errorf("filing once the count fell = %v", err)
	}
}
