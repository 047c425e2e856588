package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/sso"
)

const ssoAudience = "fluidbox-api"

// ssoStack is the API in SSO mode on the local stack, trusting a real OIDC
// issuer served on 127.0.0.1 (discovery and JWKS over HTTP).
type ssoStack struct {
	*stack
	iss *oidcissuer.Issuer
}

func newSSOStack(t *testing.T) *ssoStack {
	t.Helper()
	iss := oidcissuer.Start(t, ssoAudience)
	verifier, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL, Audience: ssoAudience})
	if err != nil {
		t.Fatalf("NewOIDC: %v", err)
	}
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, OIDC: verifier})))
	t.Cleanup(srv.Close)
	return &ssoStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, iss: iss}
}

// user returns a fresh, valid token for sub holding roles (none: no claim).
func (s *ssoStack) user(sub string, roles ...string) string {
	s.t.Helper()
	var claim any
	if roles != nil {
		claim = roles
	}
	return s.iss.Sign(s.t, s.iss.Claims(sub, sso.DefaultRolesClaim, claim))
}

// decideAs posts a decision with token and checks that no token comes back.
func (s *ssoStack) decideAs(token, apr, decision string) response {
	s.t.Helper()
	r := s.do("POST", "/v1/approvals/"+apr+"/decision", token, map[string]any{"decision": decision})
	noToken(s.t, r, token)
	return r
}

func noToken(t *testing.T, r response, token string) {
	t.Helper()
	if strings.Contains(string(r.raw), token) || (len(token) > 40 && strings.Contains(string(r.raw), token[len(token)-40:])) {
		t.Fatalf("response %s echoes the bearer token", r.raw)
	}
}

func errCode(r response) string {
	e, _ := r.body["error"].(map[string]any)
	return str(e["code"])
}

// TestSSOWhoMayDecide: roles admin and approver decide; member, no role and
// unknown roles are 403; route access follows the roles.
func TestSSOWhoMayDecide(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	ada := s.user("ada", "admin")
	april := s.iss.Sign(t, s.iss.Claims("april", sso.DefaultRolesClaim, "approver")) // one string, not a list
	cases := []struct {
		name, sub, token string
		status           int
	}{
		{"role admin", "ada", ada, 200},
		{"role approver", "april", april, 200},
		{"role member", "mel", s.user("mel", "member"), 403},
		{"no role", "nora", s.user("nora"), 403},
		{"unknown roles", "oscar", s.user("oscar", "superuser", "root"), 403},
	}
	for i, c := range cases {
		apr := s.pending(id, tok, fmt.Sprintf("c%d", i), "make build")
		r := s.decideAs(c.token, apr, "approved_once")
		if r.status != c.status {
			t.Errorf("%s: decide = %d %s, want %d", c.name, r.status, r.raw, c.status)
			continue
		}
		switch c.status {
		case 200:
			if r.body["applied"] != true || r.body["decided_by"] != c.sub || r.body["status"] != "approved_once" {
				t.Errorf("%s: decision = %s, want applied by %s", c.name, r.raw, c.sub)
			}
		case 403:
			if errCode(r) != "forbidden" {
				t.Errorf("%s: decide = %s, want code forbidden", c.name, r.raw)
			}
			// Still pending: the refusal wrote nothing.
			if got := s.must(200, "GET", "/v1/approvals/"+apr, adminToken, nil)["status"]; got != "pending" {
				t.Errorf("%s: approval after a refused decision = %v, want pending", c.name, got)
			}
		}
	}

	access := []struct {
		name, method, path, token string
		status                    int
	}{
		{"approver lists approvals", "GET", "/v1/approvals", april, 200},
		{"member lists their own inbox (empty)", "GET", "/v1/approvals", s.user("mel", "member"), 200},
		{"approver may not write policies", "POST", "/v1/policies", april, 403},
		{"approver may not create runs", "POST", "/v1/sessions", april, 403},
		{"approver may not list members", "GET", "/v1/members", april, 403},
		{"approver may not read a run", "GET", "/v1/sessions/" + id, april, 403},
		{"approver reads a run's ledger", "GET", "/v1/sessions/" + id + "/events", april, 200},
		{"member may not read a run's ledger", "GET", "/v1/sessions/" + id + "/events", s.user("mel", "member"), 403},
		{"admin reads a run", "GET", "/v1/sessions/" + id, ada, 200},
		{"admin lists members", "GET", "/v1/members", ada, 200},
		{"the run's session token still works", "GET", "/v1/sessions/" + id, tok, 200},
		{"the operator's admin token still works", "GET", "/v1/members", adminToken, 200},
	}
	for _, c := range access {
		var body any
		if c.method == "POST" {
			body = map[string]any{}
		}
		r := s.do(c.method, c.path, c.token, body)
		if r.status != c.status {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, r.status, r.raw, c.status)
		}
		noToken(t, r, c.token)
	}
	// An SSO admin writes what the operator writes.
	s.must(201, "POST", "/v1/policies", ada, basicPolicy)
}

// TestSSORefusesBadTokens: anything but a good token from the configured
// issuer for the configured audience is 401, and never echoed.
func TestSSORefusesBadTokens(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t)
	other := oidcissuer.NewKey(t)
	good := func() map[string]any { return s.iss.Claims("ada", sso.DefaultRolesClaim, []string{"admin"}) }
	with := func(k string, v any) string {
		c := good()
		c[k] = v
		return s.iss.Sign(t, c)
	}
	stranger := oidcissuer.Start(t, ssoAudience) // a real issuer, not ours
	cases := []struct{ name, token string }{
		{"expired", with("exp", time.Now().Add(-time.Minute).Unix())},
		{"wrong audience", with("aud", "another-app")},
		{"wrong issuer claim", with("iss", "https://login.example.com")},
		{"signed by another key, same kid", oidcissuer.Sign(t, other, oidcissuer.KeyID, good())},
		{"signed by another key, its own kid", oidcissuer.Sign(t, other, "rogue", good())},
		{"issued by another issuer", stranger.Sign(t, stranger.Claims("ada", sso.DefaultRolesClaim, []string{"admin"}))},
		{"not a JWT", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/approvals", "/v1/members"} {
			r := s.do("GET", path, c.token, nil)
			if r.status != 401 || errCode(r) != "unauthenticated" {
				t.Errorf("%s: GET %s = %d %s, want 401 unauthenticated", c.name, path, r.status, r.raw)
			}
			noToken(t, r, c.token)
		}
	}
	// A user may not carry a name records give the operator, the system or
	// a trigger.
	for _, sub := range []string{"admin", "system:expiry", "trigger:gh"} {
		tok := s.user(sub, "admin")
		if r := s.do("GET", "/v1/approvals", tok, nil); r.status != 403 || errCode(r) != "forbidden" {
			t.Errorf("sub %q: GET /v1/approvals = %d %s, want 403 forbidden", sub, r.status, r.raw)
		}
	}
	// A refused token records no member.
	if got := s.must(200, "GET", "/v1/members", adminToken, nil)["members"].([]any); len(got) != 0 {
		t.Fatalf("members after refused tokens = %v, want none", got)
	}
	// Without SSO a JWT, however good, is just an unknown bearer.
	plain := newStack(t)
	if r := plain.do("GET", "/v1/approvals", s.user("ada", "admin"), nil); r.status != 401 {
		t.Fatalf("JWT without SSO = %d %s, want 401", r.status, r.raw)
	}
}

// TestSSOIssuerDown: when the issuer's keys cannot be fetched the answer is
// 503 (retry), not a verdict on the token.
func TestSSOIssuerDown(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t)
	tok := s.user("ada", "admin")
	s.iss.Close()
	r := s.do("GET", "/v1/approvals", tok, nil)
	if r.status != 503 || errCode(r) != "unavailable" {
		t.Fatalf("GET /v1/approvals with the issuer down = %d %s, want 503 unavailable", r.status, r.raw)
	}
	noToken(t, r, tok)
	s.must(200, "GET", "/v1/approvals", adminToken, nil)
}

// TestSSOMembers: a user is recorded once, at first sight; a deactivated
// member is refused with any token; activation lets it back in.
func TestSSOMembers(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t)
	ada := s.user("ada", "admin")
	for range 3 {
		s.must(200, "GET", "/v1/approvals", s.user("mel", "approver"), nil)
		s.must(200, "GET", "/v1/approvals", ada, nil)
	}
	s.must(403, "GET", "/v1/members", s.user("mel", "approver"), nil)
	list := s.must(200, "GET", "/v1/members", ada, nil)["members"].([]any)
	if len(list) != 2 {
		t.Fatalf("members = %v, want ada and mel once each", list)
	}
	mel := list[1].(map[string]any)
	if mel["sub"] != "mel" || mel["status"] != "active" || fmt.Sprint(mel["roles"]) != "[approver]" || str(mel["first_seen"]) == "" {
		t.Fatalf("member mel = %v", mel)
	}
	rows := 0
	for _, it := range s.items() {
		if strings.HasPrefix(it["pk"], `{"Value":"USER#`) {
			rows++
		}
	}
	if rows != 2 {
		t.Fatalf("member rows = %d, want 2", rows)
	}

	// A change of roles is recorded.
	s.must(200, "GET", "/v1/approvals", s.user("mel", "member"), nil)
	got := s.must(200, "GET", "/v1/members", ada, nil)["members"].([]any)[1].(map[string]any)
	if fmt.Sprint(got["roles"]) != "[member]" || got["first_seen"] != mel["first_seen"] {
		t.Fatalf("mel after a role change = %v, want roles [member], first_seen kept", got)
	}

	out := s.must(200, "POST", "/v1/members/mel/deactivate", ada, nil)
	if out["status"] != "inactive" || out["deactivated_by"] != "ada" || str(out["deactivated_at"]) == "" {
		t.Fatalf("deactivate = %v", out)
	}
	fresh := s.user("mel", "approver")
	r := s.do("GET", "/v1/approvals", fresh, nil)
	if r.status != 403 || errCode(r) != "forbidden" || !strings.Contains(string(r.raw), "deactivated") {
		t.Fatalf("deactivated member with a fresh token = %d %s, want 403 forbidden naming deactivation", r.status, r.raw)
	}
	noToken(t, r, fresh)
	s.must(403, "GET", "/v1/members", s.user("mel", "admin"), nil) // no role lifts it

	s.must(200, "POST", "/v1/members/mel/activate", adminToken, nil)
	s.must(200, "GET", "/v1/approvals", s.user("mel", "approver"), nil)

	if r := s.do("POST", "/v1/members/ada/deactivate", ada, nil); r.status != 409 {
		t.Fatalf("self-deactivation = %d %s, want 409", r.status, r.raw)
	}
	s.must(404, "POST", "/v1/members/nobody/deactivate", ada, nil)
	s.must(404, "POST", "/v1/members/nobody/activate", ada, nil)
	s.must(403, "POST", "/v1/members/ada/deactivate", s.user("mel", "approver"), nil)
	// The operator can deactivate an admin.
	s.must(200, "POST", "/v1/members/ada/deactivate", adminToken, nil)
	s.must(403, "GET", "/v1/members", ada, nil)
}

// markPersonal does what the broker will do when connections exist: mark
// an approval as riding a personal connection.
func (s *ssoStack) markPersonal(runID, call, connection string) {
	s.t.Helper()
	db := devstack.DynamoClient(s.db.URL)
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(s.st.Table()),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RUN#" + runID},
			"sk": &types.AttributeValueMemberS{Value: "APR#" + call},
		},
		UpdateExpression:    aws.String("SET personal = :t, connection_id = :c"),
		ConditionExpression: aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": &types.AttributeValueMemberBOOL{Value: true},
			":c": &types.AttributeValueMemberS{Value: connection},
		},
	})
	if err != nil {
		s.t.Fatalf("mark %s/%s personal: %v", runID, call, err)
	}
}

// TestSSOPersonalApproval: a call on a personal connection is decided by
// the run's invoker alone — approve and deny alike, whatever their role —
// and by nobody else: not an admin, an approver or the operator.
func TestSSOPersonalApproval(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t)
	alice := s.user("alice", "admin")
	pol := s.policy(approvalPolicy)
	run := s.must(201, "POST", "/v1/sessions", alice, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	id, tok := run["id"].(string), run["token"].(string)
	if got := s.must(200, "GET", "/v1/sessions/"+id, adminToken, nil)["invoker"]; got != "alice" {
		t.Fatalf("invoker = %v, want alice", got)
	}
	approve := s.pending(id, tok, "p1", "make build")
	deny := s.pending(id, tok, "p2", "make dist")
	shared := s.pending(id, tok, "s1", "make tmp")
	s.markPersonal(id, "p1", "con_alice_jira")
	s.markPersonal(id, "p2", "con_alice_jira")

	if got := s.must(200, "GET", "/v1/approvals/"+approve, alice, nil); got["connection_id"] != "con_alice_jira" {
		t.Fatalf("personal approval = %v, want its connection_id", got)
	}
	// Another's personal call is not an approver's to read.
	s.must(403, "GET", "/v1/approvals/"+approve, s.user("carol", "approver"), nil)
	checkOthersRefused(t, s, tok, approve, deny)
	checkInvokerDecides(t, s, alice, id, tok, approve, deny)

	// The same run's other calls follow the roles as usual.
	if r := s.decideAs(s.user("carol", "approver"), shared, "approved_once"); r.status != 200 || r.body["applied"] != true {
		t.Fatalf("approver decides a shared call = %d %s", r.status, r.raw)
	}
	if r := s.decideAs(s.user("alice", "member"), s.pending(id, tok, "s2", "make out"), "approved_once"); r.status != 403 {
		t.Fatalf("invoker with role member decides a shared call = %d %s, want 403", r.status, r.raw)
	}
}

// checkOthersRefused: nobody but the invoker decides approve or deny
// (another admin, an approver, both, the operator, the run's own session
// token), and both stay pending.
func checkOthersRefused(t *testing.T, s *ssoStack, tok, approve, deny string) {
	t.Helper()
	others := []struct{ name, token string }{
		{"another admin", s.user("bob", "admin")},
		{"an approver", s.user("carol", "approver")},
		{"admin and approver at once", s.user("dan", "admin", "approver")},
		{"the operator", adminToken},
		{"the run's own session token", tok},
	}
	for _, o := range others {
		for _, apr := range []string{approve, deny} {
			for _, d := range []string{"approved_once", "denied"} {
				r := s.decideAs(o.token, apr, d)
				if o.token == tok {
					if r.status != 401 && r.status != 403 {
						t.Errorf("%s: %s %s = %d %s, want refused", o.name, d, apr, r.status, r.raw)
					}
					continue
				}
				if r.status != 403 || errCode(r) != "forbidden" {
					t.Errorf("%s: %s %s = %d %s, want 403 forbidden", o.name, d, apr, r.status, r.raw)
				}
			}
		}
	}
	for _, apr := range []string{approve, deny} {
		if got := s.must(200, "GET", "/v1/approvals/"+apr, adminToken, nil)["status"]; got != "pending" {
			t.Fatalf("%s after refused decisions = %v, want pending", apr, got)
		}
	}
}

// checkInvokerDecides: the invoker decides, whatever role the token now
// carries, and the run's asks follow.
func checkInvokerDecides(t *testing.T, s *ssoStack, alice, id, tok, approve, deny string) {
	t.Helper()
	r := s.decideAs(s.user("alice", "member"), approve, "approved_once")
	if r.status != 200 || r.body["applied"] != true || r.body["status"] != "approved_once" || r.body["decided_by"] != "alice" {
		t.Fatalf("invoker approves = %d %s, want applied approved_once by alice", r.status, r.raw)
	}
	if got := s.ask(id, tok, "p1", "Bash", bash("make build")); got.body["decision"] != "allow" {
		t.Fatalf("ask after the invoker approved = %s, want allow", got.raw)
	}
	r = s.decideAs(alice, deny, "denied")
	if r.status != 200 || r.body["applied"] != true || r.body["status"] != "denied" {
		t.Fatalf("invoker denies = %d %s, want applied denied", r.status, r.raw)
	}
	if got := s.ask(id, tok, "p2", "Bash", bash("make dist")); got.body["decision"] != "deny" || got.body["source"] != "approval" {
		t.Fatalf("ask after the invoker denied = %s, want deny from approval", got.raw)
	}
}
