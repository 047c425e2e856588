package connection_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// The callback is never dialled in these tests: the provider's redirect is
// delivered to Service.Callback directly.
const oauthRedirect = "http://127.0.0.1:1/v1/oauth/callback"

var oauthSite = oauth.Site{RedirectURI: oauthRedirect, StartURL: "http://127.0.0.1:1/v1/oauth/start"}

type oauthEnv struct {
	st     *store.Store
	led    *ledger.Ledger
	sealer seal.Sealer
	p      *oauthtest.Provider
	up     *oauthtest.Server
}

func newOAuthEnv(t *testing.T) *oauthEnv {
	t.Helper()
	st := testenv.Store(t)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	p := oauthtest.NewProvider(t, oauthRedirect)
	return &oauthEnv{st: st, led: ledger.New(st, time.Now), sealer: sealer, p: p, up: oauthtest.NewServer(t, p)}
}

func (e *oauthEnv) create(t *testing.T, svc *connection.Service, who auth.Principal, name, kind string) connection.View {
	t.Helper()
	var req connection.CreateRequest
	body, _ := json.Marshal(map[string]any{
		"name": name, "url": e.up.URL, "kind": kind, "tool_classes": map[string]string{"whoami": "read"},
		"credential": map[string]any{"type": "oauth", "client_id": e.p.ClientID, "client_secret": e.p.Secret, "issuer": e.p.Issuer},
	})
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	v, err := svc.Create(context.Background(), who, req)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// authorize runs the flow for who, logging in at the provider as user.
func (e *oauthEnv) authorize(t *testing.T, svc *connection.Service, who auth.Principal, ref, user string) connection.View {
	t.Helper()
	res, err := svc.Authorize(context.Background(), who, ref, oauthSite)
	if err != nil {
		t.Fatalf("%s authorizes %s: %v", who.Subject, ref, err)
	}
	return e.complete(t, svc, start(t, svc, res), user)
}

// start opens an authorization URL as the member's browser does: the
// authorize redirect, which gives the browser its nonce.
func start(t *testing.T, svc *connection.Service, res connection.AuthorizeResult) connection.Started {
	t.Helper()
	u, err := url.Parse(res.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Start(context.Background(), u.Query().Get("key"))
	if err != nil {
		t.Fatalf("the authorize redirect: %v", err)
	}
	return st
}

// respond signs in at the provider as user in the browser st was started
// in, and returns the authorization response that browser delivers.
func (e *oauthEnv) respond(t *testing.T, st connection.Started, user string) connection.CallbackQuery {
	t.Helper()
	back, err := e.p.Login(context.Background(), st.URL, user)
	if err != nil {
		t.Fatal(err)
	}
	return callbackQuery(back, st.Nonce)
}

// callbackQuery is the response at back, delivered by a browser holding
// nonce.
func callbackQuery(back *url.URL, nonce string) connection.CallbackQuery {
	q := back.Query()
	at := *back
	at.RawQuery = ""
	return connection.CallbackQuery{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss"), Error: q.Get("error"), RedirectURI: at.String(), Nonce: nonce}
}

// complete signs in as user in the browser st was started in and delivers
// the callback.
func (e *oauthEnv) complete(t *testing.T, svc *connection.Service, st connection.Started, user string) connection.View {
	t.Helper()
	a, err := svc.Callback(context.Background(), e.respond(t, st, user))
	if err != nil {
		t.Fatalf("callback: %v", err)
	}
	return a.View
}

// TestOAuthPersonalPerMember: each member authorizes their own personal
// connection with their own account at the provider; nothing lets one
// member's token serve another's call: another member can neither
// authorize nor attach it, and each run's brokered call reaches the
// upstream as its own member.
func TestOAuthPersonalPerMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	for _, who := range []auth.Principal{alice, bob} {
		if err := e.st.PutMember(ctx, store.Member{Sub: who.Subject, Status: store.MemberActive, Roles: who.Roles}); err != nil {
			t.Fatal(err)
		}
	}
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	va := e.create(t, svc, alice, "alices", "personal")
	vb := e.create(t, svc, bob, "bobs", "personal")
	if va.Status != store.ConnectionAuthorizationRequired || va.CredentialType != connection.CredentialOAuth {
		t.Fatalf("created %+v", va)
	}
	if _, err := svc.Authorize(ctx, bob, va.ID, oauthSite); !errors.Is(err, connection.ErrNotFound) {
		t.Errorf("bob authorizes alice's connection: %v, want ErrNotFound", err)
	}
	if _, err := svc.Authorize(ctx, admin, va.ID, oauthSite); !errors.Is(err, connection.ErrForbidden) {
		t.Errorf("an admin authorizes alice's personal connection: %v, want ErrForbidden", err)
	}
	if got := e.authorize(t, svc, alice, va.ID, e.p.User1()); got.Status != store.ConnectionActive || got.AuthorizationGeneration != 2 {
		t.Fatalf("alice's connection after the callback: %+v", got)
	}
	e.authorize(t, svc, bob, vb.ID, oauthtest.User2)
	for _, c := range []struct {
		who auth.Principal
		ref string
	}{{alice, va.ID}, {bob, vb.ID}} {
		if _, err := svc.Refresh(ctx, c.who, c.ref); err != nil {
			t.Fatal(err)
		}
	}

	runs := run.NewService(e.led, time.Now)
	pol := mustPolicy(t, e.st)
	newRun := func(who auth.Principal, con string) (string, error) {
		limit := 1.0
		req := run.CreateRequest{PolicyID: pol, Capabilities: []string{"claude-code"}, Connections: []string{con}}
		req.Budget = &struct {
			LimitUSD *float64 `json:"limit_usd"`
		}{LimitUSD: &limit}
		r, err := runs.Create(ctx, who, req)
		return r.ID, err
	}
	var forb *run.ForbiddenError
	if _, err := newRun(bob, "alices"); !errors.As(err, &forb) {
		t.Fatalf("bob attaches alice's connection: %v, want ForbiddenError", err)
	}
	perm := permission.NewService(e.led, approval.NewService(e.led, time.Now), approval.Lazy{}, slog.New(slog.DiscardHandler), time.Now)
	b := connection.NewBroker(svc, perm, nil)
	for _, c := range []struct {
		who       auth.Principal
		con, want string
	}{{alice, "alices", "id1"}, {bob, "bobs", "id2"}} {
		id, err := newRun(c.who, c.con)
		if err != nil {
			t.Fatal(err)
		}
		ans, err := b.Call(ctx, id, permission.Request{ToolCallID: "w", ToolName: "mcp__" + c.con + "__whoami", Input: json.RawMessage(`{}`)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Subject string `json:"subject"`
		}
		if ans.Result == nil || json.Unmarshal(ans.Result.StructuredContent, &got) != nil || got.Subject != c.want {
			t.Errorf("%s's call reached the upstream as %q (%+v), want %q", c.who.Subject, got.Subject, ans, c.want)
		}
	}
}

// TestOAuthRefreshSingleFlight: an expired access token, wanted at once by
// dozens of calls on two independent broker instances sharing the table, is
// refreshed exactly once (the provider rotates refresh tokens, so a second
// refresh with the old one would fail and lose the grant), every caller
// gets the new token, and the generation does not move.
func TestOAuthRefreshSingleFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	setup := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, setup, admin, "team", "shared")
	e.authorize(t, setup, admin, v.ID, e.p.User1())
	stale, err := e.st.GetConnection(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}

	// Both instances' clocks say the token has expired.
	later := func() time.Time { return time.Now().Add(time.Hour) }
	instances := []*connection.Service{
		connection.NewService(e.st, e.sealer, connection.Options{Now: later, Egress: testenv.Loopback}),
		connection.NewService(e.st, e.sealer, connection.Options{Now: later, Egress: testenv.Loopback}),
	}
	const per = 16
	tokens := make(chan string, 2*per)
	var wg sync.WaitGroup
	for _, svc := range instances {
		for range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cred, err := connection.Credential(svc, ctx, stale, stale.Generation)
				if err != nil {
					t.Error(err)
					return
				}
				tokens <- cred.Token
			}()
		}
	}
	wg.Wait()
	close(tokens)
	if n := e.p.Refreshes(); n != 1 {
		t.Fatalf("refreshes = %d, want 1", n)
	}
	seen := map[string]bool{}
	for tok := range tokens {
		seen[tok] = true
	}
	if len(seen) != 1 {
		t.Fatalf("callers got %d different tokens, want 1", len(seen))
	}
	for tok := range seen {
		if err := e.up.Verify(ctx, tok); err != nil {
			t.Fatalf("the refreshed token is refused: %v", err)
		}
	}
	now, err := e.st.GetConnection(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if now.Generation != stale.Generation || now.Status != store.ConnectionActive {
		t.Fatalf("after the refresh: generation %d status %s, want %d active", now.Generation, now.Status, stale.Generation)
	}
}

// TestOAuthCallbackBindings: a state is bound to its connection's
// generation (a state made before another authorization completed is
// refused) and to the member who asked; an expired state is refused.
func TestOAuthCallbackBindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	svc := connection.NewService(e.st, e.sealer, connection.Options{Now: now, Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")

	early, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	earlyStarted := start(t, svc, early)
	e.authorize(t, svc, admin, v.ID, e.p.User1()) // generation 2
	if _, err := svc.Callback(ctx, e.respond(t, earlyStarted, e.p.User1())); !errors.Is(err, connection.ErrChanged) {
		t.Errorf("a state from before another authorization: %v, want ErrChanged", err)
	}

	res, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	q := e.respond(t, start(t, svc, res), e.p.User1())
	mu.Lock()
	clock = clock.Add(connection.StateTTL + time.Second)
	mu.Unlock()
	if _, err := svc.Callback(ctx, q); !errors.Is(err, connection.ErrState) {
		t.Errorf("an expired state: %v, want ErrState", err)
	}
	if _, err := svc.Callback(ctx, connection.CallbackQuery{Code: "x", State: "y", Error: "access_denied"}); !errors.Is(err, connection.ErrState) {
		t.Errorf("an unknown state with an error: %v, want ErrState", err)
	}
	if got, err := svc.Get(ctx, admin, v.ID); err != nil || got.AuthorizationGeneration != 2 {
		t.Errorf("refused callbacks moved the connection: %+v %v", got, err)
	}
}

// TestOAuthClientStaysWithItsServer: a connection's OAuth client belongs to
// the authorization server it was registered at, or first authorized at
// (the operator's): when the upstream's metadata names another, the client
// and its secret are not presented there. Authorizing is refused before
// the other server sees the client, and a state whose discovery names
// another server than the client's is refused at the callback before the
// code is redeemed.
func TestOAuthClientStaysWithItsServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	v = e.authorize(t, svc, admin, v.ID, e.p.User1())

	other := oauthtest.NewProvider(t, oauthRedirect)
	e.up.SetAuthorizationServer(other.Issuer)
	if res, err := svc.Authorize(ctx, admin, v.ID, oauthSite); !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("authorize after the upstream switched servers: %+v, %v; want ErrDiscovery", res, err)
	}
	if other.Codes() != 0 || other.Refreshes() != 0 {
		t.Fatalf("the other server got token requests")
	}

	e.up.SetAuthorizationServer(e.p.Issuer)
	res, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	// A registration at the other server lands meanwhile (a concurrent
	// authorization that discovered it).
	if err := e.st.SetOAuthClient(ctx, v.ID, v.AuthorizationGeneration, e.p.ClientID, nil, "client_secret_basic", other.Issuer, oauthSite.RedirectURIFor(other.Issuer), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	q := e.respond(t, start(t, svc, res), e.p.User1())
	codes := e.p.Codes()
	if _, err := svc.Callback(ctx, q); !errors.Is(err, connection.ErrChanged) {
		t.Fatalf("callback with the client bound to another server: %v, want ErrChanged", err)
	}
	if n := e.p.Codes() - codes; n != 0 {
		t.Fatalf("%d code redemptions after the client moved to another server", n)
	}
	if got, err := svc.Get(ctx, admin, v.ID); err != nil || got.AuthorizationGeneration != v.AuthorizationGeneration {
		t.Fatalf("the refused callback moved the connection: %+v %v", got, err)
	}
}
