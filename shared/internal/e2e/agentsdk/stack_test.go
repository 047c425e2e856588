//go:build e2e

package agentsdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Pinned versions. package-lock.json in clients/agent-sdk installs the SDK;
// its claudeCodeVersion must be the CLI the claude-code bundle was checked
// against (the Makefile's CLAUDE_CODE_VERSION).
const (
	pinnedSDK        = "0.3.332"
	pinnedClaudeCode = "2.1.332"
)

const (
	adminToken  = "e2e-agentsdk-admin-token-0123456789"
	operatorKey = "sk-ant-operator-e2e-0123456789"
	// runTimeout bounds one query() of the driver; decisionMs is the
	// adapter's deadline for a decision, well inside it.
	runTimeout = 90 * time.Second
	decisionMs = 60_000
)

// sdkDir is clients/agent-sdk, built, with its node_modules (TestMain).
var sdkDir string

func TestMain(m *testing.M) {
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	sdkDir = os.Getenv("FLUIDBOX_AGENT_SDK_DIR")
	if sdkDir == "" {
		fmt.Fprintln(os.Stderr, "e2e agent sdk: FLUIDBOX_AGENT_SDK_DIR is not set; run `make e2e-agent-sdk`, which builds clients/agent-sdk and sets it")
		return 1
	}
	var pkg struct {
		Version           string `json:"version"`
		ClaudeCodeVersion string `json:"claudeCodeVersion"`
	}
	b, err := os.ReadFile(filepath.Join(sdkDir, "node_modules/@anthropic-ai/claude-agent-sdk/package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil || pkg.Version != pinnedSDK || pkg.ClaudeCodeVersion != pinnedClaudeCode {
		fmt.Fprintf(os.Stderr, "e2e agent sdk: %s has @anthropic-ai/claude-agent-sdk %q (Claude Code %q), %v; want %s (Claude Code %s): run npm ci there\n", sdkDir, pkg.Version, pkg.ClaudeCodeVersion, err, pinnedSDK, pinnedClaudeCode)
		return 1
	}
	if _, err := os.Stat(filepath.Join(sdkDir, "dist/index.js")); err != nil {
		fmt.Fprintf(os.Stderr, "e2e agent sdk: %s is not built (npm run build): %v\n", sdkDir, err)
		return 1
	}
	return m.Run()
}

var tables atomic.Int64

// counter counts the API requests of one stack by kind.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+adminToken {
			kind := r.Method + " " + kindOf(r.URL.Path)
			c.mu.Lock()
			c.n[kind]++
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func kindOf(path string) string {
	switch {
	case strings.HasSuffix(path, "/permission"):
		return "permission"
	case strings.HasSuffix(path, "/tools/call"):
		return "tools/call"
	case strings.Contains(path, "/model"):
		return "model"
	case strings.HasPrefix(path, "/v1/sessions/"):
		return "session"
	}
	return path
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *counter) String() string {
	m := c.snapshot()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// stack is the real control plane on 127.0.0.1 with a scripted model as its
// upstream, on two listeners as on AWS: api is what the adapter talks to,
// proxy is the model proxy (ANTHROPIC_BASE_URL), so a test can take the
// API down mid-run while the model keeps answering. Requests of the run
// (not the admin's) are counted.
type stack struct {
	api, proxy *httptest.Server
	admin      *client.Client
	model      *scriptedmodel.Server
	requests   *counter
}

type run struct{ id, token string }

func newStack(t *testing.T, script ...scriptedmodel.Step) *stack {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start minidyn: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st := store.New(devstack.DynamoClient(db.URL), fmt.Sprintf("e2eagentsdk%d", tables.Add(1)))
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatalf("create table: %v", err)
	}
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal", "dev-seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	led := ledger.New(st, time.Now)
	timers := approval.NewTimers(approval.NewService(led, time.Now), nil)
	t.Cleanup(timers.Stop)
	h := api.New(api.Config{AdminToken: adminToken, Ledger: led, Scheduler: timers, Sealer: sealer})
	s := &stack{requests: &counter{n: map[string]int{}}}
	s.api = httptest.NewServer(s.requests.wrap(h))
	s.proxy = httptest.NewServer(s.requests.wrap(h))
	t.Cleanup(s.api.Close)
	t.Cleanup(s.proxy.Close)
	if s.admin, err = client.New(s.api.URL, adminToken); err != nil {
		t.Fatal(err)
	}
	s.model = scriptedmodel.New(script...)
	t.Cleanup(s.model.Close)
	s.model.RequireAPIKey(operatorKey)
	up := map[string]any{"url": s.model.URL(), "credential": map[string]string{"type": "header", "name": "x-api-key", "value": operatorKey}}
	if err := s.admin.Do(context.Background(), "PUT", "/v1/model-upstream", up, nil); err != nil {
		t.Fatalf("PUT /v1/model-upstream: %v", err)
	}
	return s
}

// newRun creates the policy and a run; extra adds or replaces fields of
// POST /v1/sessions (capabilities, connections, autonomous, ...).
func (s *stack) newRun(t *testing.T, policy string, extra map[string]any) run {
	t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(policy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	body := map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 100}}
	for k, v := range extra {
		body[k] = v
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return run{ses.ID, ses.Token}
}

// decision is the data of a tool.decision event.
type decision struct {
	ToolCallID       string `json:"tool_call_id"`
	ToolName         string `json:"tool_name"`
	Decision         string `json:"decision"`
	Source           string `json:"source"`
	RuleID           string `json:"rule_id"`
	ApprovalID       string `json:"approval_id"`
	Verdict          string `json:"verdict"`
	RewrittenVerdict string `json:"rewritten_verdict"`
}

// ledgerView is what the tests read off a run's timeline.
type ledgerView struct {
	seqs      []int64
	types     []string
	requested map[string]string   // tool_call_id -> tool_name
	decisions map[string]decision // tool_call_id -> tool.decision
	count     map[string]int
	perCall   map[string]int // tool_call_id -> tool.decision events
}

func (s *stack) ledger(t *testing.T, r run) ledgerView {
	t.Helper()
	v := ledgerView{requested: map[string]string{}, decisions: map[string]decision{}, count: map[string]int{}, perCall: map[string]int{}}
	after := int64(0)
	for {
		page, err := s.admin.Events(context.Background(), r.id, after, 0, 0)
		if err != nil {
			t.Fatalf("events of %s: %v", r.id, err)
		}
		for _, e := range page.Events {
			v.seqs = append(v.seqs, e.Seq)
			v.types = append(v.types, e.Type)
			v.count[e.Type]++
			var d decision
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("event %d: %v", e.Seq, err)
			}
			switch e.Type {
			case "tool.requested":
				v.requested[d.ToolCallID] = d.ToolName
			case "tool.decision":
				v.decisions[d.ToolCallID] = d
				v.perCall[d.ToolCallID]++
			}
		}
		if len(page.Events) == 0 || page.Events[len(page.Events)-1].Seq >= page.LastSeq {
			return v
		}
		after = page.Events[len(page.Events)-1].Seq
	}
}

// gapless reports whether the timeline is seq 1..n without a hole.
func (v ledgerView) gapless() bool {
	for i, s := range v.seqs {
		if s != int64(i+1) {
			return false
		}
	}
	return len(v.seqs) > 0
}

// result is what the driver prints.
type result struct {
	InitTools []string `json:"init_tools"`
	Result    *struct {
		Subtype           string   `json:"subtype"`
		IsError           bool     `json:"is_error"`
		NumTurns          int      `json:"num_turns"`
		Result            string   `json:"result"`
		PermissionDenials []denial `json:"permission_denials"`
	} `json:"result"`
	Decisions []driverDecision   `json:"decisions"`
	ToolMS    map[string]float64 `json:"tool_ms"`
	Error     string             `json:"error"`
	Stderr    string             `json:"stderr"`
	elapsed   time.Duration
}

type denial struct {
	ToolName  string         `json:"tool_name"`
	ToolUseID string         `json:"tool_use_id"`
	ToolInput map[string]any `json:"tool_input"`
}

type driverDecision struct {
	Via      string  `json:"via"`
	Tool     string  `json:"tool"`
	ID       string  `json:"id"`
	Decision string  `json:"decision"`
	Reason   string  `json:"reason"`
	MS       float64 `json:"ms"`
	Error    string  `json:"error"`
}

func (r result) denied() map[string]denial {
	m := map[string]denial{}
	if r.Result != nil {
		for _, d := range r.Result.PermissionDenials {
			m[d.ToolUseID] = d
		}
	}
	return m
}

// opts vary one driver run.
type opts struct {
	plain bool // without fluidbox: the baseline
	// hostAnswers gives a plain run a canUseTool (which denies), as an app
	// that answers permission prompts has.
	hostAnswers bool
	apiURL      string         // the adapter's fluidbox URL; default the stack's API
	options     map[string]any // added to the query() options
}

// query runs the driver once in dir and returns what it printed.
func (s *stack) query(t *testing.T, r run, dir, prompt string, o opts) result {
	t.Helper()
	res, err := s.start(t, r, dir, prompt, o)()
	if err != nil {
		t.Fatal(err)
	}
	sub := ""
	if res.Result != nil {
		sub = fmt.Sprintf("%s, %d turns, %d denials, result %q", res.Result.Subtype, res.Result.NumTurns, len(res.Result.PermissionDenials), res.Result.Result)
	}
	t.Logf("query (%s): %s; fluidbox requests: %s", res.elapsed.Round(time.Millisecond), sub, s.requests)
	return res
}

// start prepares one run of the driver; the function it returns runs it
// (from any goroutine) within runTimeout.
func (s *stack) start(t *testing.T, r run, dir, prompt string, o opts) func() (result, error) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	apiURL := o.apiURL
	if apiURL == "" {
		apiURL = s.api.URL
	}
	sc := map[string]any{
		"mode":   "fluidbox",
		"prompt": prompt, "cwd": dir, "home": home, "tmpdir": t.TempDir(), "path": "/usr/local/bin:/usr/bin:/bin",
		"options": o.options,
		"fluidbox": map[string]any{
			"url": apiURL, "sessionId": r.id, "token": r.token, "decisionTimeoutMs": decisionMs,
			"modelUrl": s.proxy.URL + "/v1/sessions/" + r.id + "/model",
		},
	}
	if o.plain {
		sc["mode"] = "plain"
		sc["hostAnswers"] = o.hostAnswers
		sc["plainEnv"] = map[string]string{
			"ANTHROPIC_BASE_URL": s.model.URL(), "ANTHROPIC_API_KEY": operatorKey,
			"ENABLE_TOOL_SEARCH": "false", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
		}
	}
	if o.options == nil {
		sc["options"] = map[string]any{}
	}
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	driver, err := filepath.Abs("testdata/driver.mjs")
	if err != nil {
		t.Fatal(err)
	}
	return func() (result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", driver, file)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "FLUIDBOX_AGENT_SDK_DIR=" + sdkDir}
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		var res result
		res.elapsed = time.Since(start)
		if ctx.Err() != nil {
			return res, fmt.Errorf("the driver ran past %s\nstdout: %s\nstderr: %s", runTimeout, stdout.String(), stderr.String())
		}
		if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil {
			return res, fmt.Errorf("driver: exit %v; stdout is not its JSON (%v):\n%s\nstderr: %s", err, jerr, stdout.String(), stderr.String())
		}
		res.elapsed = time.Since(start)
		if res.Error != "" || res.Result == nil {
			return res, fmt.Errorf("driver: error %q, result %v\nclaude stderr: %s\nnode stderr: %s", res.Error, res.Result, res.Stderr, stderr.String())
		}
		return res, nil
	}
}

// toolResult returns the tool_result for id that Claude Code sent the model.
func (s *stack) toolResult(t *testing.T, id string) scriptedmodel.ToolResult {
	t.Helper()
	for _, req := range s.model.Requests() {
		for _, m := range req.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" && b.ToolUseID == id {
					return scriptedmodel.ToolResult{ToolUseID: b.ToolUseID, Content: b.Content, IsError: b.IsError}
				}
			}
		}
	}
	t.Fatalf("the model never received a tool_result for %s", id)
	return scriptedmodel.ToolResult{}
}

// checkModelTraffic: the model's requests went through the proxy with the
// operator's key, never the session token.
func (s *stack) checkModelTraffic(t *testing.T, r run, v ledgerView) {
	t.Helper()
	n := 0
	for _, req := range s.model.Requests() {
		if req.Path != "/v1/messages" {
			continue
		}
		n++
		if req.Credential() != operatorKey {
			t.Errorf("upstream request %d did not carry the operator's key", n)
		}
		if bytes.Contains(req.Body, []byte(r.token)) {
			t.Errorf("upstream request %d carried the session token in its body", n)
		}
	}
	if n == 0 || v.count["budget.reserved"] != n || v.count["budget.reconciled"] != n {
		t.Errorf("%d model requests, %d budget.reserved, %d budget.reconciled; want one each per request, and some", n, v.count["budget.reserved"], v.count["budget.reconciled"])
	}
}

func call(id, tool string, input map[string]any) scriptedmodel.Step {
	return scriptedmodel.Respond(scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: id, Name: tool, Input: input}})
}

func then(id, tool string, input map[string]any) scriptedmodel.Step {
	return scriptedmodel.AfterToolResult(func(scriptedmodel.ToolResult) scriptedmodel.Reply {
		return scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: id, Name: tool, Input: input}}
	})
}

func bash(command string) map[string]any {
	return map[string]any{"command": command, "description": "Run " + strings.Fields(command)[0]}
}

func project(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}
