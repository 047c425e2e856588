//go:build e2e

package claudecode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/e2e/controlplane"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
)

// pinnedVersion is the Claude Code version this suite and the claude-code
// bundle's schemas were checked against. The Makefile's CLAUDE_CODE_VERSION
// installs it; moving the pin means re-running the bundle check
// (TestBundleCoversTheCLI) and refreshing shared/capability/builtin.
const pinnedVersion = "2.1.332"

const (
	adminToken = "e2e-claude-admin-token-0123456789"
	// cliTimeout bounds one run of the CLI; hookWait is the hook's own
	// deadline (FLUIDBOX_HOOK_TIMEOUT_SECONDS), well inside both.
	cliTimeout = 90 * time.Second
	hookWait   = "60"
)

// stack is the control plane of shared/internal/e2e/controlplane.
type stack struct{ *controlplane.Stack }

type (
	run        = controlplane.Run
	ledgerView = controlplane.Ledger
	decision   = controlplane.Decision
)

var (
	call   = controlplane.Call
	then   = controlplane.Then
	bash   = controlplane.Bash
	exists = controlplane.Exists
)

func newStack(t *testing.T, script ...scriptedmodel.Step) *stack {
	t.Helper()
	return &stack{controlplane.Start(t, controlplane.Options{AdminToken: adminToken, TablePrefix: "e2eclaude"}, script...)}
}

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
	dir := controlplane.Project(t, files)
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), settings, 0o644); err != nil {
		t.Fatal(err)
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
		hookURL = s.API.URL
	}
	values := map[string]string{
		"FLUIDBOX_URL":                             hookURL,
		"FLUIDBOX_SESSION_ID":                      r.ID,
		"FLUIDBOX_SESSION_TOKEN":                   r.Token,
		"FLUIDBOX_HOOK_TIMEOUT_SECONDS":            hookWait,
		"ANTHROPIC_BASE_URL":                       s.Proxy.URL + "/v1/sessions/" + r.ID + "/model",
		"ANTHROPIC_API_KEY":                        r.Token,
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
