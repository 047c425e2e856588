package connection_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const token = "CANARY-personal-token-19ad"

var (
	alice = auth.Principal{Kind: auth.KindUser, Subject: "alice", Roles: []string{auth.RoleMember}}
	bob   = auth.Principal{Kind: auth.KindUser, Subject: "bob", Roles: []string{auth.RoleMember}}
	admin = auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}
)

// upstream is an MCP server on 127.0.0.1 requiring the bearer token.
func upstream(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "personal", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "search", Description: "Searches."},
		func(context.Context, *mcp.CallToolRequest, struct {
			Q string `json:"q"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPersonalConnection: a personal connection is its owner's. Another
// member cannot see, refresh or replace it, nor attach it to a run (refused
// at run creation); the owner can; and once the owner is deactivated, the
// owner's run is refused with source binding.
func TestPersonalConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testenv.Store(t)
	led := ledger.New(st, time.Now)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	svc := connection.NewService(st, sealer, connection.Options{Egress: testenv.Loopback})
	for _, who := range []auth.Principal{alice, bob} {
		if err := st.PutMember(ctx, store.Member{Sub: who.Subject, Status: store.MemberActive, Roles: who.Roles}); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := svc.Create(ctx, alice, connection.CreateRequest{Name: "team", URL: upstream(t), Kind: "shared", Credential: &seal.Credential{Type: seal.TypeBearer, Token: token}}); !errors.Is(err, connection.ErrForbidden) {
		t.Errorf("member creating a shared connection: err = %v, want ErrForbidden", err)
	}
	v, err := svc.Create(ctx, alice, connection.CreateRequest{Name: "mine", URL: upstream(t), Kind: "personal", Credential: &seal.Credential{Type: seal.TypeBearer, Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Owner != "alice" || v.Kind != "personal" {
		t.Fatalf("created %+v", v)
	}
	if _, err := svc.Get(ctx, bob, v.ID); !errors.Is(err, connection.ErrNotFound) {
		t.Errorf("bob reads alice's connection: err = %v, want ErrNotFound", err)
	}
	if page, err := svc.List(ctx, bob, store.ListQuery{Limit: 50}); err != nil || len(page.Connections) != 0 || page.Next != "" {
		t.Errorf("bob's list = %+v, %v; want empty", page, err)
	}
	if page, err := svc.List(ctx, alice, store.ListQuery{Limit: 50}); err != nil || len(page.Connections) != 1 || page.Connections[0].ID != v.ID {
		t.Errorf("alice's list = %+v, %v; want her connection", page, err)
	}
	if _, err := svc.Refresh(ctx, admin, v.ID); !errors.Is(err, connection.ErrForbidden) {
		t.Errorf("admin refreshing a personal connection: err = %v, want ErrForbidden", err)
	}
	if _, err := svc.Refresh(ctx, alice, v.ID); err != nil {
		t.Fatalf("alice refreshes: %v", err)
	}

	pv := mustPolicy(t, st)
	runs := run.NewService(led, time.Now)
	req := run.CreateRequest{PolicyID: pv, Capabilities: []string{"claude-code"}, Connections: []string{"mine"}}
	limit := 1.0
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	var forb *run.ForbiddenError
	for _, who := range []auth.Principal{bob, admin} {
		if _, err := runs.Create(ctx, who, req); !errors.As(err, &forb) {
			t.Errorf("%s attaches alice's personal connection: err = %v, want ForbiddenError", who.Subject, err)
		}
	}
	r, err := runs.Create(ctx, alice, req)
	if err != nil {
		t.Fatalf("alice attaches her own connection: %v", err)
	}

	perm := permission.NewService(led, approval.NewService(led, time.Now), approval.Lazy{}, slog.New(slog.DiscardHandler), time.Now)
	ask := func(call string) permission.Answer {
		t.Helper()
		a, err := perm.Decide(ctx, r.ID, permission.Request{ToolCallID: call, ToolName: "mcp__mine__search", Input: []byte(`{"q":"x"}`)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := ask("1"); a.Decision != vocab.Allow {
		t.Errorf("owner active: %+v, want allow", a)
	}
	if _, err := st.SetMemberStatus(ctx, "alice", store.MemberInactive, "admin", store.FormatTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	if a := ask("2"); a.Decision != vocab.Deny || a.Source != "binding" {
		t.Errorf("owner deactivated: %+v, want deny/binding", a)
	}
}

func mustPolicy(t *testing.T, st *store.Store) string {
	t.Helper()
	return mustPolicyDoc(t, st, `{"name":"p","default_verdict":"allow","rules":[]}`)
}

func mustPolicyDoc(t *testing.T, st *store.Store, text string) string {
	t.Helper()
	return calltest.PutPolicy(t, st, text, time.Now())
}

func TestClassOfOnlyTightens(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	cases := []struct {
		operator string
		ann      *broker.Annotations
		want     capability.Class
	}{
		{"read", nil, "read"},
		{"", nil, "write"},
		{"bogus", nil, "write"},
		{"read", &broker.Annotations{ReadOnlyHint: &yes}, "read"},
		{"write", &broker.Annotations{ReadOnlyHint: &yes}, "write"},
		{"read", &broker.Annotations{DestructiveHint: &yes}, "write"},
		{"read", &broker.Annotations{OpenWorldHint: &yes}, "egress"},
		{"read", &broker.Annotations{OpenWorldHint: &no, DestructiveHint: &no}, "read"},
		{"execute", &broker.Annotations{DestructiveHint: &yes, OpenWorldHint: &yes}, "execute"},
		{"egress", &broker.Annotations{DestructiveHint: &yes}, "write"},
	}
	for _, c := range cases {
		if got := connection.ClassOf(c.operator, c.ann); got != c.want {
			t.Errorf("ClassOf(%q, %+v) = %q, want %q", c.operator, c.ann, got, c.want)
		}
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"jira": true, "my-jira_2": true, "a": true, "": false, "Jira": false, "a__b": false, "a_": false,
		"0123456789012345678901234567890123": false, "a.b": false, "a b": false,
	} {
		if got := connection.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
