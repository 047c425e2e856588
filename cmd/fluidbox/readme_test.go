package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
)

// readmeBlock returns the first ```sh block of the README section titled
// heading.
func readmeBlock(t *testing.T, readme, heading string) string {
	t.Helper()
	_, sec, ok := strings.Cut(readme, "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README has no section %q", heading)
	}
	if next := strings.Index(sec, "\n## "); next >= 0 {
		sec = sec[:next]
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatalf("README section %q has no sh block", heading)
	}
	block, _, _ = strings.Cut(block, "```\n")
	return block
}

// expectation is what a line's comment says its answer is: "# allow",
// "# deny, rule no-push", "# pending ...", "# deny, source schema".
type expectation struct{ decision, rule, source string }

var (
	expectComment = regexp.MustCompile(`#\s+(allow|deny|pending)\b([^#]*)$`)
	ruleWord      = regexp.MustCompile(`\brule ([a-z0-9_-]+)`)
	sourceWord    = regexp.MustCompile(`\bsource ([a-z_]+)`)
)

func expectations(script string) []expectation {
	var out []expectation
	for _, line := range strings.Split(script, "\n") {
		m := expectComment.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		e := expectation{decision: m[1]}
		if r := ruleWord.FindStringSubmatch(m[2]); r != nil {
			e.rule = r[1]
		}
		if s := sourceWord.FindStringSubmatch(m[2]); s != nil {
			e.source = s[1]
		}
		out = append(out, e)
	}
	return out
}

// TestREADMEWalkthrough pastes the README's walkthrough and its GitHub
// section whole into bash against a fresh `fluidbox dev --print-webhook-secret`
// (what make run starts), with only the export lines dev printed before
// it, exactly as a reader would. It fails on any refused request (the
// walkthrough's curl calls --fail-with-body, and the script runs under
// set -eu), and checks every gate answer against the comment on
// its line.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README walkthrough needs %s", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	walk := readmeBlock(t, readme, "Walkthrough")
	github := readmeBlock(t, readme, "GitHub pull requests")
	script := walk + "\n" + github
	for _, bad := range []string{"...", "fbx_admin_", "FLUIDBOX_ADMIN_TOKEN="} {
		if strings.Contains(script, bad) {
			t.Errorf("the walkthrough holds %q: a reader pasting it whole cannot run it", bad)
		}
	}

	bin := fluidboxBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	addr := freeAddr(t)
	dev := exec.CommandContext(ctx, bin, "dev", "--print-webhook-secret")
	dev.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "FLUIDBOX_ADDR=" + addr}
	devErr := &syncBuffer{}
	dev.Stderr = devErr
	out, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Process.Kill(); _ = dev.Wait() })
	var exports []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "export ") {
			exports = append(exports, line)
		}
		if strings.HasPrefix(line, "press Ctrl-C") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if len(exports) != 3 {
		t.Fatalf("dev printed %d export lines, want 3 (URL, admin token, webhook secret): %v\n%s", len(exports), exports, devErr.String())
	}
	waitHealthy(t, "http://"+addr)

	// The reader's terminal: the export lines pasted, then the blocks,
	// run from the repository's root as `go run ./cmd/fluidbox` is.
	cli := regexp.MustCompile(`\bgo run \./cmd/fluidbox\b`)
	body := cli.ReplaceAllString(script, bin)
	// -e and -u but not pipefail: field's head -1 may close its pipe
	// early, as on a reader's terminal; a refused request still shows
	// (curl --fail-with-body prints it on stderr, checked below).
	full := "set -eu\n" + strings.Join(exports, "\n") + "\n" + body
	sh := exec.CommandContext(ctx, "bash", "-c", full)
	sh.Dir = "../.."
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	var stdout, stderr syncBuffer
	sh.Stdout, sh.Stderr = &stdout, &stderr
	if err := sh.Run(); err != nil {
		t.Fatalf("the walkthrough failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	if s := stderr.String(); strings.Contains(s, "curl: (") || strings.Contains(s, "fluidbox ") {
		t.Errorf("the walkthrough printed errors:\n%s", s)
	}

	// Every gate answer, in order, is what its line's comment says.
	want := expectations(script)
	var got []map[string]any
	for _, line := range strings.Split(stdout.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["decision"] != nil {
			got = append(got, m)
		}
	}
	if len(got) != len(want) || len(want) < 7 {
		t.Fatalf("%d gate answers for %d commented lines:\n%s", len(got), len(want), stdout.String())
	}
	for i, w := range want {
		g := got[i]
		if g["decision"] != w.decision || (w.rule != "" && g["rule_id"] != w.rule) || (w.source != "" && g["source"] != w.source) {
			t.Errorf("answer %d = %v, want %+v", i+1, g, w)
		}
		if w.decision == "pending" && g["approval_id"] == nil {
			t.Errorf("answer %d is pending without an approval_id: %v", i+1, g)
		}
	}
	// What the other steps print.
	for _, s := range []string{`"type":"session.created"`, "git-read", "octo-org/app", "(trusted)", "(read_only)", "octo-org/app#2", "octo-org/app#1"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", s, stdout.String())
		}
	}
	// session.created went out for each triggered run, without a token.
	if n := strings.Count(devErr.String(), "notification session.created"); n != 2 {
		t.Errorf("dev printed %d session.created notifications, want 2:\n%s", n, devErr.String())
	}
	for _, tok := range []string{"fbx_sess_", "fbx_run_", "fbx_trg_"} {
		if strings.Contains(devErr.String(), tok) {
			t.Errorf("dev's log holds a %s token", tok)
		}
	}
}

// TestReadmeLayoutNamesEveryCommand: the README's Layout line for the CLI
// names every command of the command table.
func TestReadmeLayoutNamesEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, _ := strings.Cut(string(readme), "\n## Layout\n")
	_, cli, ok := strings.Cut(layout, "\ncmd/fluidbox/")
	if !ok {
		t.Fatal("README's Layout has no cmd/fluidbox/ line")
	}
	var text strings.Builder
	for i, line := range strings.Split(cli, "\n") {
		if i > 0 && !strings.HasPrefix(line, "   ") {
			break
		}
		text.WriteString(line + "\n")
	}
	for _, c := range commands {
		if c.name == "help" {
			continue
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(c.name) + `\b`).MatchString(text.String()) {
			t.Errorf("README's Layout line for cmd/fluidbox/ does not name the %s command", c.name)
		}
	}
}

// TestREADMERestart runs the README's restart block as pasted (the built
// binary for `go run ./cmd/fluidbox`, a free port for 8000, a temporary
// file for the secret): the token it picks, the data and the webhook secret
// are the same after the control plane restarts, and the dev server it
// starts prints the same secret both times.
func TestREADMERestart(t *testing.T) {
	for _, tool := range []string{"bash", "od", "tr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's restart block needs %s", tool)
		}
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(raw), "\n## Two commands\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	_, block, ok := strings.Cut(sec, "```sh\ngo run ./cmd/fluidbox dynamodb &")
	if !ok {
		t.Fatal(`README's "Two commands" has no sh block starting "go run ./cmd/fluidbox dynamodb &"`)
	}
	block, _, _ = strings.Cut("go run ./cmd/fluidbox dynamodb &"+block, "```\n")
	lines := strings.Split(strings.TrimSpace(block), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "go run ./cmd/fluidbox dev ") {
		t.Fatalf("the block's last line %q does not start the control plane", last)
	}
	bin := fluidboxBinary(t)
	dbAddr, apiAddr := freeAddr(t), freeAddr(t)
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	// The server's default address is the block's 127.0.0.1:8000.
	subst := strings.NewReplacer("go run ./cmd/fluidbox", bin, "dynamodb &", "dynamodb --addr "+dbAddr+" &", "127.0.0.1:8000", dbAddr, ".build/webhook-secret", secretFile)

	// Everything before the last line, as pasted, then the environment it
	// leaves; the DynamoDB server it backgrounds is stopped by the test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Its output goes to files: the server it backgrounds keeps them open.
	envFile := filepath.Join(t.TempDir(), "env")
	setup := exec.CommandContext(ctx, "bash", "-c", "set -eu\n"+subst.Replace(strings.Join(lines[:len(lines)-1], "\n"))+"\nenv > "+envFile+"\n")
	setup.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	setup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := setup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-setup.Process.Pid, syscall.SIGKILL) })
	if err := setup.Wait(); err != nil {
		t.Fatalf("the block before its last line failed: %v", err)
	}
	dumped, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "FLUIDBOX_ADDR=" + apiAddr}
	token := ""
	for _, kv := range strings.Split(string(dumped), "\n") {
		if strings.HasPrefix(kv, "FLUIDBOX_ADMIN_TOKEN=") || strings.HasPrefix(kv, "AWS_ENDPOINT_URL_DYNAMODB=") {
			env = append(env, kv)
		}
		if v, ok := strings.CutPrefix(kv, "FLUIDBOX_ADMIN_TOKEN="); ok {
			token = v
		}
	}
	if len(token) < 32 || len(env) != 5 {
		t.Fatalf("the block left the environment %v, want a token of at least 32 characters and the DynamoDB endpoint", env[3:])
	}

	args := strings.Fields(subst.Replace(last))
	if i := strings.Index(last, "#"); i >= 0 {
		args = strings.Fields(subst.Replace(last[:i]))
	}
	start := func() (secret string, stop func()) {
		t.Helper()
		dev := exec.CommandContext(ctx, args[0], args[1:]...)
		dev.Env = env
		out := &syncBuffer{}
		dev.Stdout, dev.Stderr = out, out
		if err := dev.Start(); err != nil {
			t.Fatal(err)
		}
		waitHealthy(t, "http://"+apiAddr)
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "press Ctrl-C") && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond) // the export lines follow the listener
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "export FLUIDBOX_GITHUB_WEBHOOK_SECRET="); ok {
				secret = v
			}
		}
		return secret, func() { _ = dev.Process.Signal(os.Interrupt); _ = dev.Wait() }
	}
	c, err := client.New("http://"+apiAddr, token)
	if err != nil {
		t.Fatal(err)
	}
	first, stop := start()
	var pol struct{ ID string }
	if err := c.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}
	stop()
	second, stop := start()
	defer stop()
	if len(first) < 32 || first != second {
		t.Errorf("the webhook secret was %q, then %q after the restart; want one secret kept", first, second)
	}
	if err := c.Do(ctx, "GET", "/v1/policies/"+pol.ID, nil, nil); err != nil {
		t.Errorf("the policy after the restart, with the same token: %v", err)
	}
}

// TestREADMEStepsAsPromised holds every README block of numbered steps
// (the walkthrough and the sections that continue its shell) to what the
// walkthrough promises a reader pasting them: steps numbered 1, 2, 3...
// in reading order; only curl (through api, or with --fail-with-body, or a
// bounded readiness probe), grep and the repository's own `go run
// ./cmd/fluidbox` (no jq, no installed fluidbox); no fixed sleep in place
// of waiting for what it waits for.
func TestREADMEStepsAsPromised(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	step := regexp.MustCompile(`^# ([0-9]+)\. `)
	fixedSleep := regexp.MustCompile(`(^|[;&|]\s*)sleep [0-9.]+\s*(#.*)?$`)
	bareCLI := regexp.MustCompile(`(^|[;&|(]\s*|\$\()fluidbox `)
	blocks := strings.Split(string(raw), "```sh\n")[1:]
	next, numbered := 1, 0
	for _, b := range blocks {
		b, _, _ = strings.Cut(b, "```\n")
		if !regexp.MustCompile(`(?m)^# [0-9]+\. `).MatchString(b) {
			continue
		}
		numbered++
		for _, line := range strings.Split(b, "\n") {
			if m := step.FindStringSubmatch(line); m != nil {
				if m[1] != strconv.Itoa(next) {
					t.Errorf("README step %s comes where step %d should: %q", m[1], next, line)
				}
				next++
				continue
			}
			code, _, _ := strings.Cut(line, " #")
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			switch {
			case strings.Contains(code, "jq "):
				t.Errorf("README step line uses jq, which the walkthrough does not promise: %q", line)
			case bareCLI.MatchString(code):
				t.Errorf("README step line runs an installed fluidbox, not go run ./cmd/fluidbox: %q", line)
			case fixedSleep.MatchString(strings.TrimSpace(code)):
				t.Errorf("README step line sleeps a fixed time instead of waiting: %q", line)
			case strings.Contains(code, "curl ") && !strings.Contains(code, "--fail-with-body") && !strings.Contains(code, "-o /dev/null"):
				t.Errorf("README step line calls curl without --fail-with-body (use api): %q", line)
			}
		}
	}
	if numbered < 4 || next < 15 {
		t.Errorf("found %d blocks of numbered steps up to step %d; the README has lost its steps", numbered, next-1)
	}
}
