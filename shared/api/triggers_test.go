package api_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/triggers"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

const webhookSecret = "test-webhook-secret-0123456789"

// newWebhookStack is newStack with a GitHub webhook secret ("" for none).
func newWebhookStack(t *testing.T, secret string) *stack {
	t.Helper()
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, GitHubWebhookSecret: secret})))
	t.Cleanup(srv.Close)
	return &stack{t: t, url: srv.URL, st: st, db: db, led: led}
}

// payload reads a real GitHub webhook body from testdata/github.
func payload(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "github", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// delivery is one webhook request as GitHub sends it.
type delivery struct {
	event, id, signature, contentType string
	body                              []byte
}

// signed is a pull_request delivery of body, signed with the test secret.
func signed(id string, body []byte) delivery {
	return delivery{event: "pull_request", id: id, signature: sign(webhookSecret, body), body: body}
}

func (s *stack) deliver(d delivery) response {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.url+"/v1/triggers/github", bytes.NewReader(d.body))
	if err != nil {
		s.t.Fatal(err)
	}
	ct := d.contentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "GitHub-Hookshot/test")
	for k, v := range map[string]string{"X-GitHub-Event": d.event, "X-GitHub-Delivery": d.id, "X-Hub-Signature-256": d.signature} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("POST /v1/triggers/github: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := response{status: resp.StatusCode, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// trigger configures repo with the basic policy and the claude-code bundle;
// extra fields override the defaults.
func (s *stack) trigger(repo string, extra map[string]any) string {
	s.t.Helper()
	body := map[string]any{
		"repository":   repo,
		"policy_id":    s.policy(basicPolicy),
		"capabilities": []string{"claude-code"},
		"autonomous":   false,
		"budget":       map[string]any{"limit_usd": 2.5},
	}
	for k, v := range extra {
		body[k] = v
	}
	return s.must(201, "POST", "/v1/triggers", adminToken, body)["id"].(string)
}

// runHeads counts the runs in the table.
func (s *stack) runHeads() int {
	s.t.Helper()
	n := 0
	for _, it := range s.items() {
		if strings.HasPrefix(it["pk"], `{"Value":"RUN#`) && it["sk"] == `{"Value":"HEAD"}` {
			n++
		}
	}
	return n
}

// unchanged fails the test unless the table holds exactly before.
func (s *stack) unchanged(what string, before []map[string]string) {
	s.t.Helper()
	if diff := cmp.Diff(before, s.items()); diff != "" {
		s.t.Errorf("%s changed the table (-before +after):\n%s", what, diff)
	}
}

func errorCode(r response) string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestTriggerConfigurations(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	created := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "KaTeX/KaTeX", "policy_id": pol, "capabilities": []string{"claude-code"},
		"autonomous": true, "budget": map[string]any{"limit_usd": 3.25},
	})
	id, _ := created["id"].(string)
	if !strings.HasPrefix(id, "trg_") {
		t.Fatalf("POST /v1/triggers id = %q, want trg_...", id)
	}
	want := map[string]any{
		"id": id, "repository": "KaTeX/KaTeX", "policy_id": pol, "capabilities": []any{"claude-code"},
		"connections": []any{}, "autonomous": true, "budget": map[string]any{"limit_usd": 3.25},
		"events": []any{"pull_request"}, "created_by": "admin", "created_at": created["created_at"],
		"revision": 0.0, "runner_key": created["runner_key"], "verify": "halt",
		// How a launched run reports and how long it may run: the defaults.
		"report": "check_run", "timeout_seconds": 3600.0,
	}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("POST /v1/triggers (-want +got):\n%s", diff)
	}
	// The runner key is shown once, in the creation's answer.
	if k, _ := created["runner_key"].(string); !strings.HasPrefix(k, "fbx_trg_") {
		t.Errorf("runner_key = %v, want fbx_trg_...", created["runner_key"])
	}
	delete(created, "runner_key")
	if got := s.must(200, "GET", "/v1/triggers/"+id, adminToken, nil); !cmp.Equal(got, created) {
		t.Errorf("GET /v1/triggers/%s = %v, want %v", id, got, created)
	}
	list, _ := s.must(200, "GET", "/v1/triggers", adminToken, nil)["triggers"].([]any)
	if len(list) != 1 || !cmp.Equal(list[0], any(created)) {
		t.Errorf("GET /v1/triggers = %v, want [%v]", list, created)
	}

	// One configuration per repository; GitHub's names are case-insensitive.
	r := s.do("POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "katex/katex", "policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1},
	})
	if r.status != 409 || errorCode(r) != "conflict" {
		t.Errorf("second trigger for katex/katex = %d %s, want 409 conflict", r.status, r.raw)
	}

	before := s.items()
	ok := func(kv ...any) string {
		body := map[string]any{"repository": "octo/repo", "policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(body, kv[i].(string))
			} else {
				body[kv[i].(string)] = kv[i+1]
			}
		}
		b, _ := json.Marshal(body)
		return string(b)
	}
	bad := []struct {
		name, body, mentions string
	}{
		{"no repository", ok("repository", nil), "repository"},
		{"not owner/name", ok("repository", "just-a-name"), "repository"},
		{"url, not a name", ok("repository", "https://github.com/octo/repo"), "repository"},
		{"dot-dot name", ok("repository", "octo/.."), "repository"},
		{"no policy", ok("policy_id", nil), "policy_id"},
		{"unknown policy", ok("policy_id", "pol_nope"), "policy_id"},
		{"unknown policy version", ok("policy_version", 9), "policy_version"},
		{"unknown capability", ok("capabilities", []string{"nope"}), "capabilities[0]"},
		{"no capability", ok("capabilities", []string{}), "capabilities"},
		{"no budget", ok("budget", nil), "budget.limit_usd"},
		{"negative budget", ok("budget", map[string]any{"limit_usd": -1}), "budget.limit_usd"},
		{"unknown connection", ok("connections", []string{"con_nope"}), "connections[0]"},
		{"bad trust tier", ok("trust_tier", "root"), "trust_tier"},
		{"unknown event", ok("events", []string{"push"}), "events[0]"},
		{"event twice", ok("events", []string{"pull_request", "pull_request"}), "events[1]"},
		{"unknown field", ok("secret", "x"), "secret"},
		{"trigger is not a field", ok("trigger", map[string]any{"type": "github"}), "trigger"},
		{"slack channel by name", ok("slack_channel", "#approvals"), "slack_channel"},
		{"slack channel a user", ok("slack_channel", "U0123ABC"), "slack_channel"},
		{"slack channel lower case", ok("slack_channel", "c0123abc"), "slack_channel"},
	}
	for _, c := range bad {
		r := s.do("POST", "/v1/triggers", adminToken, c.body)
		e, _ := r.body["error"].(map[string]any)
		if r.status != 400 || errorCode(r) != "invalid_request" || !strings.Contains(fmt.Sprint(e["message"]), c.mentions) {
			t.Errorf("%s: POST /v1/triggers = %d %s, want 400 invalid_request naming %q", c.name, r.status, r.raw, c.mentions)
		}
	}
	for _, c := range []struct{ method, path, token string }{
		{"POST", "/v1/triggers", ""},
		{"GET", "/v1/triggers", ""},
		{"GET", "/v1/triggers/" + id, "not-the-admin-token-at-all"},
	} {
		if r := s.do(c.method, c.path, c.token, ok()); r.status != 401 {
			t.Errorf("%s %s with token %q = %d, want 401", c.method, c.path, c.token, r.status)
		}
	}
	for _, p := range []string{"/v1/triggers/trg_nope", "/v1/triggers/bad%20id"} {
		if r := s.do("GET", p, adminToken, nil); r.status != 404 {
			t.Errorf("GET %s = %d, want 404", p, r.status)
		}
	}
	s.unchanged("refused trigger configurations", before)

	// A trigger may send its runs' approvals to its own Slack channel.
	withChannel := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "octo/slack", "policy_id": pol, "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "slack_channel": "C0PRREVIEW",
	})
	if withChannel["slack_channel"] != "C0PRREVIEW" {
		t.Errorf("POST /v1/triggers with slack_channel = %v, want it kept", withChannel)
	}
	if got := s.must(200, "GET", "/v1/triggers/"+withChannel["id"].(string), adminToken, nil); got["slack_channel"] != "C0PRREVIEW" {
		t.Errorf("GET of a trigger with slack_channel = %v", got)
	}
}

// TestGitHubDeliveryCreatesRun sends real GitHub payloads, signed, and
// checks the run each creates: its tier from the payload, and its trigger
// record.
func TestGitHubDeliveryCreatesRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file, repo, headRepo string
		number               float64
		sha, action, tier    string
		fork                 bool
		author               string
	}{
		{"fork.opened.json", "KaTeX/KaTeX", "KaTeX-bot/KaTeX", 2388, "3ae9c36f8a03c1bd7e352bc683f72943dc92422e", "opened", "read_only", true, "33710906"},
		{"same_repo.opened.json", "Codertocat/Hello-World", "Codertocat/Hello-World", 2, "ec26c3e57ca3a959ca5aad62de7213c562f8c821", "opened", "trusted", false, "21031067"},
		{"deleted_fork.opened.json", "KaTeX/KaTeX", "", 2388, "3ae9c36f8a03c1bd7e352bc683f72943dc92422e", "opened", "read_only", true, "33710906"},
		{"fork.synchronize.json", "KaTeX/KaTeX", "KaTeX-bot/KaTeX", 2388, "a3404550c2465df195b4c7e2081f74dd5a7aced6", "synchronize", "read_only", true, "33710906"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			s := newWebhookStack(t, webhookSecret)
			trg := s.trigger(c.repo, map[string]any{"autonomous": true})
			deliveryID := "d0a1b2c3-" + strings.TrimSuffix(c.file, ".json")
			r := s.deliver(signed(deliveryID, payload(t, c.file)))
			if r.status != 201 {
				t.Fatalf("delivery = %d %s, want 201", r.status, r.raw)
			}
			id, _ := r.body["session_id"].(string)
			if want := triggers.DeliveryRunID(payload(t, c.file)); id != want || r.body["trust_tier"] != c.tier {
				t.Errorf("delivery = %s, want session_id %s, trust_tier %s", r.raw, want, c.tier)
			}
			if _, ok := r.body["token"]; ok {
				t.Errorf("delivery response %s carries a token; it goes to GitHub", r.raw)
			}

			got := s.must(200, "GET", "/v1/sessions/"+id, adminToken, nil)
			wantGitHub := map[string]any{
				"trigger_id": trg, "delivery_id": deliveryID, "event": "pull_request", "action": c.action,
				"repository": c.repo, "head_repository": c.headRepo, "pull_request": c.number,
				"head_sha": c.sha, "fork": c.fork, "author": c.author,
			}
			if got["trust_tier"] != c.tier || got["trigger"] != "github" || got["invoker"] != "trigger:"+trg || got["autonomous"] != true {
				t.Errorf("GET run = tier %v trigger %v invoker %v autonomous %v, want %s github trigger:%s true", got["trust_tier"], got["trigger"], got["invoker"], got["autonomous"], c.tier, trg)
			}
			if diff := cmp.Diff(wantGitHub, got["github"]); diff != "" {
				t.Errorf("GET run github (-want +got):\n%s", diff)
			}
			if b, _ := got["budget"].(map[string]any); b["limit_usd"] != 2.5 {
				t.Errorf("GET run budget = %v, want limit 2.5 from the trigger", got["budget"])
			}

			evs, _ := s.must(200, "GET", "/v1/sessions/"+id+"/events", adminToken, nil)["events"].([]any)
			first, _ := evs[0].(map[string]any)
			data, _ := first["data"].(map[string]any)
			if first["type"] != "session.created" || data["trust_tier"] != c.tier || data["trigger"] != "github" {
				t.Errorf("first event = %v, want session.created, %s, github", first, c.tier)
			}
			if diff := cmp.Diff(wantGitHub, data["github"]); diff != "" {
				t.Errorf("session.created github (-want +got):\n%s", diff)
			}

			// The tier holds at the gate, whatever autonomy says: a
			// read_only run cannot write.
			dec := s.must(200, "POST", "/v1/sessions/"+id+"/permission", adminToken, map[string]any{
				"tool_call_id": "call-1", "tool_name": "Write", "input": map[string]any{"file_path": "src/a.go", "content": "x"},
			})
			if c.tier == "read_only" && (dec["decision"] != "deny" || dec["source"] != "trust_tier") {
				t.Errorf("Write in a read_only run = %v, want deny by trust_tier", dec)
			}
			if c.tier == "trusted" && dec["source"] == "trust_tier" {
				t.Errorf("Write in a trusted run = %v, denied by trust_tier", dec)
			}
		})
	}
}

// TestGitHubConfigurationCannotWiden: a configuration may ask for
// read_only, and asking for trusted does not widen a fork's tier.
func TestGitHubConfigurationCannotWiden(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("Codertocat/Hello-World", map[string]any{"trust_tier": "read_only"})
	s.trigger("KaTeX/KaTeX", map[string]any{"trust_tier": "trusted"})
	for file, want := range map[string]string{"same_repo.opened.json": "read_only", "fork.opened.json": "read_only"} {
		r := s.deliver(signed("narrow-"+file, payload(t, file)))
		if r.status != 201 || r.body["trust_tier"] != want {
			t.Errorf("%s = %d %s, want 201 %s", file, r.status, r.raw, want)
		}
	}
}

// TestGitHubDuplicateDelivery: GitHub's redelivery of the same delivery id
// creates nothing new and names the same run.
func TestGitHubDuplicateDelivery(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("KaTeX/KaTeX", nil)
	d := signed("72d3162e-cc78-11e3-81ab-4c9367dc0958", payload(t, "fork.opened.json"))
	first := s.deliver(d)
	if first.status != 201 {
		t.Fatalf("first delivery = %d %s, want 201", first.status, first.raw)
	}
	before := s.items()
	again := s.deliver(d)
	if again.status != 200 || again.body["session_id"] != first.body["session_id"] || again.body["trust_tier"] != "read_only" || again.body["duplicate"] != true {
		t.Errorf("redelivery = %d %s, want 200 with session_id %v, read_only, duplicate", again.status, again.raw, first.body["session_id"])
	}
	s.unchanged("a redelivery", before)

	// New commits on the same pull request are a new delivery: a new run.
	next := s.deliver(signed("8a4ab3e0-cc78-11e3-81ab-4c9367dc0958", payload(t, "fork.synchronize.json")))
	if next.status != 201 || next.body["session_id"] == first.body["session_id"] {
		t.Errorf("synchronize delivery = %d %s, want 201 with a new run", next.status, next.raw)
	}
	if n := s.runHeads(); n != 2 {
		t.Errorf("runs = %d, want 2", n)
	}
}

// TestGitHubClaimWithoutRun: a delivery claimed by an attempt that stopped
// before writing its run is completed by the retry, with the same run id.
func TestGitHubClaimWithoutRun(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("KaTeX/KaTeX", nil)
	const id = "crashed-delivery-1"
	runID := triggers.DeliveryRunID(payload(t, "fork.opened.json"))
	if err := s.st.ClaimDelivery(context.Background(), store.Delivery{ID: id, SessionID: runID, Repository: "KaTeX/KaTeX"}); err != nil {
		t.Fatal(err)
	}
	d := signed(id, payload(t, "fork.opened.json"))
	if r := s.deliver(d); r.status != 201 || r.body["session_id"] != runID {
		t.Fatalf("retry after a crash = %d %s, want 201 %s", r.status, r.raw, runID)
	}
	if r := s.deliver(d); r.status != 200 || r.body["session_id"] != runID {
		t.Fatalf("redelivery = %d %s, want 200 %s", r.status, r.raw, runID)
	}
	if n := s.runHeads(); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}

// TestGitHubConcurrentDuplicates: ten copies of one delivery at once make
// one run; every answer names it.
func TestGitHubConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("KaTeX/KaTeX", nil)
	d := signed("concurrent-delivery", payload(t, "fork.opened.json"))
	const n = 10
	results := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = s.deliver(d) })
	}
	wg.Wait()
	created := 0
	for i, r := range results {
		switch {
		case r.status == 201:
			created++
		case r.status != 200:
			t.Errorf("delivery %d = %d %s, want 201 or 200", i, r.status, r.raw)
		}
		if r.body["session_id"] != triggers.DeliveryRunID(d.body) {
			t.Errorf("delivery %d session_id = %v, want %s", i, r.body["session_id"], triggers.DeliveryRunID(d.body))
		}
	}
	if created != 1 {
		t.Errorf("%d deliveries answered 201, want exactly 1", created)
	}
	if got := s.runHeads(); got != 1 {
		t.Errorf("runs = %d, want 1", got)
	}
}

// TestGitHubRefusesUnsigned: every delivery whose signature does not
// verify is 401 and writes nothing.
func TestGitHubRefusesUnsigned(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("KaTeX/KaTeX", nil)
	fork := payload(t, "fork.opened.json")
	other := payload(t, "same_repo.opened.json")
	good := sign(webhookSecret, fork)
	before := s.items()
	cases := map[string]string{
		"missing":                     "",
		"empty hex":                   "sha256=",
		"not hex":                     "sha256=" + strings.Repeat("zz", 32),
		"short":                       good[:len(good)-2],
		"long":                        good + "00",
		"sha1 only":                   "sha1=" + strings.Repeat("0", 40),
		"upper-case prefix":           "SHA256=" + strings.TrimPrefix(good, "sha256="),
		"wrong secret":                sign("another-secret-0123456789", fork),
		"over a different body":       sign(webhookSecret, other),
		"over the body and more":      sign(webhookSecret, append(append([]byte{}, fork...), ' ')),
		"empty key":                   sign("", fork),
		"two headers' worth of value": good + ", " + good,
	}
	for name, sig := range cases {
		r := s.deliver(delivery{event: "pull_request", id: "unsigned-" + strings.ReplaceAll(name, " ", "-"), signature: sig, body: fork})
		if r.status != 401 || errorCode(r) != "unauthenticated" {
			t.Errorf("signature %s: delivery = %d %s, want 401 unauthenticated", name, r.status, r.raw)
		}
	}
	// A ping must be signed too.
	if r := s.deliver(delivery{event: "ping", id: "ping-1", body: []byte(`{"zen":"x"}`)}); r.status != 401 {
		t.Errorf("unsigned ping = %d, want 401", r.status)
	}
	s.unchanged("unsigned deliveries", before)
}

// TestGitHubWebhookUnconfigured: with no secret, nothing is accepted, not
// even a body signed with the empty key.
func TestGitHubWebhookUnconfigured(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, "")
	s.trigger("KaTeX/KaTeX", nil)
	fork := payload(t, "fork.opened.json")
	before := s.items()
	for _, secret := range []string{"", webhookSecret} {
		r := s.deliver(delivery{event: "pull_request", id: "unconfigured", signature: sign(secret, fork), body: fork})
		if r.status != 503 || errorCode(r) != "unavailable" {
			t.Errorf("delivery signed with %q to an unconfigured server = %d %s, want 503", secret, r.status, r.raw)
		}
	}
	s.unchanged("deliveries to an unconfigured server", before)
}

// TestGitHubDeliveriesThatStartNothing: verified deliveries that are not a
// pull_request opened/synchronize/reopened for a configured repository
// are answered and write nothing.
func TestGitHubDeliveriesThatStartNothing(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("KaTeX/KaTeX", nil)
	fork := payload(t, "fork.opened.json")
	closed := bytes.Replace(fork, []byte(`"action": "opened"`), []byte(`"action": "closed"`), 1)
	if bytes.Equal(closed, fork) {
		t.Fatal("fork.opened.json has no `\"action\": \"opened\"` to rewrite")
	}
	signedAs := func(event, id string, body []byte) delivery {
		return delivery{event: event, id: id, signature: sign(webhookSecret, body), body: body}
	}
	before := s.items()
	cases := []struct {
		name   string
		d      delivery
		status int
		want   string
	}{
		{"ping", signedAs("ping", "p-1", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)), 200, "pong"},
		{"issues event", signedAs("issues", "i-1", []byte(`{"action":"opened"}`)), 202, "ignored"},
		{"closed pull request", signedAs("pull_request", "c-1", closed), 202, "ignored"},
		{"unconfigured repository", signedAs("pull_request", "u-1", payload(t, "same_repo.opened.json")), 202, "ignored"},
		{"no event header", signedAs("", "e-1", fork), 400, "invalid_request"},
		{"no delivery id", signedAs("pull_request", "", fork), 400, "invalid_request"},
		{"delivery id with a slash", signedAs("pull_request", "a/b", fork), 400, "invalid_request"},
		{"form-encoded", delivery{event: "pull_request", id: "f-1", signature: sign(webhookSecret, []byte("payload=%7B%7D")), body: []byte("payload=%7B%7D"), contentType: "application/x-www-form-urlencoded"}, 400, "invalid_request"},
		{"not a pull request payload", signedAs("pull_request", "m-1", []byte(`{"action":"opened"}`)), 400, "invalid_request"},
		{"not JSON", signedAs("pull_request", "j-1", []byte(`{`)), 400, "invalid_request"},
	}
	for _, c := range cases {
		r := s.deliver(c.d)
		got := errorCode(r)
		if got == "" {
			got, _ = r.body["status"].(string)
		}
		if r.status != c.status || got != c.want {
			t.Errorf("%s: delivery = %d %s, want %d %s", c.name, r.status, r.raw, c.status, c.want)
		}
	}
	s.unchanged("deliveries that start nothing", before)
}

// TestGitHubDeliveryTooLarge: GitHub caps payloads at 25 MB, and so does
// the webhook; a body just over it is 413 and writes nothing, a body of
// several MiB (over the 1 MiB of every other route) is accepted.
func TestGitHubDeliveryTooLarge(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("KaTeX/KaTeX", nil)
	before := s.items()
	body := payload(t, "fork.opened.json")
	big := append(append([]byte{}, body...), bytes.Repeat([]byte(" "), 25<<20-len(body)+1)...)
	r := s.deliver(signed("big-1", big))
	if r.status != 413 || errorCode(r) != "too_large" {
		t.Errorf("25 MiB+ delivery = %d %s, want 413 too_large", r.status, r.raw)
	}
	s.unchanged("an oversize delivery", before)

	large := append(append([]byte{}, body...), bytes.Repeat([]byte(" "), 3<<20)...)
	if r := s.deliver(signed("large-1", large)); r.status != 201 {
		t.Errorf("3 MiB delivery = %d %s, want 201", r.status, r.raw)
	}
}

// TestGitHubReplayedBody: X-GitHub-Delivery is not signed, so an attacker
// holding one signed body can send it again under fresh delivery ids. A
// hundred replays, some at once, make one run, and every answer names it.
func TestGitHubReplayedBody(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("Codertocat/Hello-World", nil)
	body := payload(t, "same_repo.opened.json")
	first := s.deliver(signed("replay-0", body))
	if first.status != 201 {
		t.Fatalf("first delivery = %d %s, want 201", first.status, first.raw)
	}
	const n = 100
	results := make([]response, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = s.deliver(signed(fmt.Sprintf("replay-%d", i+1), body))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.status != 200 || r.body["session_id"] != first.body["session_id"] || r.body["duplicate"] != true {
			t.Errorf("replay %d = %d %s, want 200 naming %v, duplicate", i+1, r.status, r.raw, first.body["session_id"])
		}
	}
	if got := s.runHeads(); got != 1 {
		t.Errorf("runs after %d replays = %d, want 1", n, got)
	}
	// The same signed body with one byte changed is not signed.
	tampered := append(append([]byte{}, body...), ' ')
	d := signed("replay-tampered", body)
	d.body = tampered
	if r := s.deliver(d); r.status != 401 {
		t.Errorf("tampered replay = %d %s, want 401", r.status, r.raw)
	}
}

// TestGitHubOwnSecret: a trigger with its own webhook secret accepts
// deliveries signed with that secret only: the server's secret, and
// another trigger's secret, do not sign for it.
func TestGitHubOwnSecret(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	own := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "KaTeX/KaTeX", "policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "own_webhook_secret": true,
	})
	secret, _ := own["webhook_secret"].(string)
	if len(secret) != 64 || own["own_webhook_secret"] != true || strings.Contains(secret, webhookSecret) {
		t.Fatalf("trigger with own secret = %v, want own_webhook_secret and a 64-hex webhook_secret", own)
	}
	other := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "Codertocat/Hello-World", "policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "own_webhook_secret": true,
	})
	otherSecret, _ := other["webhook_secret"].(string)
	if otherSecret == secret || otherSecret == "" {
		t.Fatalf("two triggers' secrets: %q and %q, want two different secrets", secret, otherSecret)
	}
	got := s.must(200, "GET", "/v1/triggers/"+own["id"].(string), adminToken, nil)
	if _, ok := got["webhook_secret"]; ok || got["own_webhook_secret"] != true {
		t.Errorf("GET trigger = %v, want own_webhook_secret and no secret", got)
	}

	body := payload(t, "fork.opened.json")
	before := s.items()
	for name, key := range map[string]string{"server secret": webhookSecret, "another trigger's secret": otherSecret} {
		r := s.deliver(delivery{event: "pull_request", id: "own-" + strings.ReplaceAll(name, " ", "-"), signature: sign(key, body), body: body})
		if r.status != 401 {
			t.Errorf("delivery signed with the %s = %d %s, want 401", name, r.status, r.raw)
		}
	}
	s.unchanged("deliveries signed with the wrong secret", before)
	r := s.deliver(delivery{event: "pull_request", id: "own-right", signature: sign(secret, body), body: body})
	if r.status != 201 {
		t.Errorf("delivery signed with the trigger's secret = %d %s, want 201", r.status, r.raw)
	}
}

// TestGitHubTriggerShadow: a configuration's shadow policy is checked when
// it is made and frozen into every run it starts, as a hand-made run's is.
func TestGitHubTriggerShadow(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	shadow := s.policy(basicPolicy)
	r := s.do("POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "KaTeX/KaTeX", "policy_id": s.policy(basicPolicy), "shadow_policy_id": "pol_nope",
		"capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1},
	})
	if r.status != 400 || !strings.Contains(string(r.raw), `shadow_policy_id: no policy \"pol_nope\"`) {
		t.Fatalf("trigger with an unknown shadow = %d %s, want 400 naming shadow_policy_id", r.status, r.raw)
	}
	trg := s.trigger("KaTeX/KaTeX", map[string]any{"shadow_policy_id": shadow, "shadow_policy_version": 1})
	if got := s.must(200, "GET", "/v1/triggers/"+trg, adminToken, nil); got["shadow_policy_id"] != shadow || got["shadow_policy_version"] != float64(1) {
		t.Errorf("GET trigger = %v, want shadow %s version 1", got, shadow)
	}
	d := s.deliver(signed("d0a1b2c3-shadow", payload(t, "fork.opened.json")))
	if d.status != 201 {
		t.Fatalf("delivery = %d %s, want 201", d.status, d.raw)
	}
	got := s.must(200, "GET", "/v1/sessions/"+d.body["session_id"].(string), adminToken, nil)
	if got["shadow_policy_id"] != shadow || got["shadow_policy_version"] != float64(1) {
		t.Errorf("triggered run = shadow %v version %v, want %s version 1", got["shadow_policy_id"], got["shadow_policy_version"], shadow)
	}
}

// TestTriggerUpdateOwnSecret: an update shows the trigger's own webhook
// secret only when it turns own_webhook_secret on; an update of a trigger
// that had it already does not show it again.
func TestTriggerUpdateOwnSecret(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	config := func(own bool) map[string]any {
		return map[string]any{"repository": "octo-org/app", "policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"},
			"budget": map[string]any{"limit_usd": 1}, "own_webhook_secret": own}
	}
	created := s.must(201, "POST", "/v1/triggers", adminToken, config(false))
	if _, ok := created["webhook_secret"]; ok {
		t.Errorf("a trigger without its own secret was shown one: %v", created)
	}
	path := "/v1/triggers/" + created["id"].(string)
	on := s.must(200, "PUT", path, adminToken, config(true))
	if secret, _ := on["webhook_secret"].(string); len(secret) != 64 {
		t.Errorf("the update turning own_webhook_secret on = %v, want its 64-hex secret", on)
	}
	again := s.must(200, "PUT", path, adminToken, config(true))
	if _, ok := again["webhook_secret"]; ok || again["own_webhook_secret"] != true {
		t.Errorf("an update of a trigger that had its own secret = %v, want no secret shown", again)
	}
}
