package approval_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const policyText = `{"name":"p","default_verdict":"deny","rules":[
 {"id":"push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session"}]}`

var operator = auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}

func pending(t *testing.T, e *calltest.Env, callID string) string {
	t.Helper()
	a, err := e.Bash(t, callID, "git push origin main", 0)
	if err != nil || a.Decision != vocab.Pending || a.ApprovalID == "" {
		t.Fatalf("ask = %+v, %v; want pending", a, err)
	}
	return a.ApprovalID
}

func count(list []string, typ string) int {
	n := 0
	for _, s := range list {
		if s == typ {
			n++
		}
	}
	return n
}

// TestRacingDeciders: dozens of deciders on one approval, approving and
// denying at once: exactly one settles it, everyone is shown that
// settlement, and the ledger has one approval.decided.
func TestRacingDeciders(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	id := pending(t, e, "c1")
	var applied atomic.Int32
	statuses := make([]vocab.ApprovalStatus, 24)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decision := vocab.ChoiceApprovedOnce
			if i%2 == 1 {
				decision = vocab.ChoiceDenied
			}
			a, ok, err := e.Approvals.Decide(context.Background(), operator, id, decision)
			if err != nil {
				t.Errorf("decide: %v", err)
				return
			}
			if ok {
				applied.Add(1)
			}
			statuses[i] = a.Status
		}()
	}
	wg.Wait()
	if applied.Load() != 1 {
		t.Fatalf("%d deciders applied, want 1", applied.Load())
	}
	for _, s := range statuses {
		if s != statuses[0] || !s.Settled() {
			t.Fatalf("deciders were shown %v", statuses)
		}
	}
	evs := e.Events(t)
	if count(evs, "approval.decided") != 1 || count(evs, "tool.decision") != 1 {
		t.Errorf("events = %v", evs)
	}
	h, _ := e.St.GetHead(context.Background(), e.RunID)
	if h.PendingApprovals != 0 || h.Status != vocab.Running {
		t.Errorf("head = %s/%d", h.Status, h.PendingApprovals)
	}
}

// TestReadsSurviveAFailedLazyExpiry: when the write that expires an
// overdue approval fails, Get, ForRun and Pending still answer (the first
// two with the row as read, Pending without it), the permission replay
// answers pending, and nobody can approve it; once the table answers, the
// next read expires it.
func TestReadsSurviveAFailedLazyExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	faults := &calltest.Conflicts{Attr: "decided_by"}
	e := calltest.NewEnv(t, policyText, faults.Option)
	id := pending(t, e, "c1")
	e.Clock.Advance(time.Hour)
	faults.Left.Store(-1)

	a, err := e.Approvals.Get(ctx, id)
	if err != nil || a.Status != vocab.ApprovalPending {
		t.Errorf("get = %s, %v; want the pending row", a.Status, err)
	}
	if list, err := e.Approvals.ForRun(ctx, e.RunID); err != nil || len(list) != 1 {
		t.Errorf("for run = %v, %v", list, err)
	}
	if page, err := e.Approvals.Inbox(ctx, operator, "", "", 10); err != nil || len(page.Approvals) != 0 {
		t.Errorf("pending = %v, %v; want none (it is overdue)", page.Approvals, err)
	}
	if ans, err := e.Bash(t, "c1", "git push origin main", 0); err != nil || ans.Decision != vocab.Pending {
		t.Errorf("replay = %+v, %v; want pending", ans, err)
	}
	if _, ok, err := e.Approvals.Decide(ctx, operator, id, vocab.ChoiceApprovedOnce); ok || err == nil {
		t.Errorf("approving an overdue approval: applied %v, err %v; want an error (its expiry cannot be written)", ok, err)
	}
	if faults.Seen.Load() < 4 {
		t.Errorf("%d expiry writes tried, want one per read", faults.Seen.Load())
	}

	faults.Left.Store(0)
	if a, err := e.Approvals.Get(ctx, id); err != nil || a.Status != vocab.ApprovalExpired || a.DecidedBy != approval.ExpiredBy {
		t.Errorf("get once the table answers = %+v, %v", a, err)
	}
	if ans, err := e.Bash(t, "c1", "git push origin main", 0); err != nil || ans.Decision != vocab.Deny || ans.Source != "approval_expired" {
		t.Errorf("replay = %+v, %v", ans, err)
	}
	if evs := e.Events(t); count(evs, "approval.decided") != 1 {
		t.Errorf("events = %v", evs)
	}
}

func TestDecisionAfterExpiryExpires(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	id := pending(t, e, "c1")
	e.Clock.Advance(time.Hour)
	a, ok, err := e.Approvals.Decide(context.Background(), operator, id, vocab.ChoiceApprovedOnce)
	if err != nil || ok || a.Status != vocab.ApprovalExpired {
		t.Errorf("late approval = %s applied %v, %v; want expired, not applied", a.Status, ok, err)
	}
	if n, err := e.Approvals.Expire(context.Background(), id); n || err != nil {
		t.Errorf("expire again = %v, %v", n, err)
	}
	_, _, err = e.Approvals.Decide(context.Background(), operator, "apr_none", vocab.ChoiceDenied)
	if !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("unknown approval = %v", err)
	}
}

func TestSessionGrantAndRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := calltest.NewEnv(t, policyText)
	id := pending(t, e, "c1")
	if _, ok, err := e.Approvals.Decide(ctx, operator, id, vocab.ChoiceApproved); !ok || err != nil {
		t.Fatalf("approve for the session: %v %v", ok, err)
	}
	if ans, err := e.Bash(t, "c2", "git push origin main", 0); err != nil || ans.Decision != vocab.Allow {
		t.Errorf("covered call = %+v, %v", ans, err)
	}
	grants, _ := e.St.Grants(ctx, e.RunID)
	if len(grants) != 1 {
		t.Fatalf("grants = %+v", grants)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.Approvals.RevokeGrant(ctx, operator, e.RunID, grants[0].ScopeKey))
	if err := e.Approvals.RevokeGrant(ctx, operator, e.RunID, grants[0].ScopeKey); !errors.Is(err, call.ErrNoGrant) {
		t.Errorf("second revoke = %v, want call.ErrNoGrant", err)
	}
	if ans, _ := e.Bash(t, "c3", "git push origin main", 0); ans.Decision != vocab.Pending {
		t.Errorf("after revoke = %+v, want pending", ans)
	}
	if evs := e.Events(t); count(evs, "grant.revoked") != 1 || !slices.Contains(evs, "tool.decision") {
		t.Errorf("events = %v", evs)
	}
}

// TestApprovalOfARunThatAllowsNoMore: a call waits for a person, and its
// run ends, or spends its budget, before anyone decides. Approving it then
// must not allow the call: the approval is settled denied by the run's
// state (not applied as the person chose), the waiting call is answered
// with the gate's own denial, and the ledger says so. A denial still
// applies as the person's.
func TestApprovalOfARunThatAllowsNoMore(t *testing.T) {
	t.Parallel()
	refused := func(close func(*testing.T, *calltest.Env), by, source string) closedCase {
		return closedCase{close: close, status: vocab.ApprovalDenied, by: by, source: source}
	}
	cases := map[string]closedCase{
		"ended/approved_once":    refused(endRun, "system:session", "session"),
		"ended/approved_session": refused(endRun, "system:session", "session"),
		"ended/approved":         refused(endRun, "system:session", "session"),
		"budget spent/approved":  refused(spendBudget, "system:budget", "budget"),
		// Reserved is not spent: the request may cost far less than its
		// bound, and the person's approval is not lost to it.
		"a model request in flight/approved_once": {close: func(t *testing.T, e *calltest.Env) { reserveAll(t, e) }, status: vocab.ApprovedOnce, by: operator.Subject},
		"ended/denied": {close: endRun, status: vocab.ApprovalDenied, by: operator.Subject},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, choice, _ := strings.Cut(name, "/")
			c.check(t, vocab.Choice(choice))
		})
	}
}

// closedCase is a pending call whose run close changes before a person
// decides it: the approval then stands at status, by by; source is the
// source of the waiting call's denial when the decision was not the
// person's ("" when it was).
type closedCase struct {
	close      func(*testing.T, *calltest.Env)
	status     vocab.ApprovalStatus
	by, source string
}

func (c closedCase) check(t *testing.T, choice vocab.Choice) {
	t.Helper()
	ctx := context.Background()
	e := calltest.NewEnv(t, policyText)
	id := pending(t, e, "c1")
	c.close(t, e)
	a, applied, err := e.Approvals.Decide(ctx, operator, id, choice)
	if err != nil || applied != (c.source == "") || a.Status != c.status || a.DecidedBy != c.by {
		t.Fatalf("%s = %s by %q, applied %v, %v; want %s by %s, applied %v", choice, a.Status, a.DecidedBy, applied, err, c.status, c.by, c.source == "")
	}
	if c.source == "" {
		return
	}
	ans, err := e.Bash(t, "c1", "git push origin main", 0)
	if err != nil || ans.Decision != vocab.Deny || ans.Source != c.source {
		t.Errorf("the waiting call = %+v, %v; want denied by %s", ans, err, c.source)
	}
	if g, err := e.St.Grants(ctx, e.RunID); err != nil || len(g) != 0 {
		t.Errorf("grants = %v, %v; want none", g, err)
	}
	evs := e.Events(t)
	if count(evs, "approval.decided") != 1 || count(evs, "tool.decision") != 1 {
		t.Errorf("events = %v, want one approval.decided and one tool.decision", evs)
	}
}

// endRun ends e's run as an admin.
func endRun(t *testing.T, e *calltest.Env) {
	t.Helper()
	if err := run.NewService(e.Led, e.Clock.Now).End(context.Background(), operator, e.RunID); err != nil {
		t.Fatal(err)
	}
}

// spendBudget spends e's run's whole budget: one model request reserves
// all of it and settles without usage, charged its whole bound.
func spendBudget(t *testing.T, e *calltest.Env) {
	t.Helper()
	ctx := context.Background()
	adm := reserveAll(t, e)
	if _, err := adm.Settle(ctx, e.RunID, "all", admission.SettlementPessimistic, budget.Usage{}, false, nil); err != nil {
		t.Fatal(err)
	}
	if h, err := e.St.GetHead(ctx, e.RunID); err != nil || h.Unspent() != 0 {
		t.Fatalf("head after the settlement: unspent %d, %v; want 0", h.Unspent(), err)
	}
}

// reserveAll books a model request whose bound is the run's whole $10,
// leaving nothing available while it is in flight.
func reserveAll(t *testing.T, e *calltest.Env) *admission.Service {
	t.Helper()
	adm := admission.New(e.Led, nil, e.Clock.Now)
	if _, err := adm.AdmitProxied(context.Background(), e.RunID, admission.Proxied{Request: admission.Request{RequestID: "all", Model: "m", MaxOutputTokens: 10_000_000}, Price: budget.Price{OutputPerMTok: 1_000_000}}); err != nil {
		t.Fatal(err)
	}
	if h, err := e.St.GetHead(context.Background(), e.RunID); err != nil || h.BudgetAvailable != 0 {
		t.Fatalf("head after the reservation: available %d, %v; want 0", h.BudgetAvailable, err)
	}
	return adm
}

// TestSweepClosedRuns: the sweep denies every pending approval of a run
// that ended or spent its budget, each by its run's state, and leaves a
// live run's alone; a second sweep finds nothing.
func TestSweepClosedRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := calltest.NewEnv(t, policyText)
	live := pending(t, e, "live")
	// Two more runs on the same table and clock.
	other := func() *calltest.Env {
		t.Helper()
		pol := calltest.PutPolicy(t, e.St, policyText, e.Clock.Now())
		limit := 10.0
		req := run.CreateRequest{PolicyID: pol, Capabilities: []string{"claude-code"}}
		req.Budget = &struct {
			LimitUSD *float64 `json:"limit_usd"`
		}{LimitUSD: &limit}
		v, err := run.NewService(e.Led, e.Clock.Now).Create(ctx, operator, req)
		if err != nil {
			t.Fatal(err)
		}
		o := *e
		o.RunID = v.ID
		return &o
	}
	ended := other()
	endedApprovals := []string{pending(t, ended, "e1"), pending(t, ended, "e2")}
	endRun(t, ended)
	broke := other()
	brokeApproval := pending(t, broke, "b1")
	spendBudget(t, broke)
	var observed atomic.Int32
	e.Approvals.Observe(func(_ context.Context, before, after store.Approval) {
		if before.Status == vocab.ApprovalPending && after.Status == vocab.ApprovalDenied {
			observed.Add(1)
		}
	})

	sw, err := e.Approvals.Sweep(ctx)
	if err != nil || sw != (approval.Swept{Refused: 3, Left: 1}) {
		t.Fatalf("sweep = %+v, %v; want 3 denied, the live run's left", sw, err)
	}
	for id, by := range map[string]string{endedApprovals[0]: "system:session", endedApprovals[1]: "system:session", brokeApproval: "system:budget", live: ""} {
		a, err := e.Approvals.Get(ctx, id)
		switch {
		case err != nil:
			t.Errorf("%s: %v", id, err)
		case by == "" && a.Status != vocab.ApprovalPending:
			t.Errorf("%s of the live run = %s, want pending", id, a.Status)
		case by != "" && (a.Status != vocab.ApprovalDenied || a.DecidedBy != by):
			t.Errorf("%s = %s by %q, want denied by %s", id, a.Status, a.DecidedBy, by)
		}
	}
	if observed.Load() != 3 {
		t.Errorf("observers told of %d denials, want 3", observed.Load())
	}
	if sw, err := e.Approvals.Sweep(ctx); err != nil || sw != (approval.Swept{Left: 1}) {
		t.Errorf("second sweep = %+v, %v; want nothing settled", sw, err)
	}
}
