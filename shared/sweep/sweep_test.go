package sweep_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/elicitation/elicitationtest"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/sweep"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const policyText = `{"name":"p","default_verdict":"deny","rules":[
 {"id":"push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval"}]}`

var operator = auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}

// TestSweep: one sweep settles each kind of thing it is the backstop for,
// and only those, in one walk: an overdue approval (not a young one, which
// it counts pending), the approval of
// a run that ended, a reservation left open too long, an overdue input
// request, and the input request of a run that ended. A second sweep
// finds nothing.
func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := calltest.NewEnv(t, policyText)
	b := otherRun(t, a)
	input := func(e *calltest.Env, call string) {
		now := e.Clock.Now()
		elicitationtest.File(t, e.Led, store.InputRequest{RunID: e.RunID, ToolCallID: call, Server: "docs", URL: "https://auth.example.test/consent",
			RequestedAt: store.FormatTime(now), ExpiresAt: store.FormatTime(now.Add(elicitation.DefaultTTL))})
	}
	old := ask(t, a, "old")
	input(a, "old-input")
	adm := admission.New(a.Led, nil, a.Clock.Now)
	if _, err := adm.AdmitProxied(ctx, b.RunID, admission.Proxied{Request: admission.Request{RequestID: "r1", Model: "m", MaxOutputTokens: 1000}, Price: budget.Price{OutputPerMTok: 1_000_000}}); err != nil {
		t.Fatal(err)
	}
	a.Clock.Advance(time.Hour)
	young := ask(t, a, "young")
	ended := ask(t, b, "ended")
	input(b, "ended-input")
	if err := run.NewService(b.Led, b.Clock.Now).End(ctx, operator, b.RunID); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.DiscardHandler)
	s := sweep.Sweeper{Approvals: a.Approvals, Inputs: elicitation.NewService(a.Led, a.Clock.Now, log), Reservations: adm,
		ReservationsAfter: 30 * time.Minute, Now: a.Clock.Now, Log: log}
	got, err := s.Sweep(ctx)
	want := sweep.Swept{ExpiredApprovals: 1, DeniedApprovals: 1, PendingApprovals: 1, SettledReservations: 1, ExpiredInputRequests: 1, DeclinedInputRequests: 1}
	if err != nil || got != want {
		t.Fatalf("Sweep = %+v, %v; want %+v", got, err, want)
	}
	for id, want := range map[string]vocab.ApprovalStatus{old: vocab.ApprovalExpired, young: vocab.ApprovalPending, ended: vocab.ApprovalDenied} {
		if ap, err := a.Approvals.Get(ctx, id); err != nil || ap.Status != want {
			t.Errorf("approval %s = %q, %v; want %q", id, ap.Status, err, want)
		}
	}
	if got, err := s.Sweep(ctx); err != nil || got != (sweep.Swept{PendingApprovals: 1}) {
		t.Errorf("second Sweep = %+v, %v; want nothing settled, the young approval pending", got, err)
	}
}

// ask files a pending approval for call on e's run and returns its id.
func ask(t *testing.T, e *calltest.Env, call string) string {
	t.Helper()
	ans, err := e.Bash(t, call, "git push origin main", 0)
	if err != nil || ans.Decision != vocab.Pending {
		t.Fatalf("ask %s = %+v, %v; want pending", call, ans, err)
	}
	return ans.ApprovalID
}

// otherRun is a second run on e's table and clock.
func otherRun(t *testing.T, e *calltest.Env) *calltest.Env {
	t.Helper()
	limit := 10.0
	req := run.CreateRequest{PolicyID: calltest.PutPolicy(t, e.St, policyText, e.Clock.Now()), Capabilities: []string{"claude-code"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	v, err := run.NewService(e.Led, e.Clock.Now).Create(context.Background(), operator, req)
	if err != nil {
		t.Fatal(err)
	}
	o := *e
	o.RunID = v.ID
	return &o
}
