package elicitation_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

const policyText = `{"name":"p","default_verdict":"deny","rules":[]}`

var (
	operator = auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}
	approver = auth.Principal{Kind: auth.KindUser, Subject: "ann", Roles: []string{auth.RoleApprover}}
	member   = auth.Principal{Kind: auth.KindUser, Subject: "mo"}
)

// file files a pending input request for call callID of e's run, as the
// broker does, and returns it.
func file(t *testing.T, e *calltest.Env, svc *elicitation.Service, callID string, personal bool) store.InputRequest {
	t.Helper()
	r := store.InputRequest{ID: ids.New("inp_"), RunID: e.RunID, ToolCallID: callID, ToolName: "mcp__team__deploy",
		ConnectionID: "con_1", Server: "team", Mode: "url", Link: "https://auth.example.com/consent", Personal: personal,
		RequestedAt: store.FormatTime(e.Clock.Now()), ExpiresAt: store.FormatTime(e.Clock.Now().Add(elicitation.DefaultTTL))}
	ops, ev, err := svc.File(&r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Led.Append(context.Background(), e.RunID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: ops}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// race runs n settlements of one request at once and returns how many
// settled it and the statuses everyone was shown.
func race(t *testing.T, n int, try func(i int) (bool, string, error)) (int, []string) {
	t.Helper()
	var won atomic.Int32
	shown := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ok, status, err := try(i)
			if err != nil {
				t.Errorf("settlement %d: %v", i, err)
				return
			}
			if ok {
				won.Add(1)
			}
			shown[i] = status
		})
	}
	wg.Wait()
	return int(won.Load()), shown
}

// TestRacingAnswers: dozens of people answering one request at once, done
// and decline, with expiries and sweeps among them: exactly one settles
// it, everyone is shown that settlement, and the ledger has one
// input.settled. Past its time, racing answers, expiries and sweeps
// settle it once, as expired: an overdue request is never completed.
func TestRacingAnswers(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	svc := elicitation.NewService(e.Led, e.Clock.Now, nil)
	ctx := context.Background()

	r := file(t, e, svc, "c1", false)
	won, shown := race(t, 36, func(i int) (bool, string, error) {
		switch i % 4 {
		case 0:
			got, ok, err := svc.Decide(ctx, operator, r.ID, elicitation.DecisionDone)
			return ok, got.Status, err
		case 1:
			got, ok, err := svc.Decide(ctx, approver, r.ID, elicitation.DecisionDecline)
			return ok, got.Status, err
		case 2:
			ok, err := svc.Expire(ctx, r.ID)
			return ok, "", err
		default:
			sw, err := svc.Sweep(ctx)
			return sw.Expired > 0, "", err
		}
	})
	if won != 1 {
		t.Fatalf("%d settlements applied, want 1", won)
	}
	got, err := svc.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != string(elicitation.Completed) && got.Status != string(elicitation.Declined) {
		t.Fatalf("request after the race = %s, want completed or declined (it was not overdue)", got.Status)
	}
	for i, s := range shown {
		if s != "" && s != got.Status {
			t.Errorf("settlement %d was shown %s, want %s", i, s, got.Status)
		}
	}

	late := file(t, e, svc, "c2", false)
	e.Clock.Advance(elicitation.DefaultTTL)
	won, _ = race(t, 36, func(i int) (bool, string, error) {
		switch i % 3 {
		case 0:
			got, ok, err := svc.Decide(ctx, operator, late.ID, elicitation.DecisionDone)
			if ok {
				return ok, got.Status, errors.New("a decision settled an overdue request")
			}
			return ok, got.Status, err
		case 1:
			ok, err := svc.Expire(ctx, late.ID)
			return ok, "", err
		default:
			sw, err := svc.Sweep(ctx)
			return sw.Expired > 0, "", err
		}
	})
	// A decision that finds it overdue expires it without saying so, so
	// the count of input.settled below is what says "once".
	if got, err := svc.Get(ctx, late.ID); err != nil || got.Status != string(elicitation.Expired) || won > 1 {
		t.Fatalf("overdue request after the race = %+v, %v (%d reported settling it); want expired, once", got, err, won)
	}
	n := 0
	for _, typ := range e.Events(t) {
		if typ == string(redact.TypeInputSettled) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d input.settled events for two requests, want 2", n)
	}
}

// TestWhoAnswers: who may answer a request is who may decide its call
// (approval.MayDecide): a shared connection's by the operator, admins and
// approvers, never a plain member; a personal connection's by the run's
// invoker alone. Each inbox lists exactly what its owner may answer, and
// answering anything else is ErrForbidden.
func TestWhoAnswers(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText) // invoked by admin
	svc := elicitation.NewService(e.Led, e.Clock.Now, nil)
	ctx := context.Background()
	shared := file(t, e, svc, "s1", false)
	e.Clock.Advance(time.Second)
	personal := file(t, e, svc, "p1", true)
	admin := auth.Principal{Kind: auth.KindUser, Subject: "ada", Roles: []string{auth.RoleAdmin}}
	cases := []struct {
		who  auth.Principal
		want []string
	}{
		{operator, []string{shared.ID, personal.ID}}, // the operator invoked the run
		{approver, []string{shared.ID}},
		{admin, []string{shared.ID}},
		{member, nil},
	}
	for _, c := range cases {
		page, err := svc.Inbox(ctx, c.who, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range page.InputRequests {
			got = append(got, r.ID)
		}
		if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) || (len(got) > 1 && got[1] != c.want[1]) {
			t.Errorf("Inbox(%s) = %v, want %v", c.who.Subject, got, c.want)
		}
	}
	for _, who := range []auth.Principal{approver, admin, member} {
		if _, _, err := svc.Decide(ctx, who, personal.ID, elicitation.DecisionDone); !errors.Is(err, elicitation.ErrForbidden) {
			t.Errorf("Decide(%s, personal) = %v, want ErrForbidden", who.Subject, err)
		}
	}
	if _, _, err := svc.Decide(ctx, member, shared.ID, elicitation.DecisionDone); !errors.Is(err, elicitation.ErrForbidden) {
		t.Errorf("Decide(member, shared) = %v, want ErrForbidden", err)
	}
	if _, _, err := svc.Decide(ctx, operator, shared.ID, "approved_once"); !errors.Is(err, elicitation.ErrInvalid) {
		t.Errorf("Decide(approved_once) = %v, want ErrInvalid", err)
	}
	if _, err := svc.View(ctx, member, shared.ID); !errors.Is(err, elicitation.ErrForbidden) {
		t.Errorf("View(member) = %v, want ErrForbidden", err)
	}
	if got, ok, err := svc.Decide(ctx, operator, personal.ID, elicitation.DecisionDecline); err != nil || !ok || got.Status != "declined" {
		t.Errorf("Decide(invoker, personal, decline) = %+v, %t, %v; want declined", got, ok, err)
	}
}

// TestMachine: only the table's moves are allowed.
func TestMachine(t *testing.T) {
	t.Parallel()
	for _, m := range []struct {
		from, to elicitation.State
		by       elicitation.Actor
	}{
		{elicitation.Pending, elicitation.Expired, elicitation.Decider},
		{elicitation.Pending, elicitation.Completed, elicitation.Expiry},
		{elicitation.Completed, elicitation.Declined, elicitation.Decider},
		{elicitation.Expired, elicitation.Completed, elicitation.Decider},
		{"", elicitation.Completed, elicitation.Broker},
	} {
		if err := elicitation.Move(m.from, m.to, m.by); !errors.Is(err, elicitation.ErrIllegal) {
			t.Errorf("Move(%s, %s, %s) = %v, want ErrIllegal", m.from, m.to, m.by, err)
		}
	}
}

// TestRequestOfAnEndedRun: once its run has ended, a request's "done" is
// not applied (it would resume a call the run no longer allows): the
// request is declined by the run's state; a decline is still the
// person's; the sweep declines what is left, once.
func TestRequestOfAnEndedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := calltest.NewEnv(t, policyText)
	svc := elicitation.NewService(e.Led, e.Clock.Now, nil)
	done, declined, swept := file(t, e, svc, "c1", false), file(t, e, svc, "c2", false), file(t, e, svc, "c3", false)
	if err := run.NewService(e.Led, e.Clock.Now).End(ctx, operator, e.RunID); err != nil {
		t.Fatal(err)
	}
	r, applied, err := svc.Decide(ctx, operator, done.ID, elicitation.DecisionDone)
	if err != nil || applied || r.Status != string(elicitation.Declined) || r.DecidedBy != "system:session" {
		t.Errorf("done after the end = %s by %q, applied %v, %v; want declined by system:session, not applied", r.Status, r.DecidedBy, applied, err)
	}
	r, applied, err = svc.Decide(ctx, operator, declined.ID, elicitation.DecisionDecline)
	if err != nil || !applied || r.Status != string(elicitation.Declined) || r.DecidedBy != operator.Subject {
		t.Errorf("decline after the end = %s by %q, applied %v, %v; want declined by admin", r.Status, r.DecidedBy, applied, err)
	}
	if sw, err := svc.Sweep(ctx); err != nil || sw.Refused != 1 {
		t.Fatalf("sweep = %+v, %v; want the last request declined", sw, err)
	}
	if r, err := e.St.GetInputRequestByID(ctx, swept.ID); err != nil || r.Status != string(elicitation.Declined) || r.DecidedBy != "system:session" {
		t.Errorf("swept request = %s by %q, %v; want declined by system:session", r.Status, r.DecidedBy, err)
	}
	if sw, err := svc.Sweep(ctx); err != nil || sw.Refused != 0 {
		t.Errorf("second sweep = %+v, %v; want none declined", sw, err)
	}
}
