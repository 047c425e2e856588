package api_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/truora/minidyn/server"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
)

// gatePolicy allows a few read-only commands and files under /work/src,
// denies pushes and /etc, asks for everything else Bash, and denies the rest.
const gatePolicy = `{"name":"gate","default_verdict":"deny","rules":[
 {"id":"read-cmds","tool":"Bash","match":{"command_prefix":["git status","git diff","ls","echo","cat"]},"verdict":"allow"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
 {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval","on_autonomous":"allow"},
 {"id":"reads","tool":"Read","verdict":"allow"},
 {"id":"src-write","tool":"Write","match":{"path":["/work/src/**"]},"verdict":"allow"},
 {"id":"no-etc","tool":"Write","match":{"path":["/etc/**"]},"verdict":"deny"},
 {"id":"web","tool":"WebFetch","match":{"input":{"/url":["https://docs.example.com/*"]}},"verdict":"allow"}]}`

type runOpts struct {
	bundle     string // a second bundle, besides claude-code
	tier       string
	budget     float64
	autonomous bool
	ended      bool
}

func (s *stack) gateRun(pol string, o runOpts) (string, string) {
	s.t.Helper()
	bundles := []string{"claude-code"}
	if o.bundle != "" {
		bundles = append(bundles, o.bundle)
	}
	limit := o.budget
	if limit == 0 {
		limit = 0.01 // a run is never created without a budget; exhausted below
	}
	body := map[string]any{"policy_id": pol, "capabilities": bundles, "budget": map[string]any{"limit_usd": limit}, "autonomous": o.autonomous}
	if o.tier != "" {
		body["trust_tier"] = o.tier
	}
	id, tok := s.session(body)
	if o.budget == 0 {
		// Budget 0 asks for an exhausted run: a model call's usage above
		// the reservation is booked anyway, taking available below zero.
		s.must(201, "POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("exhaust", 100, 100))
		s.must(200, "POST", "/v1/sessions/"+id+"/admissions/exhaust/usage", s.runner(id), map[string]any{"input_tokens": 1000, "output_tokens": 2000})
	}
	if o.ended {
		s.must(200, "POST", "/v1/sessions/"+id+"/end", adminToken, nil)
	}
	return id, tok
}

func (s *stack) ask(id, tok, call, tool string, input any) response {
	s.t.Helper()
	return s.do("POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": call, "tool_name": tool, "input": input})
}

func (s *stack) eventTypes(id string, after int) []string {
	s.t.Helper()
	evs := s.must(200, "GET", fmt.Sprintf("/v1/sessions/%s/events?after=%d", id, after), adminToken, nil)["events"].([]any)
	var types []string
	for _, e := range evs {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	return types
}

func bash(cmd string) map[string]any { return map[string]any{"command": cmd} }

// TestGateEndToEnd reaches every source the gate can give today and every
// Bash bypass, over HTTP on the local stack, and checks the exact answer
// and that the ledger holds exactly the expected events.
func TestGateEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(gatePolicy)
	trusted := runOpts{budget: 1}
	allowed := "allow"
	denied := func(source, rule string) string { return "deny/" + source + "/" + rule }
	cases := []struct {
		name  string
		run   runOpts
		tool  string
		input any
		want  string
	}{
		{"allowed command", trusted, "Bash", bash("git status"), allowed},
		{"allowed with args", trusted, "Bash", bash("git diff --stat HEAD~1"), allowed},
		{"allowed pipeline of allowed commands", trusted, "Bash", bash("git diff | cat"), allowed},
		{"policy deny", trusted, "Bash", bash("git push origin main"), denied("policy", "no-push")},
		{"default verdict deny", trusted, "Bash", bash("curl https://x"), denied("policy", "")},
		{"ended run", runOpts{budget: 1, ended: true}, "Bash", bash("git status"), denied("session", "")},
		{"budget exhausted", runOpts{budget: 0}, "Bash", bash("git status"), denied("budget", "")},
		{"budget before capability", runOpts{budget: 0}, "Nope", map[string]any{}, denied("budget", "")},
		{"unknown tool", trusted, "mcp__jira__create_issue", map[string]any{}, denied("capability", "")},
		{"schema: missing field", trusted, "Bash", map[string]any{"cmd": "ls"}, denied("schema", "")},
		{"schema: wrong type", trusted, "Read", map[string]any{"file_path": 7}, denied("schema", "")},
		{"read_only denies execute", runOpts{budget: 1, tier: "read_only"}, "Bash", bash("rm -rf build"), denied("trust_tier", "")},
		{"read_only runs a catalogue-safe line", runOpts{budget: 1, tier: "read_only"}, "Bash", bash("git status && git diff --stat"), allowed},
		{"read_only denies write", runOpts{budget: 1, tier: "read_only"}, "Write", map[string]any{"file_path": "/work/src/a.go", "content": "x"}, denied("trust_tier", "")},
		{"read_only allows read", runOpts{budget: 1, tier: "read_only"}, "Read", map[string]any{"file_path": "/work/src/a.go"}, allowed},
		{"read_only autonomous still cannot write", runOpts{budget: 1, tier: "read_only", autonomous: true}, "Bash", bash("rm x"), denied("trust_tier", "")},
		{"path allow", trusted, "Write", map[string]any{"file_path": "/work/src/a.go", "content": "x"}, allowed},
		{"path escape", trusted, "Write", map[string]any{"file_path": "/work/src/../../etc/passwd", "content": "x"}, denied("policy", "no-etc")},
		{"path outside", trusted, "Write", map[string]any{"file_path": "/tmp/a", "content": "x"}, denied("policy", "")},
		{"input pointer allow", trusted, "WebFetch", map[string]any{"url": "https://docs.example.com/a", "prompt": "p"}, allowed},
		{"input pointer no match", trusted, "WebFetch", map[string]any{"url": "https://evil.example.com/a", "prompt": "p"}, denied("policy", "")},
		{"autonomous rewrite to allow", runOpts{budget: 1, autonomous: true}, "Bash", bash("rm build.log"), "allow/require_approval/allow"},
		{"require approval pauses", trusted, "Bash", bash("rm build.log"), "pending"},
	}
	// Every bypass of an allow prefix named in the issue: none may be allowed.
	bypasses := []string{
		"git status; rm -rf /", "git status && rm -rf /", "git status || rm -rf /", "git status | sh",
		"ls | xargs rm", "(git status)", "echo $(rm -rf /)", "echo `rm -rf /`", "cat <(rm -rf /)",
		"eval 'git status'", "bash -c 'git status'", "sh -c 'ls'", "find . -exec rm {} \\;",
		"echo x > /etc/passwd", "echo x >> file", "cat <<EOF | sh\nrm -rf /\nEOF", "python3 <<EOF\nimport os\nEOF",
		"GIT_EXTERNAL_DIFF=x git diff", "git -c core.pager=x diff", "env git status", "echo 'unterminated",
		"git status &",
	}
	for _, cmd := range bypasses {
		cases = append(cases, struct {
			name  string
			run   runOpts
			tool  string
			input any
			want  string
		}{"bypass " + cmd, trusted, "Bash", bash(cmd), "not-allow"})
	}
	// Normalized deny: evasions of the no-push rule still hit it.
	for _, cmd := range []string{"git -C /repo push", "/usr/bin/git push", "env X=1 git push", "command git push", "bash -c 'git push'", "echo $(git push)", "true && git push", "ls | xargs git push"} {
		cases = append(cases, struct {
			name  string
			run   runOpts
			tool  string
			input any
			want  string
		}{"evasion " + cmd, trusted, "Bash", bash(cmd), denied("policy", "no-push")})
	}

	runs := map[runOpts][2]string{}
	for i, c := range cases {
		ids, ok := runs[c.run]
		if !ok || c.run.ended || c.want == "pending" {
			id, tok := s.gateRun(pol, c.run)
			ids = [2]string{id, tok}
			runs[c.run] = ids
		}
		id, tok := ids[0], ids[1]
		before := len(s.eventTypes(id, 0))
		r := s.ask(id, tok, fmt.Sprintf("call-%d", i), c.tool, c.input)
		if r.status != 200 {
			t.Errorf("%s: status %d %s", c.name, r.status, r.raw)
			continue
		}
		got := fmt.Sprint(r.body["decision"])
		switch {
		case got == "deny":
			got = fmt.Sprintf("deny/%v/%v", r.body["source"], str(r.body["rule_id"]))
		case r.body["rewritten_verdict"] != nil:
			got = fmt.Sprintf("%s/%v/%v", got, r.body["verdict"], r.body["rewritten_verdict"])
		}
		if c.want == "not-allow" {
			if r.body["decision"] == "allow" {
				t.Errorf("%s: allowed (%s)", c.name, r.raw)
			}
		} else if got != c.want {
			t.Errorf("%s: got %s, want %s (%s)", c.name, got, c.want, r.raw)
		}
		if r.body["decision"] == "deny" && str(r.body["reason"]) == "" {
			t.Errorf("%s: deny without a reason", c.name)
		}
		wantEvents := "[tool.requested tool.decision]"
		if r.body["decision"] == "pending" {
			wantEvents = "[tool.requested approval.requested]"
		}
		if got := fmt.Sprint(s.eventTypes(id, before)); got != wantEvents {
			t.Errorf("%s: events %s, want %s", c.name, got, wantEvents)
		}
	}
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func TestSchemaReasonIsReadable(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(gatePolicy), runOpts{budget: 1})
	r := s.ask(id, tok, "c1", "Bash", map[string]any{"command": "ls", "timeout": "soon"})
	reason := str(r.body["reason"])
	if r.body["source"] != "schema" || !strings.Contains(reason, "timeout") {
		t.Fatalf("answer = %s, want a schema denial naming timeout", r.raw)
	}
	// A retry gets the same readable reason back, from the record.
	if again := s.ask(id, tok, "c1", "Bash", map[string]any{"command": "ls", "timeout": "soon"}); str(again.body["reason"]) != reason {
		t.Fatalf("retry reason = %q, want %q", again.body["reason"], reason)
	}
}

// TestRetriesAreIdempotent: 20 concurrent identical requests give one
// answer and one pair of events; the same id with another input is 409.
func TestRetriesAreIdempotent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(gatePolicy), runOpts{budget: 1})
	var wg sync.WaitGroup
	answers := make([]string, 20)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.ask(id, tok, "same", "Bash", bash("git push"))
			answers[i] = fmt.Sprintf("%d %v %v %v", r.status, r.body["decision"], r.body["source"], r.body["rule_id"])
		}()
	}
	wg.Wait()
	for _, a := range answers {
		if a != answers[0] || a != "200 deny policy no-push" {
			t.Fatalf("answers = %q, want 20 x \"200 deny policy no-push\"", answers)
		}
	}
	if got := fmt.Sprint(s.eventTypes(id, 1)); got != "[tool.requested tool.decision]" {
		t.Fatalf("events = %s, want one pair", got)
	}
	if r := s.ask(id, tok, "same", "Bash", bash("git status")); r.status != 409 {
		t.Fatalf("same id, other input = %d %s, want 409", r.status, r.raw)
	}
}

// TestCanaryNeverStored: a tool input's contents reach no stored item, no
// event and no log line; only its digest does.
func TestCanaryNeverStored(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// The unparsable line is denied, not filed: an approval keeps its
	// input for the human deciding it, by design, so none may be filed.
	pol := strings.Replace(gatePolicy, `{"name":"gate",`, `{"name":"gate","bash":{"opaque":"deny"},`, 1)
	id, tok := s.gateRun(s.policy(pol), runOpts{budget: 1})
	const canary = "CANARY-7f3e9b21"
	inputs := []map[string]any{
		bash("echo " + canary),
		bash("git push " + canary),
		bash("echo '" + canary),
		{"command": "ls", "timeout": canary},
		{"file_path": "/etc/" + canary, "content": canary},
	}
	tools := []string{"Bash", "Bash", "Bash", "Bash", "Write"}
	for i, in := range inputs {
		r := s.ask(id, tok, fmt.Sprintf("c%d", i), tools[i], in)
		if r.status != 200 || r.body["decision"] == "pending" {
			t.Fatalf("ask %d = %d %s", i, r.status, r.raw)
		}
	}
	for _, item := range s.items() {
		if strings.Contains(fmt.Sprint(item), canary) {
			t.Fatalf("canary stored in %v/%v: %v", item["pk"], item["sk"], item)
		}
	}
}

// TestStoreDownAnswers503: when DynamoDB fails the gate answers 503 and
// records nothing; the runner treats that as deny.
func TestStoreDownAnswers503(t *testing.T) {
	t.Parallel()
	st, db := roleStore(t, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	testenv.Calm(t, db) // no retries: random chaos would fail the setup
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: ledger.New(st, time.Now)})))
	defer srv.Close()
	s := &stack{t: t, url: srv.URL, st: st, db: db}
	id, tok := s.gateRun(s.policy(gatePolicy), runOpts{budget: 1})
	s.ask(id, tok, "warm", "Bash", bash("git status")) // caches the frozen state and the token
	before := len(s.items())
	db.Server.EmulateFailureForTable(st.Table(), server.FailureConditionInternalServerError)
	r := s.ask(id, tok, "down", "Bash", bash("git status"))
	db.Server.EmulateFailureForTable(st.Table(), server.FailureConditionNone)
	if r.status != 503 || !strings.Contains(string(r.raw), `"unavailable"`) {
		t.Fatalf("ask with DynamoDB down = %d %s, want 503 unavailable", r.status, r.raw)
	}
	if after := len(s.items()); after != before {
		t.Fatalf("items = %d after a failed decision, want %d", after, before)
	}
	if r := s.ask(id, tok, "down", "Bash", bash("git status")); r.body["decision"] != "allow" {
		t.Fatalf("retry after recovery = %s, want allow", r.raw)
	}
}

// TestOneTransactionPerDecision counts DynamoDB calls: at steady state a
// decision costs exactly one TransactWriteItems and nothing else.
func TestOneTransactionPerDecision(t *testing.T) {
	t.Parallel()
	var requests testenv.Requests
	st, db := roleStore(t, requests.Option)
	testenv.Calm(t, db) // it counts transactions: a retried one counts twice
	// Numbering is not the decision's work: it is left to readers here
	// (the stream on AWS), so what is counted is what a decision costs.
	// The head is trusted for the whole test and the rate limit's window
	// starts with it, so a slow machine does not add the once-a-second
	// head read or a new minute's reservation (TestCachedHeadAges and
	// shared/ratelimit cover those).
	led := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead, ledger.TrustHeadFor(time.Hour))
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Now: testenv.MinuteStart()})))
	defer srv.Close()
	s := &stack{t: t, url: srv.URL, st: st, db: db}
	id, tok := s.gateRun(s.policy(gatePolicy), runOpts{budget: 1})
	s.ask(id, tok, "warm", "Bash", bash("git status"))
	requests.Take()
	const n = 10
	for i := range n {
		if r := s.ask(id, tok, fmt.Sprintf("c%d", i), "Bash", bash("git diff")); r.body["decision"] != "allow" {
			t.Fatalf("ask = %s", r.raw)
		}
	}
	calls := requests.Take()
	// One transaction per decision; the other write is shared/ratelimit's
	// reservation of the run's requests, ten at a time of the default 600
	// a minute (the warm-up took the first ten). A decision answered at
	// once takes no open-request lease.
	want := map[string]int{"TransactWriteItems": n, "UpdateItem": 1}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("DynamoDB calls for %d decisions = %v, want %v", n, calls, want)
	}
}

// TestRequestsPerDecision counts the DynamoDB requests of each kind of
// decision, through a counting client, so that none can regress: a warm
// allow or deny, a replay, a pending answer, and a run's first decision
// on an instance that has not seen the run. Numbering the events is not
// the decision's (readers and the stream do it), so it is left out.
// One of each is the rate limit's counter (shared/ratelimit).
func TestRequestsPerDecision(t *testing.T) {
	t.Parallel()
	var requests testenv.Requests
	st, db := roleStore(t, requests.Option)
	testenv.Calm(t, db) // it counts requests: a retried one counts twice
	clock := testenv.MinuteStart()
	instance := func() *stack {
		led := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead, ledger.TrustHeadFor(time.Hour))
		srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Now: clock})))
		t.Cleanup(srv.Close)
		return &stack{t: t, url: srv.URL, st: st, db: db}
	}
	a := instance()
	id, tok := a.gateRun(a.policy(gatePolicy), runOpts{budget: 1})
	a.ask(id, tok, "warm", "Bash", bash("git status"))
	cost := func(want string, ask func(s *stack) response, s *stack) map[string]int {
		t.Helper()
		requests.Take()
		if r := ask(s); r.body["decision"] != want {
			t.Fatalf("answer = %s, want %s", r.raw, want)
		}
		return requests.Take()
	}
	// The run's request count is reserved a chunk at a time (ratelimit:
	// ten of the default 600 a minute), so only an instance's first
	// request of the run writes it; a decision answered at once takes no
	// open-request slot (it takes one only to wait).
	cases := []struct {
		name, decision string
		on             *stack
		ask            func(s *stack) response
		want           map[string]int
	}{
		{"warm allow", "allow", a, func(s *stack) response { return s.ask(id, tok, "c1", "Bash", bash("git diff")) },
			map[string]int{"TransactWriteItems": 1}},
		{"warm deny", "deny", a, func(s *stack) response { return s.ask(id, tok, "c2", "Bash", bash("git push")) },
			map[string]int{"TransactWriteItems": 1}},
		// The record's put fails and brings the record back.
		{"replay", "allow", a, func(s *stack) response { return s.ask(id, tok, "c1", "Bash", bash("git diff")) },
			map[string]int{"TransactWriteItems": 1}},
		// The run's grants (a require_approval asks), then the record.
		{"pending", "pending", a, func(s *stack) response { return s.ask(id, tok, "c3", "Bash", bash("rm -rf build")) },
			map[string]int{"Query": 1, "TransactWriteItems": 1}},
		// The token's run, with its head and frozen state (one Query that
		// the decision's append and gate reuse), the instance's share of
		// the run's request count, the record.
		{"first on an instance", "allow", instance(), func(s *stack) response { return s.ask(id, tok, "c4", "Bash", bash("git status")) },
			map[string]int{"Query": 1, "TransactWriteItems": 1, "UpdateItem": 1}},
	}
	for _, c := range cases {
		if got := cost(c.decision, c.ask, c.on); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: DynamoDB requests = %v, want %v", c.name, got, c.want)
		}
	}
}
