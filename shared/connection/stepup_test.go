package connection_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// stepUpScope is the scope the upstream's write_note needs beyond what the
// first authorization asks for (its scopes_supported, openid).
const stepUpScope = "email"

// TestOAuthStepUp: the upstream (the MCP Go SDK's auth.RequireBearerToken
// with Scopes, for one tool) refuses a call for want of a scope. The call is
// refused with source binding and a reason telling the owner to
// re-authorize, naming neither the scope nor anything of the token; the
// connection stays active at its generation and shows the scope; calls the
// grant covers keep working. The re-authorization asks for the union, moves
// the generation by one, and a new run's call succeeds.
func TestOAuthStepUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	e.up = oauthtest.NewServer(t, e.p, oauthtest.StepUpTool("write_note", stepUpScope))
	if err := e.st.PutMember(ctx, store.Member{Sub: alice.Subject, Status: store.MemberActive, Roles: alice.Roles}); err != nil {
		t.Fatal(err)
	}
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, alice, "notes", "personal")
	first, err := svc.Authorize(ctx, alice, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	firstStarted := start(t, svc, first)
	if got := requestedScope(t, firstStarted.URL); slices.Contains(got, stepUpScope) {
		t.Fatalf("the first authorization asks for %q already", got)
	}
	v = e.complete(t, svc, firstStarted, e.p.User1())
	if _, err := svc.Refresh(ctx, alice, v.ID); err != nil {
		t.Fatal(err)
	}
	perm := permission.NewService(e.led, approval.NewService(e.led, time.Now), approval.Lazy{}, slog.New(slog.DiscardHandler), time.Now)
	s := &stepUp{t: t, ctx: ctx, e: e, svc: svc, b: connection.NewBroker(svc, perm, nil), runs: run.NewService(e.led, time.Now),
		pol: mustPolicy(t, e.st), v: v, gen: v.AuthorizationGeneration}

	r1 := s.newRun()
	if got := subject(s.call(r1, "w1", "whoami")); got != "id1" {
		t.Fatalf("whoami before the step-up reached the upstream as %q", got)
	}
	s.refusedAtTheDoor(r1)
	s.grantStillServes(r1)
	s.reauthorize(r1, firstStarted)
}

// stepUp is TestOAuthStepUp's connection, broker and runs.
type stepUp struct {
	t    *testing.T
	ctx  context.Context
	e    *oauthEnv
	svc  *connection.Service
	b    *connection.Broker
	runs *run.Service
	pol  string
	v    connection.View
	gen  int
}

func (s *stepUp) newRun() string {
	s.t.Helper()
	limit := 1.0
	req := run.CreateRequest{PolicyID: s.pol, Capabilities: []string{"claude-code"}, Connections: []string{"notes"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	r, err := s.runs.Create(s.ctx, alice, req)
	if err != nil {
		s.t.Fatal(err)
	}
	return r.ID
}

func (s *stepUp) call(runID, id, tool string) connection.CallAnswer {
	s.t.Helper()
	ans, err := s.b.Call(s.ctx, runID, permission.Request{ToolCallID: id, ToolName: "mcp__notes__" + tool, Input: json.RawMessage(`{}`)}, 0)
	if err != nil {
		s.t.Fatalf("%s: %v", tool, err)
	}
	return ans
}

// subject is who the upstream says called it, "" unless the call ran.
func subject(ans connection.CallAnswer) string {
	var got struct {
		Subject string `json:"subject"`
	}
	if ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || json.Unmarshal(ans.Result.StructuredContent, &got) != nil {
		return ""
	}
	return got.Subject
}

// refusedAtTheDoor: write_note is refused with source binding and a
// reason to re-authorize that names neither the scope nor a token, and
// its retry is judged again (the tool did not run) and refused again.
func (s *stepUp) refusedAtTheDoor(r1 string) {
	t := s.t
	refused := s.call(r1, "n1", "write_note")
	if refused.Decision != vocab.Deny || refused.Source != "binding" || refused.Result != nil ||
		!strings.Contains(refused.Reason, "fluidbox connections authorize "+s.v.ID) || !strings.Contains(refused.Reason, "insufficient_scope") {
		t.Fatalf("write_note without its scope = %+v, want a binding denial saying to re-authorize", refused)
	}
	if strings.Contains(refused.Reason, stepUpScope) {
		t.Errorf("the reason names the upstream's scope: %s", refused.Reason)
	}
	for _, tok := range s.e.p.Issued() {
		if strings.Contains(refused.Reason, tok) {
			t.Fatal("the reason carries a token")
		}
	}
	if n := s.e.up.StepUpCalls(); n != 1 {
		t.Errorf("write_note reached the upstream %d times, want 1 (refused, not retried)", n)
	}
	// The tool did not run, so a retry of the call is not "executed
	// already": it is judged again, and refused again at the door.
	if retried := s.call(r1, "n1", "write_note"); retried.Decision != vocab.Deny || retried.Source != "binding" || !strings.Contains(retried.Reason, "insufficient_scope") {
		t.Fatalf("a retry of the refused call = %+v, want the step-up denial again", retried)
	}
	if n := s.e.up.StepUpCalls(); n != 2 {
		t.Errorf("write_note reached the upstream %d times after its retry, want 2", n)
	}
}

// grantStillServes: the connection stays active at its generation and
// shows the scope; calls the grant covers keep working.
func (s *stepUp) grantStillServes(r1 string) {
	t := s.t
	got, err := s.svc.Get(s.ctx, alice, s.v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.ConnectionActive || got.AuthorizationGeneration != s.gen || !slices.Equal(got.StepUpScopes, []string{stepUpScope}) {
		t.Fatalf("after the challenge: %+v, want active at generation %d with step_up_scopes [%s]", got, s.gen, stepUpScope)
	}
	if got := subject(s.call(r1, "w2", "whoami")); got != "id1" {
		t.Fatalf("whoami after the step-up (the grant covers it) = %q", got)
	}
}

// reauthorize: the re-authorization asks for the union, moves the
// generation by one only when completed; the old run is refused, a new
// run's call succeeds.
func (s *stepUp) reauthorize(r1 string, firstStarted connection.Started) {
	t := s.t
	again, err := s.svc.Authorize(s.ctx, alice, s.v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	againStarted := start(t, s.svc, again)
	asked := requestedScope(t, againStarted.URL)
	for _, sc := range append(requestedScope(t, firstStarted.URL), stepUpScope) {
		if !slices.Contains(asked, sc) {
			t.Errorf("the re-authorization asks for %q, which lacks %q", asked, sc)
		}
	}
	if got, _ := s.svc.Get(s.ctx, alice, s.v.ID); got.AuthorizationGeneration != s.gen {
		t.Fatalf("starting the re-authorization moved the generation to %d", got.AuthorizationGeneration)
	}
	v := s.e.complete(t, s.svc, againStarted, s.e.p.User1())
	if v.AuthorizationGeneration != s.gen+1 || v.Status != store.ConnectionActive || len(v.StepUpScopes) != 0 {
		t.Fatalf("after the re-authorization: %+v, want active at generation %d, nothing pending", v, s.gen+1)
	}
	if ans := s.call(r1, "n2", "write_note"); ans.Decision != vocab.Deny || ans.Source != "binding" {
		t.Errorf("the old run after the re-authorization = %+v, want a binding denial", ans)
	}
	if ans := s.call(r1, "n1", "write_note"); ans.Decision != vocab.Deny || ans.Source != "binding" {
		t.Errorf("the refused call retried after the re-authorization = %+v, want a binding denial", ans)
	}
	if got := subject(s.call(s.newRun(), "n1", "write_note")); got != "id1" {
		t.Fatalf("write_note after the re-authorization reached the upstream as %q", got)
	}
}

// TestOAuthStepUpBeforeTheDecision: an upstream that wants more scopes
// to list its tools (the broker's look before the gate decides) has the
// call denied by the gate with source binding and the step-up reason (the
// tool is not called), and tools/refresh refused with ErrStepUp; the
// re-authorization makes a new run's call work.
func TestOAuthStepUpBeforeTheDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	e.up = oauthtest.NewServer(t, e.p, oauthtest.StepUpTool("write_note", stepUpScope))
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	v = e.authorize(t, svc, admin, v.ID, e.p.User1())
	if _, err := svc.Refresh(ctx, admin, v.ID); err != nil {
		t.Fatal(err)
	}
	e.up.RequireListScope(stepUpScope)
	runs := run.NewService(e.led, time.Now)
	pol := mustPolicy(t, e.st)
	newRun := func() string {
		t.Helper()
		limit := 1.0
		req := run.CreateRequest{PolicyID: pol, Capabilities: []string{"claude-code"}, Connections: []string{"team"}}
		req.Budget = &struct {
			LimitUSD *float64 `json:"limit_usd"`
		}{LimitUSD: &limit}
		r, err := runs.Create(ctx, admin, req)
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	perm := permission.NewService(e.led, approval.NewService(e.led, time.Now), approval.Lazy{}, slog.New(slog.DiscardHandler), time.Now)
	b := connection.NewBroker(svc, perm, nil)
	r1 := newRun()
	ans, err := b.Call(ctx, r1, permission.Request{ToolCallID: "w1", ToolName: "mcp__team__whoami", Input: json.RawMessage(`{}`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Decision != vocab.Deny || ans.Source != "binding" || ans.Result != nil || !strings.Contains(ans.Reason, "fluidbox connections authorize "+v.ID) {
		t.Fatalf("a call whose tools/list needs a scope = %+v, want the gate's binding denial with the step-up reason", ans)
	}
	got, err := svc.Get(ctx, admin, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.ConnectionActive || got.AuthorizationGeneration != v.AuthorizationGeneration || !slices.Equal(got.StepUpScopes, []string{stepUpScope}) {
		t.Fatalf("after the challenge: %+v", got)
	}
	if _, err := svc.Refresh(ctx, admin, v.ID); !errors.Is(err, connection.ErrStepUp) {
		t.Errorf("tools/refresh while the upstream wants more scopes: %v, want ErrStepUp", err)
	}
	v = e.authorize(t, svc, admin, v.ID, e.p.User1())
	if v.AuthorizationGeneration != got.AuthorizationGeneration+1 {
		t.Fatalf("generation %d after the re-authorization, want %d", v.AuthorizationGeneration, got.AuthorizationGeneration+1)
	}
	ans, err = b.Call(ctx, newRun(), permission.Request{ToolCallID: "w1", ToolName: "mcp__team__whoami", Input: json.RawMessage(`{}`)}, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError {
		t.Fatalf("after the re-authorization: %+v %v", ans, err)
	}
}

// TestOAuthStepUpConcurrent: challenges landing at once, each asking for
// its own scope, all end up recorded (a compare-and-swap union, not a last
// writer winning); scopes the authorization requested already are not a
// step-up, and a connection that moved on records nothing.
func TestOAuthStepUpConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	v = e.authorize(t, svc, admin, v.ID, e.p.User1())
	const n = 24
	var wg sync.WaitGroup
	var want []string
	for i := range n {
		s := fmt.Sprintf("scope:%02d", i)
		want = append(want, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := connection.RecordStepUp(svc, ctx, v.ID, v.AuthorizationGeneration, []string{"openid", s}); !errors.Is(err, connection.ErrStepUp) {
				t.Errorf("record %s: %v, want ErrStepUp", s, err)
			}
		}()
	}
	wg.Wait()
	got, err := svc.Get(ctx, admin, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.StepUpScopes)
	if !slices.Equal(got.StepUpScopes, want) {
		t.Fatalf("step_up_scopes = %q, want %q", got.StepUpScopes, want)
	}
	if err := connection.RecordStepUp(svc, ctx, v.ID, v.AuthorizationGeneration, []string{"openid"}); err != nil {
		t.Errorf("a challenge for a requested scope: %v, want nil (not a step-up)", err)
	}
	if err := connection.RecordStepUp(svc, ctx, v.ID, v.AuthorizationGeneration-1, []string{"new:scope"}); errors.Is(err, connection.ErrStepUp) || err == nil {
		t.Errorf("at a generation the connection left: %v, want a refusal", err)
	}
}

// TestScopeChallengeKinds: which refusals are a step-up. A 403 naming a
// scope the authorization did not request is; one naming only requested
// scopes is not (another authorization would ask for the same); a 401 is
// only after a refresh (it most often means an expired token); a
// connection with a static credential has nothing to re-authorize.
func TestScopeChallengeKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	e.authorize(t, svc, admin, v.ID, e.p.User1())
	c, err := e.st.GetConnection(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	refusal := func(sentinel error, scopes ...string) error {
		return &broker.UpstreamError{Op: "tools/call", Status: 403, Msg: "x", Err: sentinel, Scopes: scopes}
	}
	static := c
	static.CredentialType = "bearer"
	cases := []struct {
		name      string
		c         store.Connection
		err       error
		refreshed bool
		want      error
	}{
		{"403 for a requested scope", c, refusal(broker.ErrInsufficientScope, "openid"), false, nil},
		{"403 without scopes", c, refusal(broker.ErrForbidden), false, nil},
		{"401 before a refresh", c, refusal(broker.ErrUnauthorized, "more:a"), false, nil},
		{"a static credential", static, refusal(broker.ErrInsufficientScope, "more:b"), false, nil},
		{"not an upstream refusal", c, errors.New("x"), true, nil},
		{"401 after a refresh", c, refusal(broker.ErrUnauthorized, "more:c"), true, connection.ErrStepUp},
		{"403 for a new scope", c, refusal(broker.ErrInsufficientScope, "openid", "more:d"), false, connection.ErrStepUp},
	}
	for _, tc := range cases {
		if err := connection.ScopeChallenge(svc, ctx, tc.c, tc.err, tc.refreshed); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	got, err := svc.Get(ctx, admin, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.StepUpScopes, []string{"more:c", "more:d"}) {
		t.Errorf("step_up_scopes = %q, want only the step-ups' [more:c more:d]", got.StepUpScopes)
	}
}

// requestedScope is the scope parameter of an authorization URL.
func requestedScope(t *testing.T, authURL string) []string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(u.Query().Get("scope"))
}
