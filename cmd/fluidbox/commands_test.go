package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Every command answers --help with exit 0 on stdout, naming its exit codes
// and, when it reads any, its environment.
func TestEveryCommandHasHelp(t *testing.T) {
	ctx := context.Background()
	for _, c := range commands {
		if c.name == "help" {
			continue // help --help is the general usage
		}
		for _, h := range []string{"--help", "-h"} {
			r := fluidbox(ctx, nil, "", c.name, h)
			if r.code != 0 || !strings.Contains(r.stdout, "exit codes:") || !strings.Contains(r.stdout, "usage: fluidbox "+c.name) {
				t.Errorf("%s %s = %d, stdout %q stderr %q", c.name, h, r.code, r.stdout, r.stderr)
			}
			if c.environment != "" && !strings.Contains(r.stdout, "environment:") {
				t.Errorf("%s %s lists no environment", c.name, h)
			}
		}
	}
	if r := fluidbox(ctx, nil, "", "dev", "--help"); !strings.Contains(r.stdout, "FLUIDBOX_GITHUB_WEBHOOK_SECRET") || !strings.Contains(r.stdout, "-print-webhook-secret") {
		t.Errorf("dev --help = %q, want its variables and flags", r.stdout)
	}
	for _, line := range [][]string{{"hook", "--help"}, {"hook", "claude-code", "--help"}} {
		if r := fluidbox(ctx, nil, "", line...); r.code != 0 || !strings.Contains(r.stdout, "FLUIDBOX_SESSION_TOKEN") || !strings.Contains(r.stdout, "FLUIDBOX_HOOK_TIMEOUT_SECONDS") {
			t.Errorf("%q = %d %q, want its environment", line, r.code, r.stdout)
		}
	}
	for _, bad := range [][]string{{"runs"}, {"runs", "nope"}, {"triggers", "nope"}, {"completion", "tcsh"}, {"version", "extra"}, {"nope"}} {
		if r := fluidbox(ctx, nil, "", bad...); r.code != 2 {
			t.Errorf("%v = %d, want 2 (usage)", bad, r.code)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	ctx := context.Background()
	r := fluidbox(ctx, nil, "", "version", "--json")
	var bi buildInfo
	if err := json.Unmarshal([]byte(r.stdout), &bi); r.code != 0 || err != nil || bi.GoVersion == "" || bi.Version == "" {
		t.Errorf("version --json = %d %q", r.code, r.stdout)
	}
	stamped := readBuildInfo(func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Path: "github.com/fluidbox/fluidbox", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}, true
	})
	if stamped.Version != "v1.2.3" || stamped.Commit != "abc123" || !stamped.Modified || stamped.Module != "github.com/fluidbox/fluidbox" {
		t.Errorf("readBuildInfo = %+v", stamped)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := fluidbox(ctx, nil, "", "completion", sh)
		if r.code != 0 {
			t.Fatalf("completion %s = %d %s", sh, r.code, r.stderr)
		}
		for _, c := range commands {
			if !strings.Contains(r.stdout, c.name) {
				t.Errorf("completion %s lacks %s", sh, c.name)
			}
		}
		if !strings.Contains(r.stdout, "send-test") || !strings.Contains(r.stdout, "rotate-runner-key") {
			t.Errorf("completion %s lacks subcommands or flags", sh)
		}
	}
}

const cliWebhookSecret = "cli-test-webhook-secret-0123456789"

// newTriggerStack is newStack with a GitHub webhook secret.
func newTriggerStack(t *testing.T) *stack {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		for _, r := range db.Layer.Refused() {
			t.Errorf("DynamoDB on AWS refuses this request: %s", r)
		}
	})
	st := store.New(devstack.DynamoClient(db.URL), fmt.Sprintf("cli%d", tables.Add(1)))
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{AdminToken: adminToken, Ledger: ledger.New(st, time.Now), GitHubWebhookSecret: cliWebhookSecret}))
	t.Cleanup(srv.Close)
	return &stack{url: srv.URL}
}

// The trigger loop from the command line: configure, send a signed test
// delivery (fork and not), list the runs it made, issue a run's tokens with
// the trigger's runner key, update, delete.
func TestTriggersAndRunsCommands(t *testing.T) {
	ctx := context.Background()
	s := newTriggerStack(t)
	vars := s.env("FLUIDBOX_GITHUB_WEBHOOK_SECRET", cliWebhookSecret)
	dir := t.TempDir()
	r := fluidbox(ctx, vars, testPolicy, "triggers", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "no trigger configurations") {
		t.Fatalf("triggers list (empty) = %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A policy, through the API as the README does.
	var pol struct{ ID string }
	c, _ := (&apiFlags{url: s.url, token: adminToken}).client()
	if err := c.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "trigger.json")
	doc := fmt.Sprintf(`{"repository":"octo-org/app","policy_id":%q,"capabilities":["claude-code"],"budget":{"limit_usd":2}}`, pol.ID)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r = fluidbox(ctx, vars, "", "triggers", "create", "-f", cfg, "--json")
	var created struct {
		ID        string `json:"id"`
		RunnerKey string `json:"runner_key"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &created); r.code != 0 || err != nil || !strings.HasPrefix(created.RunnerKey, "fbx_trg_") {
		t.Fatalf("triggers create = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, doc, "triggers", "create", "-f", "-"); r.code != 1 || !strings.Contains(r.stderr, "409") {
		t.Errorf("a second configuration for the repository = %d %q", r.code, r.stderr)
	}

	r = fluidbox(ctx, vars, "", "triggers", "send-test", "--repository", "octo-org/app", "--json")
	var trusted struct {
		SessionID string `json:"session_id"`
		TrustTier string `json:"trust_tier"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &trusted); r.code != 0 || err != nil || trusted.TrustTier != "trusted" {
		t.Fatalf("send-test = %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = fluidbox(ctx, vars, "", "triggers", "send-test", "--repository", "octo-org/app", "--fork", "--number", "7")
	if r.code != 0 || !strings.Contains(r.stdout, "read_only") {
		t.Errorf("send-test --fork = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "triggers", "send-test", "--repository", "octo-org/other"); r.code != 0 || !strings.Contains(r.stdout, "ignored") {
		t.Errorf("send-test for an unconfigured repository = %d %q", r.code, r.stdout)
	}
	if r := fluidbox(ctx, s.env("FLUIDBOX_GITHUB_WEBHOOK_SECRET", "wrong-secret-0123456789"), "", "triggers", "send-test", "--repository", "octo-org/app"); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Errorf("send-test with the wrong secret = %d %q", r.code, r.stderr)
	}

	r = fluidbox(ctx, vars, "", "runs", "list", "--trigger", "github", "--repository", "octo-org/app", "--limit", "1", "--all", "--json")
	var listed struct{ Sessions []runView }
	if err := json.Unmarshal([]byte(r.stdout), &listed); r.code != 0 || err != nil || len(listed.Sessions) != 2 || !listed.Sessions[0].TokenPending {
		t.Fatalf("runs list = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "runs", "list", "--status", "ended"); r.code != 0 || !strings.Contains(r.stdout, "no runs") {
		t.Errorf("runs list --status ended = %d %q", r.code, r.stdout)
	}
	if r := fluidbox(ctx, vars, "", "runs", "list", "--since", "yesterday"); r.code != 2 {
		t.Errorf("runs list --since yesterday = %d, want 2", r.code)
	}

	keyVars := s.env("FLUIDBOX_ADMIN_TOKEN", "", "FLUIDBOX_TRIGGER_KEY", created.RunnerKey)
	r = fluidbox(ctx, keyVars, "", "runs", "token", trusted.SessionID)
	if r.code != 0 || !strings.Contains(r.stdout, "export FLUIDBOX_SESSION_TOKEN=fbx_sess_") || !strings.Contains(r.stdout, "export FLUIDBOX_RUNNER_TOKEN=fbx_run_") {
		t.Fatalf("runs token = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, keyVars, "", "runs", "token", trusted.SessionID); r.code != 1 || !strings.Contains(r.stderr, "issued once") {
		t.Errorf("runs token again = %d %q", r.code, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "runs", "get", trusted.SessionID); r.code != 0 || !strings.Contains(r.stdout, "octo-org/app#1") || strings.Contains(r.stdout, "none issued") {
		t.Errorf("runs get = %d %q", r.code, r.stdout)
	}

	r = fluidbox(ctx, vars, "", "triggers", "update", created.ID, "-f", cfg, "--rotate-runner-key")
	if r.code != 0 || !strings.Contains(r.stdout, "revision  1") || !strings.Contains(r.stdout, "FLUIDBOX_TRIGGER_KEY=fbx_trg_") {
		t.Errorf("triggers update = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "triggers", "list"); r.code != 0 || !strings.Contains(r.stdout, "octo-org/app") {
		t.Errorf("triggers list = %d %q", r.code, r.stdout)
	}
	if r := fluidbox(ctx, vars, "", "triggers", "delete", created.ID); r.code != 0 || !strings.Contains(r.stdout, "deleted") {
		t.Errorf("triggers delete = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "triggers", "get", created.ID); r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("triggers get after delete = %d %q", r.code, r.stderr)
	}
}

// send-test signs with a real secret and creates a real run: it refuses,
// before dialling, any server not on this machine.
func TestSendTestStaysLocal(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:8080", "https://fluidbox.example.com", "http://127.0.0.1.nip.io:8080", "http://[::ffff:10.0.0.1]:8080"} {
		r := fluidbox(context.Background(), map[string]string{"FLUIDBOX_URL": u, "FLUIDBOX_GITHUB_WEBHOOK_SECRET": "s"}, "", "triggers", "send-test", "--repository", "a/b")
		if r.code != 1 || !strings.Contains(r.stderr, "only to a server on this machine") {
			t.Errorf("send-test to %s = %d %q", u, r.code, r.stderr)
		}
	}
}

// Every command and subcommand answers a wrong command line with exit 2:
// a flag it does not know, a flag value it refuses, or arguments it does
// not take. The subcommands are the command's words that are not flags.
func TestUsageErrorsExitTwo(t *testing.T) {
	ctx := context.Background()
	env := map[string]string{"FLUIDBOX_URL": "http://127.0.0.1:1", "FLUIDBOX_ADMIN_TOKEN": "x"}
	for _, c := range commands {
		switch c.name {
		case "help", "completion":
			continue // their arguments are words, checked below
		}
		lines := [][]string{{c.name, "--no-such-flag"}}
		if c.name != "hook" { // hook's flags come after its runner's name
			lines = append(lines, []string{c.name, "--jq", ".["})
		}
		for _, w := range c.words {
			if !strings.HasPrefix(w, "-") {
				lines = append(lines, []string{c.name, w, "--no-such-flag"}, []string{c.name, w, "--jq", ".["})
			}
		}
		for _, line := range lines {
			if c.name == "hook" && len(line) == 3 {
				continue
			}
			if r := fluidbox(ctx, env, "", line...); r.code != 2 {
				t.Errorf("%q = %d, want 2 (usage); stderr %q", line, r.code, r.stderr)
			}
		}
	}
	for _, line := range [][]string{
		{"approvals", "extra"}, {"approvals", "show"}, {"approve"}, {"approve", "apr_1", "apr_2"}, {"deny"},
		{"events"}, {"events", "ses_1", "ses_2"}, {"events", "ses_1", "--after", "x"},
		{"runs", "list", "extra"}, {"runs", "list", "--limit", "many"}, {"runs", "get"}, {"runs", "token"},
		{"policy"}, {"policy", "nope"}, {"policy", "eval"}, {"policy", "eval", "pol_1"},
		{"policy", "eval", "pol_1", "--command", "ls", "--tool", "Read"}, {"policy", "eval", "pol_1", "--tool", "Read", "--input", "{"},
		{"policy", "test"}, {"policy", "import-claude"}, {"policy", "get"}, {"policy", "update"},
		{"triggers", "get"}, {"triggers", "delete"}, {"connections"}, {"connections", "authorize"},
		{"completion"}, {"completion", "tcsh"}, {"version", "extra"}, {"dynamodb", "extra"}, {"dynamodb", "--chaos", "nonsense"}, {"dev", "extra"}, {"hook"}, {"hook", "codex"},
	} {
		if r := fluidbox(ctx, env, "", line...); r.code != 2 {
			t.Errorf("%q = %d, want 2 (usage); stderr %q", line, r.code, r.stderr)
		}
	}
}

// Help spells every flag as the usage lines do: --json, never -json.
func TestHelpSpellsFlagsWithTwoDashes(t *testing.T) {
	ctx := context.Background()
	for _, line := range [][]string{{"runs", "list", "--help"}, {"policy", "eval", "--help"}, {"triggers", "create", "--help"}, {"events", "--help"}, {"version", "--help"}} {
		r := fluidbox(ctx, nil, "", line...)
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "  --json") {
			t.Errorf("%q = %d, want --json in %q", line, r.code, r.stdout+r.stderr)
		}
		for _, l := range strings.Split(r.stdout+r.stderr, "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "--") && len(f[0]) > 2 {
				t.Errorf("%q: help line %q spells a flag with one dash", line, l)
			}
		}
	}
}

// runs create makes a run from flags alone and prints its tokens as export
// lines; runs get shows the policy by name and the workspace; --jq picks
// fields out of any --json answer.
func TestRunsCreateGetAndJQ(t *testing.T) {
	ctx := context.Background()
	s := newStack(t, nil)
	vars := s.env()
	var pol struct{ ID string }
	c, _ := (&apiFlags{url: s.url, token: adminToken}).client()
	if err := c.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}
	r := fluidbox(ctx, vars, "", "runs", "create", "--policy", pol.ID, "--budget", "2", "--workspace", "/work/app", "--tier", "read_only")
	if r.code != 0 || !strings.Contains(r.stdout, "export FLUIDBOX_SESSION_TOKEN=fbx_sess_") || !strings.Contains(r.stdout, "export FLUIDBOX_RUNNER_TOKEN=fbx_run_") || !strings.Contains(r.stderr, "read_only") {
		t.Fatalf("runs create = %d %q %q", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimPrefix(strings.Fields(r.stdout)[1], "FLUIDBOX_SESSION_ID=")
	r = fluidbox(ctx, vars, "", "runs", "get", id)
	if r.code != 0 || !strings.Contains(r.stdout, `"cli"`) || !strings.Contains(r.stdout, pol.ID+" version 1") || !strings.Contains(r.stdout, "workspace  /work/app") {
		t.Errorf("runs get = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "runs", "get", id, "--jq", ".trust_tier"); r.code != 0 || r.stdout != "read_only\n" {
		t.Errorf("runs get --jq .trust_tier = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "runs", "list", "--jq", ".sessions | length"); r.code != 0 || r.stdout != "1\n" {
		t.Errorf("runs list --jq length = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "runs", "get", id, "--jq", ".no_such | error(\"x\")"); r.code != 1 || !strings.Contains(r.stderr, "--jq") {
		t.Errorf("runs get with a failing --jq = %d %q", r.code, r.stderr)
	}
	for _, bad := range [][]string{{"runs", "create", "--budget", "1"}, {"runs", "create", "--policy", pol.ID}, {"runs", "create", "--policy", pol.ID, "--budget", "-1"}} {
		if r := fluidbox(ctx, vars, "", bad...); r.code != 2 {
			t.Errorf("%q = %d, want 2", bad, r.code)
		}
	}
	if r := fluidbox(ctx, vars, "", "runs", "create", "--policy", "pol_nope", "--budget", "1"); r.code != 1 || !strings.Contains(r.stderr, `no policy "pol_nope"`) {
		t.Errorf("runs create with an unknown policy = %d %q", r.code, r.stderr)
	}
}

// --webhook-secret-file generates a secret into a new file (0600) and reads
// it back afterwards; a file that holds no secret is refused.
func TestWebhookSecretFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "sub", "secret")
	a, err := webhookSecretFile(name)
	if err != nil || len(a) != 64 {
		t.Fatalf("webhookSecretFile(new) = %q, %v", a, err)
	}
	if info, err := os.Stat(name); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the secret file's mode = %v (%v), want 0600", info.Mode(), err)
	}
	if b, err := webhookSecretFile(name); err != nil || b != a {
		t.Errorf("webhookSecretFile(existing) = %q, %v, want %q", b, err, a)
	}
	for _, bad := range []string{"", "short", "two words are not one secret", "line-one-0123456789\nline-two-0123456789"} {
		f := filepath.Join(dir, "bad")
		if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := webhookSecretFile(f); err == nil {
			t.Errorf("webhookSecretFile of %q succeeded, want refused", bad)
		}
	}
}
