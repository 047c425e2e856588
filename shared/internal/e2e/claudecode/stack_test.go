//go:build e2e

package claudecode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// pinnedVersion is the Claude Code version this suite and the claude-code
// bundle's schemas were checked against. The Makefile's CLAUDE_CODE_VERSION
// installs it; moving the pin means re-running the bundle check
// (TestBundleCoversTheCLI) and refreshing shared/capability/builtin.
const pinnedVersion = "2.1.332"

const (
	adminToken  = "e2e-claude-admin-token-0123456789"
	operatorKey = "sk-ant-operator-e2e-0123456789"
	// cliTimeout bounds one run of the CLI; hookWait is the hook's own
	// deadline (FLUIDBOX_HOOK_TIMEOUT_SECONDS), well inside both.
	cliTimeout = 90 * time.Second
	hookWait   = "60"
)

// Set by TestMain.
var (
	claudeBin   string // the pinned CLI
	fluidboxDir string // holds the fluidbox binary built from this tree
)

func TestMain(m *testing.M) {
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	claudeBin = os.Getenv("FLUIDBOX_CLAUDE")
	if claudeBin == "" {
		fmt.Fprintln(os.Stderr, "e2e claude: FLUIDBOX_CLAUDE is not set; run `make e2e-claude`, which installs @anthropic-ai/claude-code@"+pinnedVersion+" into .build/claude and sets it")
		return 1
	}
	out, err := exec.Command(claudeBin, "--version").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e claude: %s --version: %v\n", claudeBin, err)
		return 1
	}
	if v := strings.TrimSpace(string(out)); !strings.HasPrefix(v, pinnedVersion+" ") {
		fmt.Fprintf(os.Stderr, "e2e claude: %s is %q, want %s (the version the claude-code bundle was checked against)\n", claudeBin, v, pinnedVersion)
		return 1
	}
	dir, err := os.MkdirTemp("", "fluidbox-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e claude:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "fluidbox"), "github.com/fluidbox/fluidbox/cmd/fluidbox")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e claude: go build ./cmd/fluidbox:", err)
		return 1
	}
	fluidboxDir = dir
	return m.Run()
}

var tables atomic.Int64

// stack is the real control plane on 127.0.0.1 with a scripted model as its
// upstream. The same API handler is served on two listeners, as on AWS
// (API Gateway for the API, the broker's function URL for the model proxy):
// api is what the hook and the operator talk to, proxy is what Claude Code's
// ANTHROPIC_BASE_URL points at, so a test can take the API down mid-run
// while the model keeps answering.
type stack struct {
	api, proxy *httptest.Server
	admin      *client.Client
	model      *scriptedmodel.Server
}

// run is one fluidbox run (session) and its token.
type run struct{ id, token string }

func newStack(t *testing.T, script ...scriptedmodel.Step) *stack {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start minidyn: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st := store.New(devstack.DynamoClient(db.URL), fmt.Sprintf("e2eclaude%d", tables.Add(1)))
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
	h := api.New(api.Config{AdminToken: adminToken, Ledger: led, Scheduler: timers, Sealer: sealer, ConnectionAllowCIDRs: testenv.LoopbackCIDRs})
	s := &stack{api: httptest.NewServer(h), proxy: httptest.NewServer(h)}
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

// newRun creates the policy and a run with the claude-code bundle; extra
// adds fields to POST /v1/sessions (trust_tier, ...).
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
	var r run
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	r.id, r.token = ses.ID, ses.Token
	return r
}

// events returns the run's whole timeline.
func (s *stack) events(t *testing.T, r run) []client.Event {
	t.Helper()
	var all []client.Event
	after := int64(0)
	for {
		page, err := s.admin.Events(context.Background(), r.id, after, 0, 0)
		if err != nil {
			t.Fatalf("events of %s: %v", r.id, err)
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 || page.Events[len(page.Events)-1].Seq >= page.LastSeq {
			return all
		}
		after = page.Events[len(page.Events)-1].Seq
	}
}

// decision is the data of a tool.decision event.
type decision struct {
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	Decision   string `json:"decision"`
	Source     string `json:"source"`
	RuleID     string `json:"rule_id"`
	ApprovalID string `json:"approval_id"`
}

// ledgerView is what the tests read off a timeline.
type ledgerView struct {
	types     []string
	requested map[string]string   // tool_call_id -> tool_name of tool.requested
	decisions map[string]decision // tool_call_id -> tool.decision
	count     map[string]int      // event type -> how many
	reserved  map[string]bool     // request_id of budget.reserved
	settled   map[string]string   // request_id -> settlement of budget.reconciled
}

func (s *stack) ledger(t *testing.T, r run) ledgerView {
	t.Helper()
	v := ledgerView{requested: map[string]string{}, decisions: map[string]decision{}, count: map[string]int{}, reserved: map[string]bool{}, settled: map[string]string{}}
	for _, e := range s.events(t, r) {
		v.types = append(v.types, e.Type)
		v.count[e.Type]++
		var d struct {
			decision
			RequestID  string `json:"request_id"`
			Settlement string `json:"settlement"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d %s: %v", e.Seq, e.Type, err)
		}
		switch e.Type {
		case "tool.requested":
			v.requested[d.ToolCallID] = d.ToolName
		case "tool.decision":
			v.decisions[d.ToolCallID] = d.decision
		case "budget.reserved":
			v.reserved[d.RequestID] = true
		case "budget.reconciled":
			v.settled[d.RequestID] = d.Settlement
		}
	}
	return v
}

// checkModelTraffic asserts what every run's model traffic must show: each
// request the scripted upstream answered was admitted (budget.reserved) and
// reconciled from usage (budget.reconciled), and carried the operator's key,
// never the run's session token.
func (s *stack) checkModelTraffic(t *testing.T, r run, v ledgerView) {
	t.Helper()
	n := 0
	for _, req := range s.model.Requests() {
		if req.Path != "/v1/messages" {
			continue
		}
		n++
		if req.Credential() != operatorKey || req.Status != 200 {
			t.Errorf("upstream request %d: credential %q, status %d; want the operator's key and 200", n, redactKey(req.Credential()), req.Status)
		}
		for name, vals := range req.Header {
			for _, val := range vals {
				if strings.Contains(val, r.token) {
					t.Errorf("upstream request %d carried the session token in header %s", n, name)
				}
			}
		}
		if bytes.Contains(req.Body, []byte(r.token)) {
			t.Errorf("upstream request %d carried the session token in its body", n)
		}
	}
	if n == 0 {
		t.Fatal("the scripted upstream saw no model request")
	}
	if len(v.reserved) != n || len(v.settled) != n {
		t.Errorf("ledger: %d budget.reserved, %d budget.reconciled for %d model requests; want one each per request", len(v.reserved), len(v.settled), n)
	}
	for id := range v.reserved {
		if got := v.settled[id]; got != "usage" {
			t.Errorf("request %s settled %q, want usage (reconciled from the response's usage)", id, got)
		}
	}
}

func redactKey(k string) string {
	if len(k) > 12 {
		return k[:12] + "…"
	}
	return k
}

// readmeSection returns the README's "Govern Claude Code with fluidbox"
// section: the suite configures Claude Code exactly as it says, so the
// snippets there are tried as pasted.
func readmeSection(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatalf("read README.md: %v", err)
	}
	const heading = "## Govern Claude Code with fluidbox"
	_, sec, ok := strings.Cut(string(b), heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	return sec
}

// fence returns the first fenced block of the given language in text.
func fence(t *testing.T, text, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(text, "```"+lang+"\n")
	if !ok {
		t.Fatalf("README section has no ```%s block", lang)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("README section: unterminated ```%s block", lang)
	}
	return block
}

var exportLine = regexp.MustCompile(`^export ([A-Z_][A-Z0-9_]*)=`)

// readmeSettings is the README's .claude/settings.json, and the names of
// the variables its sh block exports for Claude Code.
func readmeSettings(t *testing.T) (settings []byte, envNames []string) {
	t.Helper()
	sec := readmeSection(t)
	settings = []byte(fence(t, sec, "json"))
	var probe map[string]any
	if err := json.Unmarshal(settings, &probe); err != nil {
		t.Fatalf("README settings.json does not parse: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(fence(t, sec, "sh")))
	for sc.Scan() {
		if m := exportLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			envNames = append(envNames, m[1])
		}
	}
	if len(envNames) == 0 {
		t.Fatal("README sh block exports no variables")
	}
	return settings, envNames
}

// project makes a working directory for Claude Code with the README's
// .claude/settings.json, plus the given files.
func project(t *testing.T, files map[string]string) string {
	t.Helper()
	settings, _ := readmeSettings(t)
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), settings, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cliResult is the CLI's --output-format json answer, as far as the tests
// read it.
type cliResult struct {
	Type              string   `json:"type"`
	Subtype           string   `json:"subtype"`
	IsError           bool     `json:"is_error"`
	NumTurns          int      `json:"num_turns"`
	Result            string   `json:"result"`
	PermissionDenials []denial `json:"permission_denials"`

	elapsed time.Duration
	stderr  string
}

type denial struct {
	ToolName  string         `json:"tool_name"`
	ToolUseID string         `json:"tool_use_id"`
	ToolInput map[string]any `json:"tool_input"`
}

func (c cliResult) denied() map[string]denial {
	m := map[string]denial{}
	for _, d := range c.PermissionDenials {
		m[d.ToolUseID] = d
	}
	return m
}

// cliOpts vary one CLI run.
type cliOpts struct {
	hookURL string            // FLUIDBOX_URL for the hook; default the stack's API
	path    string            // PATH; default the fluidbox binary's directory, then /usr/bin:/bin
	env     map[string]string // added or replaced variables
}

// claude runs the pinned CLI headless in dir and returns its JSON result.
func (s *stack) claude(t *testing.T, r run, dir, prompt string, o cliOpts) cliResult {
	t.Helper()
	res, err := s.start(t, r, dir, prompt, o)()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claude -p (%s): subtype %s, %d turns, %d permission denials, result %q", res.elapsed.Round(time.Millisecond), res.Subtype, res.NumTurns, len(res.PermissionDenials), res.Result)
	return res
}

// start prepares one headless run of the pinned CLI in dir, configured as
// the README says: the variables its sh block exports, filled in for run r,
// with an isolated HOME, a PATH that finds the fluidbox binary built from
// this tree, and nothing else from the test's environment. The returned
// function runs it (from any goroutine) within cliTimeout.
func (s *stack) start(t *testing.T, r run, dir, prompt string, o cliOpts) func() (cliResult, error) {
	t.Helper()
	_, names := readmeSettings(t)
	hookURL := o.hookURL
	if hookURL == "" {
		hookURL = s.api.URL
	}
	values := map[string]string{
		"FLUIDBOX_URL":                             hookURL,
		"FLUIDBOX_SESSION_ID":                      r.id,
		"FLUIDBOX_SESSION_TOKEN":                   r.token,
		"FLUIDBOX_HOOK_TIMEOUT_SECONDS":            hookWait,
		"ANTHROPIC_BASE_URL":                       s.proxy.URL + "/v1/sessions/" + r.id + "/model",
		"ANTHROPIC_API_KEY":                        r.token,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"ENABLE_TOOL_SEARCH":                       "false",
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	path := o.path
	if path == "" {
		path = fluidboxDir + ":/usr/bin:/bin"
	}
	env := []string{"HOME=" + home, "PATH=" + path, "TMPDIR=" + t.TempDir()}
	for _, n := range names {
		v, ok := values[n]
		if !ok {
			t.Fatalf("the README exports %s, which this suite does not know how to set", n)
		}
		if ov, ok := o.env[n]; ok {
			v = ov
		}
		env = append(env, n+"="+v)
	}
	for n, v := range o.env {
		if _, ok := values[n]; !ok {
			env = append(env, n+"="+v)
		}
	}
	return func() (cliResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, claudeBin, "-p", prompt, "--output-format", "json")
		cmd.Dir = dir
		cmd.Env = env
		cmd.WaitDelay = 5 * time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		res := cliResult{elapsed: time.Since(start), stderr: stderr.String()}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("claude ran past %s\nstdout: %s\nstderr: %s", cliTimeout, stdout.String(), stderr.String())
		}
		if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil || res.Type != "result" {
			return res, fmt.Errorf("claude: exit %v; stdout is not its JSON result (%v):\n%s\nstderr: %s", err, jerr, stdout.String(), stderr.String())
		}
		return res, nil
	}
}

// toolResult returns the tool_result for id that the CLI sent the model.
func (s *stack) toolResult(t *testing.T, id string) scriptedmodel.ToolResult {
	t.Helper()
	// Any message, not only the last: Claude Code may append a
	// role:"system" entry after the tool results.
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

// call is a script step that calls a tool with a chosen id.
func call(id, tool string, input map[string]any) scriptedmodel.Step {
	return scriptedmodel.Respond(scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: id, Name: tool, Input: input}})
}

// then calls a tool once the previous call's tool_result has arrived.
func then(id, tool string, input map[string]any) scriptedmodel.Step {
	return scriptedmodel.AfterToolResult(func(scriptedmodel.ToolResult) scriptedmodel.Reply {
		return scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: id, Name: tool, Input: input}}
	})
}

func bash(command string) map[string]any {
	return map[string]any{"command": command, "description": "Run " + strings.Fields(command)[0]}
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}
