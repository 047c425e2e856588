package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// A triggered run is driven by whoever holds its tokens, which exist only
// once issued: by the operator or by the trigger's runner key, once.
func TestTriggeredRunTokens(t *testing.T) {
	s := newWebhookStack(t, webhookSecret)
	created := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "Codertocat/Hello-World", "policy_id": s.policy(basicPolicy),
		"capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 2.5},
	})
	key, _ := created["runner_key"].(string)
	if !strings.HasPrefix(key, "fbx_trg_") {
		t.Fatalf("trigger creation = %v, want a runner_key", created)
	}
	if got := s.must(200, "GET", "/v1/triggers/"+created["id"].(string), adminToken, nil); got["runner_key"] != nil {
		t.Errorf("GET shows the runner key: %v", got)
	}
	r := s.deliver(signed("d-1", payload(t, "same_repo.opened.json")))
	if r.status != 201 {
		t.Fatalf("delivery = %d %s", r.status, r.raw)
	}
	run := r.body["session_id"].(string)
	if got := s.must(200, "GET", "/v1/sessions/"+run, adminToken, nil); got["token_pending"] != true {
		t.Errorf("a triggered run before its tokens = %v, want token_pending", got)
	}

	keyRefused(t, s, run, key)
	tok, runner := issueOnce(t, s, run, key)
	driveIssued(t, s, run, tok, runner, key)

	// A deleted trigger's key stops working.
	r = s.deliver(signed("d-2", []byte(strings.Replace(string(payload(t, "same_repo.opened.json")), `"opened"`, `"reopened"`, 1))))
	if r.status != 201 {
		t.Fatalf("second delivery = %d %s", r.status, r.raw)
	}
	second := r.body["session_id"].(string)
	s.must(200, "DELETE", "/v1/triggers/"+created["id"].(string), adminToken, nil)
	if r := s.do("POST", "/v1/sessions/"+second+"/token", key, nil); r.status != 401 {
		t.Errorf("a deleted trigger's key = %d, want 401", r.status)
	}
	s.must(200, "POST", "/v1/sessions/"+second+"/token", adminToken, nil)
}

// keyRefused: the key is good for nothing but issuing this trigger's
// runs' tokens; a manual run has none to issue.
func keyRefused(t *testing.T, s *stack, run, key string) {
	t.Helper()
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sessions/" + run},
		{"POST", "/v1/sessions/" + run + "/permission"},
		{"GET", "/v1/triggers"},
	} {
		if r := s.do(c.method, c.path, key, map[string]any{}); r.status != 401 {
			t.Errorf("runner key on %s %s = %d, want 401", c.method, c.path, r.status)
		}
	}
	manual, manualToken := s.session(map[string]any{"policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	if r := s.do("POST", "/v1/sessions/"+manual+"/token", key, nil); r.status != 401 {
		t.Errorf("runner key on another trigger's (a manual) run = %d, want 401", r.status)
	}
	if r := s.do("POST", "/v1/sessions/"+manual+"/token", adminToken, nil); r.status != 409 {
		t.Errorf("tokens of a manual run = %d %s, want 409", r.status, r.raw)
	}
	if r := s.do("POST", "/v1/sessions/"+run+"/token", manualToken, nil); r.status != 403 && r.status != 401 {
		t.Errorf("another run's session token = %d, want refused", r.status)
	}
}

// issueOnce: many callers at once (the runner key and the operator): exactly
// one gets tokens, which it returns.
func issueOnce(t *testing.T, s *stack, run, key string) (tok, runner string) {
	t.Helper()
	const callers = 24
	var mu sync.Mutex
	var won []map[string]any
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bearer := key
			if i%2 == 0 {
				bearer = adminToken
			}
			r := s.do("POST", "/v1/sessions/"+run+"/token", bearer, nil)
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			if r.status == 200 {
				won = append(won, r.body)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 || codes[409] != callers-1 {
		t.Fatalf("concurrent issues: %v, want one 200 and %d 409", codes, callers-1)
	}
	return won[0]["token"].(string), won[0]["runner_token"].(string)
}

// driveIssued: the tokens drive the run: the hook's token asks the gate,
// the runner's ends the run; the ledger names who issued them and holds
// no token.
func driveIssued(t *testing.T, s *stack, run, tok, runner, key string) {
	t.Helper()
	ask := s.must(200, "POST", "/v1/sessions/"+run+"/permission", tok, map[string]any{"tool_call_id": "t1", "tool_name": "Bash", "input": map[string]any{"command": "git status"}})
	if ask["decision"] != "allow" {
		t.Errorf("permission with the issued token = %v", ask)
	}
	events := s.must(200, "GET", "/v1/sessions/"+run+"/events", tok, nil)
	var issued map[string]any
	for _, e := range events["events"].([]any) {
		ev := e.(map[string]any)
		if ev["type"] == "session.token_issued" {
			issued = ev["data"].(map[string]any)
		}
	}
	if issued == nil || (issued["by"] != "trigger" && issued["by"] != "admin") {
		t.Errorf("ledger = %v, want session.token_issued naming who", events)
	}
	if raw := fmt.Sprint(events); strings.Contains(raw, tok) || strings.Contains(raw, runner) || strings.Contains(raw, key) {
		t.Error("a token reached the ledger")
	}
	s.must(200, "POST", "/v1/sessions/"+run+"/end", runner, nil)
	if r := s.do("POST", "/v1/sessions/"+run+"/token", adminToken, nil); r.status != 409 {
		t.Errorf("tokens of an ended run = %d, want 409", r.status)
	}
}

func TestListSessionsAndPolicies(t *testing.T) {
	s := newWebhookStack(t, webhookSecret)
	pol := s.policy(basicPolicy)
	body := map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	var manual []string
	for range 5 {
		id, _ := s.session(body)
		manual = append([]string{id}, manual...)
	}
	s.must(200, "POST", "/v1/sessions/"+manual[0]+"/end", adminToken, nil)
	s.trigger("Codertocat/Hello-World", nil)
	gh := s.deliver(signed("d-1", payload(t, "same_repo.opened.json"))).body["session_id"]

	list := func(query string) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for range 20 {
			q := query + "&limit=2"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			page := s.must(200, "GET", "/v1/sessions?"+q, adminToken, nil)
			for _, r := range page["sessions"].([]any) {
				ids = append(ids, r.(map[string]any)["id"].(string))
			}
			next, _ := page["next_cursor"].(string)
			if next == "" {
				return ids
			}
			cursor = next
		}
		t.Fatalf("listing %q does not end", query)
		return nil
	}
	if got := list("trigger=github"); len(got) != 1 || got[0] != gh {
		t.Errorf("trigger=github = %v, want [%v]", got, gh)
	}
	if got := list("repository=codertocat/hello-world"); len(got) != 1 || got[0] != gh {
		t.Errorf("repository = %v, want [%v]", got, gh)
	}
	if got := list("trigger=manual"); strings.Join(got, ",") != strings.Join(manual, ",") {
		t.Errorf("trigger=manual = %v, want %v", got, manual)
	}
	if got := list("status=ended"); len(got) != 1 || got[0] != manual[0] {
		t.Errorf("status=ended = %v, want [%s]", got, manual[0])
	}
	if got := list("created_after=2999-01-01T00:00:00Z"); len(got) != 0 {
		t.Errorf("created in the future = %v", got)
	}
	for _, q := range []string{"status=ask", "limit=0", "limit=101", "cursor=abc", "created_after=yesterday", "repository=x", "trigger=GitHub!"} {
		if r := s.do("GET", "/v1/sessions?"+q, adminToken, nil); r.status != 400 {
			t.Errorf("GET /v1/sessions?%s = %d, want 400", q, r.status)
		}
	}
	_, tok := s.session(body)
	if r := s.do("GET", "/v1/sessions", tok, nil); r.status != 403 && r.status != 401 {
		t.Errorf("a session token listing runs = %d, want refused", r.status)
	}

	s.must(200, "PUT", "/v1/policies/"+pol, adminToken, strings.Replace(basicPolicy, `"basic"`, `"basic-2"`, 1))
	// Two policies (the trigger made its own), newest first, each at its
	// latest version.
	first := s.must(200, "GET", "/v1/policies?limit=1", adminToken, nil)
	second := s.must(200, "GET", "/v1/policies?limit=1&cursor="+first["next_cursor"].(string), adminToken, nil)
	if p := second["policies"].([]any)[0].(map[string]any); p["id"] != pol || p["version"] != 2.0 || p["name"] != "basic-2" {
		t.Errorf("second page of policies = %v", second)
	}
}

func TestUpdateAndDeleteTriggers(t *testing.T) {
	s := newWebhookStack(t, webhookSecret)
	id := s.trigger("Codertocat/Hello-World", nil)
	pol2 := s.policy(strings.Replace(basicPolicy, `"basic"`, `"other"`, 1))
	body := map[string]any{"repository": "Codertocat/Hello-World", "policy_id": pol2, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}, "trust_tier": "read_only"}
	up := s.must(200, "PUT", "/v1/triggers/"+id, adminToken, body)
	if up["policy_id"] != pol2 || up["revision"] != 1.0 || up["runner_key"] != nil {
		t.Errorf("update = %v", up)
	}
	r := s.deliver(signed("d-1", payload(t, "same_repo.opened.json")))
	if r.status != 201 || r.body["trust_tier"] != "read_only" {
		t.Errorf("delivery after update = %d %s, want a read_only run", r.status, r.raw)
	}
	body["rotate_runner_key"] = true
	if k, _ := s.must(200, "PUT", "/v1/triggers/"+id, adminToken, body)["runner_key"].(string); !strings.HasPrefix(k, "fbx_trg_") {
		t.Errorf("rotation gave no key")
	}
	body["repository"] = "octo/else"
	if r := s.do("PUT", "/v1/triggers/"+id, adminToken, body); r.status != 400 {
		t.Errorf("moving the repository = %d, want 400", r.status)
	}
	body["repository"], body["policy_id"] = "Codertocat/Hello-World", "pol_missing"
	if r := s.do("PUT", "/v1/triggers/"+id, adminToken, body); r.status != 400 {
		t.Errorf("an unknown policy = %d, want 400", r.status)
	}
	if r := s.do("PUT", "/v1/triggers/trg_missing", adminToken, body); r.status != 404 {
		t.Errorf("update of a missing trigger = %d, want 404", r.status)
	}
	s.must(200, "DELETE", "/v1/triggers/"+id, adminToken, nil)
	if r := s.do("DELETE", "/v1/triggers/"+id, adminToken, nil); r.status != 404 {
		t.Errorf("delete twice = %d, want 404", r.status)
	}
	if r := s.deliver(signed("d-2", payload(t, "fork.opened.json"))); r.status != 202 {
		t.Errorf("delivery after delete = %d %s, want 202", r.status, r.raw)
	}
	if got := s.must(200, "GET", "/v1/triggers", adminToken, nil)["triggers"].([]any); len(got) != 0 {
		t.Errorf("triggers after delete = %v", got)
	}
}
