//go:build e2e

package agentsdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/e2e/controlplane"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
)

// Pinned versions. package-lock.json in clients/agent-sdk installs the SDK;
// its claudeCodeVersion must be the CLI the claude-code bundle was checked
// against (the Makefile's CLAUDE_CODE_VERSION).
const (
	pinnedSDK        = "0.3.332"
	pinnedClaudeCode = "2.1.332"
)

const (
	adminToken = "e2e-agentsdk-admin-token-0123456789"
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

// stack is the control plane of shared/internal/e2e/controlplane; the
// run's requests (not the admin's) are counted.
type stack struct {
	*controlplane.Stack
	requests *counter
}

type (
	run        = controlplane.Run
	ledgerView = controlplane.Ledger
	decision   = controlplane.Decision
)

var (
	call    = controlplane.Call
	then    = controlplane.Then
	bash    = controlplane.Bash
	project = controlplane.Project
	exists  = controlplane.Exists
)

func newStack(t *testing.T, script ...scriptedmodel.Step) *stack {
	t.Helper()
	c := &counter{n: map[string]int{}}
	return &stack{controlplane.Start(t, controlplane.Options{AdminToken: adminToken, TablePrefix: "e2eagentsdk", Wrap: c.wrap}, script...), c}
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
	// canUseToolOnly wires the adapter's canUseTool without its hook.
	canUseToolOnly bool
	apiURL         string         // the adapter's fluidbox URL; default the stack's API
	options        map[string]any // added to the query() options
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
		apiURL = s.API.URL
	}
	sc := map[string]any{
		"mode":   "fluidbox",
		"prompt": prompt, "cwd": dir, "home": home, "tmpdir": t.TempDir(), "path": "/usr/local/bin:/usr/bin:/bin",
		"options": o.options,
		"fluidbox": map[string]any{
			"url": apiURL, "sessionId": r.ID, "token": r.Token, "decisionTimeoutMs": decisionMs,
			"modelUrl": s.Proxy.URL + "/v1/sessions/" + r.ID + "/model",
		},
	}
	sc["canUseToolOnly"] = o.canUseToolOnly
	if o.plain {
		sc["mode"] = "plain"
		sc["hostAnswers"] = o.hostAnswers
		sc["plainEnv"] = map[string]string{
			"ANTHROPIC_BASE_URL": s.Model.URL(), "ANTHROPIC_API_KEY": controlplane.OperatorKey,
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
