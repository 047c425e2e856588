package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/truora/minidyn/server"

	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	if got := s.must(200, "GET", "/healthz", "", nil)["status"]; got != "ok" {
		t.Fatalf("GET /healthz status = %v, want ok", got)
	}
}

// TestBadInputWritesNothing: every malformed request gets the docs/api.md error
// and leaves the table exactly as it was.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	before := len(s.items())
	big := `{"name":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := []struct {
		name, method, path, body string
		status                   int
		code, mentions           string
	}{
		{"malformed JSON", "POST", "/v1/sessions", `{"policy_id":`, 400, "invalid_request", "malformed"},
		{"unknown field", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit_usd":1},"bogus":1}`, 400, "invalid_request", "bogus"},
		{"trailing data", "POST", "/v1/sessions", `{"policy_id":"` + pol + `"} {}`, 400, "invalid_request", "after"},
		{"oversize body", "POST", "/v1/policies", big, 413, "too_large", "1 MiB"},
		{"unknown policy", "POST", "/v1/sessions", `{"policy_id":"pol_nope","capabilities":["claude-code"],"budget":{"limit_usd":1}}`, 400, "invalid_request", "policy_id"},
		{"unknown policy version", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","policy_version":7,"capabilities":["claude-code"],"budget":{"limit_usd":1}}`, 400, "invalid_request", "policy_version"},
		{"unknown capability", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["nope"],"budget":{"limit_usd":1}}`, 400, "invalid_request", "capabilities[0]"},
		{"no budget", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"]}`, 400, "invalid_request", "budget.limit_usd"},
		{"negative budget", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit_usd":-1}}`, 400, "invalid_request", "budget.limit_usd"},
		{"bad trust tier", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit_usd":1},"trust_tier":"root"}`, 400, "invalid_request", `trust_tier: "root" is not one of trusted, read_only`},
		{"zero budget", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit_usd":0}}`, 400, "invalid_request", "budget.limit_usd: must be above 0"},
		{"budget below a micro-dollar", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit_usd":0.0000001}}`, 400, "invalid_request", "budget.limit_usd: must be above 0"},
		{"budget a number", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":5}`, 400, "invalid_request", "budget: must be an object, not a number"},
		{"budget unknown field", "POST", "/v1/sessions", `{"policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit":5}}`, 400, "invalid_request", "budget.limit: unknown field"},
		{"zero trigger budget", "POST", "/v1/triggers", `{"repository":"o/r","policy_id":"` + pol + `","capabilities":["claude-code"],"budget":{"limit_usd":0}}`, 400, "invalid_request", "budget.limit_usd: must be above 0"},
		{"ask verdict", "POST", "/v1/policies", `{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"Bash","verdict":"ask"}]}`, 400, "invalid_request", `rules[0].verdict: "ask" is not one of allow, deny, require_approval`},
		{"unknown verdict", "POST", "/v1/policies", `{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"Bash","verdict":"alow"}]}`, 400, "invalid_request", "rules[0].verdict"},
		{"unknown policy field", "POST", "/v1/policies", `{"name":"x","default_verdict":"deny","rulez":[]}`, 400, "invalid_request", "rulez"},
		{"bad YAML", "POST", "/v1/policies", "name: x\ndefault_verdict: [\n", 400, "invalid_request", ""},
		{"bad glob", "POST", "/v1/policies", `{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"mcp__[","verdict":"deny"}]}`, 400, "invalid_request", "rules[0].tool"},
		{"bad capability class", "POST", "/v1/capabilities", `{"name":"x","tools":[{"name":"t","class":"god","input_schema":{"type":"object"}}]}`, 400, "invalid_request", "tools[0].class"},
		{"remote $ref schema", "POST", "/v1/capabilities", `{"name":"x","tools":[{"name":"t","class":"read","input_schema":{"$ref":"http://example.com/s.json"}}]}`, 400, "invalid_request", "tools[0].input_schema"},
		{"unknown policy id", "PUT", "/v1/policies/pol_nope", basicPolicy, 404, "not_found", "pol_nope"},
		{"unknown session", "POST", "/v1/sessions/ses_nope/end", "", 404, "not_found", "ses_nope"},
	}
	for _, c := range cases {
		r := s.do(c.method, c.path, adminToken, c.body)
		e, _ := r.body["error"].(map[string]any)
		if r.status != c.status || e == nil || e["code"] != c.code {
			t.Errorf("%s: %s %s = %d %s, want %d %s", c.name, c.method, c.path, r.status, r.raw, c.status, c.code)
			continue
		}
		if msg, _ := e["message"].(string); !strings.Contains(msg, c.mentions) {
			t.Errorf("%s: message %q does not name %q", c.name, msg, c.mentions)
		}
	}
	if after := len(s.items()); after != before {
		t.Fatalf("items after bad requests = %d, want %d (nothing written)", after, before)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	body := map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	a, tokA := s.session(body)
	b, _ := s.session(body)
	cases := []struct {
		name, method, path, token string
		status                    int
	}{
		{"no token", "GET", "/v1/sessions/" + a, "", 401},
		{"wrong admin token", "GET", "/v1/policies/" + pol, "nope-nope-nope-nope", 401},
		{"own run", "GET", "/v1/sessions/" + a, tokA, 200},
		{"own events", "GET", "/v1/sessions/" + a + "/events", tokA, 200},
		// A run's token where it is not good is 403 with a hint, not 401.
		{"other run", "GET", "/v1/sessions/" + b, tokA, 403},
		{"session token on admin route", "GET", "/v1/policies/" + pol, tokA, 403},
		{"session token may not end its run", "POST", "/v1/sessions/" + a + "/end", tokA, 403},
		{"session token may not create runs", "POST", "/v1/sessions", tokA, 403},
		{"session token on another run's grants", "GET", "/v1/sessions/" + b + "/grants", tokA, 403},
		{"session token on the approvals inbox", "GET", "/v1/approvals", tokA, 403},
		{"a made-up session token", "GET", "/v1/policies/" + pol, "fbx_sess_made-up", 403},
		{"runner token on an admin route", "GET", "/v1/policies/" + pol, s.runner(a), 403},
		{"runner token on another run", "POST", "/v1/sessions/" + b + "/end", s.runner(a), 403},
	}
	for _, c := range cases {
		r := s.do(c.method, c.path, c.token, nil)
		if r.status != c.status {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, r.status, r.raw, c.status)
		}
		if c.status == 403 && !strings.Contains(string(r.raw), "token is good only on the routes of the run") && !strings.Contains(string(r.raw), "runner does") {
			t.Errorf("%s: 403 without a hint: %s", c.name, r.raw)
		}
		if strings.Contains(string(r.raw), tokA) {
			t.Errorf("%s: response echoes the session token", c.name)
		}
	}
}

func TestPolicyVersionsAreImmutable(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id := s.policy(basicPolicy)
	v2 := s.must(200, "PUT", "/v1/policies/"+id, adminToken, "name: v2\ndefault_verdict: deny\nrules: []\n")
	if v2["version"] != float64(2) {
		t.Fatalf("PUT version = %v, want 2", v2["version"])
	}
	if got := s.must(200, "GET", "/v1/policies/"+id, adminToken, nil); got["version"] != float64(2) || got["name"] != "v2" {
		t.Fatalf("GET latest = %v, want version 2 named v2", got)
	}
	if got := s.must(200, "GET", "/v1/policies/"+id+"/versions/1", adminToken, nil); got["name"] != "basic" {
		t.Fatalf("GET version 1 = %v, want the original", got)
	}
	s.must(404, "GET", "/v1/policies/"+id+"/versions/3", adminToken, nil)
}

// TestSessionFreezes: a run keeps the policy it was created with, all of
// claude-code's tools, and opens its ledger with session.created.
func TestSessionFreezes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	id, tok := s.session(map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 2.5}, "trust_tier": "read_only"})
	if !strings.HasPrefix(tok, "fbx_sess_") {
		t.Fatalf("token = %q, want fbx_sess_ prefix", tok)
	}
	s.must(200, "PUT", "/v1/policies/"+pol, adminToken, `{"name":"loose","default_verdict":"allow","rules":[]}`)
	got := s.must(200, "GET", "/v1/sessions/"+id, tok, nil)
	if got["policy_version"] != float64(1) || got["trust_tier"] != "read_only" || got["last_seq"] != float64(1) || got["token"] != nil {
		t.Fatalf("GET session = %v", got)
	}
	if tools := fmt.Sprint(got["tools"]); tools != "[Agent Bash Edit EnterWorktree ExitWorktree Glob Grep Monitor NotebookEdit Read Skill TaskStop ToolSearch WebFetch WebSearch Write]" {
		t.Fatalf("tools = %s", tools)
	}
	frozen, err := s.st.GetFrozen(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(frozen.Policy.Document, `"basic"`) || len(frozen.Tools) != 16 {
		t.Fatalf("frozen = %d tools, policy %s", len(frozen.Tools), frozen.Policy.Document)
	}
	for _, item := range s.items() {
		if strings.Contains(fmt.Sprint(item), tok) {
			t.Fatalf("the session token is stored in clear: %v", item["sk"])
		}
	}
	ev := s.must(200, "GET", "/v1/sessions/"+id+"/events", tok, nil)["events"].([]any)
	if len(ev) != 1 || ev[0].(map[string]any)["type"] != "session.created" {
		t.Fatalf("events = %v, want one session.created", ev)
	}
	s.must(200, "POST", "/v1/sessions/"+id+"/end", adminToken, nil)
	s.must(200, "POST", "/v1/sessions/"+id+"/end", adminToken, nil)
	if got := s.must(200, "GET", "/v1/sessions/"+id, tok, nil); got["status"] != "ended" || got["last_seq"] != float64(2) {
		t.Fatalf("after two ends: %v, want ended at seq 2", got)
	}
}

func TestLargeRunAndFailedCreation(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	var caps []string
	for b := range 3 {
		var tools []map[string]any
		for i := range 60 {
			tools = append(tools, map[string]any{"name": fmt.Sprintf("t%d_%02d", b, i), "class": "read", "input_schema": map[string]any{"type": "object"}})
		}
		name := fmt.Sprintf("bundle-%d", b)
		s.must(201, "POST", "/v1/capabilities", adminToken, map[string]any{"name": name, "tools": tools})
		caps = append(caps, name)
	}
	body := map[string]any{"policy_id": pol, "capabilities": caps, "budget": map[string]any{"limit_usd": 1}}
	id, _ := s.session(body)
	if got := s.must(200, "GET", "/v1/sessions/"+id, adminToken, nil)["tools"].([]any); len(got) != 180 {
		t.Fatalf("tools = %d, want 180", len(got))
	}

	before := len(s.items())
	s.db.Server.EmulateFailureForTable(s.st.Table(), server.FailureConditionInternalServerError)
	r := s.do("POST", "/v1/sessions", adminToken, body)
	s.db.Server.EmulateFailureForTable(s.st.Table(), server.FailureConditionNone)
	if r.status != 503 && r.status != 500 {
		t.Fatalf("create with DynamoDB failing = %d %s, want 5xx", r.status, r.raw)
	}
	if after := len(s.items()); after != before {
		t.Fatalf("items after failed creation = %d, want %d", after, before)
	}
}

// TestEventStreamResumes: SSE from Last-Event-ID delivers every later event
// exactly once, including events appended while the stream is open.
func TestEventStreamResumes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	id, tok := s.session(map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	appendN := func(n int, tag string) error {
		for i := range n {
			env, _ := redact.New(redact.ToolRequested{ToolCallID: fmt.Sprintf("%s-%d", tag, i), ToolName: "Bash"})
			if _, err := s.led.Append(context.Background(), id, func(store.Head) (store.Batch, error) {
				return store.Batch{Events: []redact.Envelope{env}}, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := appendN(9, "before"); err != nil { // seqs 2..10
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	appended := make(chan error, 1)
	go func() { appended <- appendN(10, "during") }() // seqs 11..20

	var ids []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(ids) < 16 {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, v)
		}
	}
	want := make([]string, 0, 16)
	for seq := 5; seq <= 20; seq++ {
		want = append(want, fmt.Sprint(seq))
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("streamed ids = %v, want %v", ids, want)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
}
