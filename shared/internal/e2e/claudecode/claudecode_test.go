//go:build e2e

package claudecode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// governed is the policy of most cases. Every command used writes a file,
// because Claude Code itself lets read-only commands (git status, ls) run
// unasked: only a write shows that the hook's answer is what decides.
const governed = `{"name":"e2e-claude","default_verdict":"deny","approval":{"scope":"once","ttl_seconds":900},"rules":[
 {"id":"no-unsandboxed","tool":"Bash","match":{"input":{"/dangerouslyDisableSandbox":["true"]}},"verdict":"deny"},
 {"id":"no-denied","tool":"Bash","match":{"command_prefix":["touch denied.txt"]},"verdict":"deny"},
 {"id":"ask","tool":"Bash","match":{"command_prefix":["touch approved.txt"]},"verdict":"require_approval","ttl_seconds":120},
 {"id":"ask-briefly","tool":"Bash","match":{"command_prefix":["touch unanswered.txt"]},"verdict":"require_approval","ttl_seconds":1},
 {"id":"touch","tool":"Bash","match":{"command_prefix":["touch"],"options":"any"},"verdict":"allow"},
 {"id":"reads","tool":"Read","verdict":"allow"}]}`

// TestPolicyDenied: a command the policy denies is refused by the hook,
// the model receives fluidbox's reason as a tool error, and the file it
// would create does not exist.
func TestPolicyDenied(t *testing.T) {
	t.Parallel()
	s := newStack(t, call("toolu_denied", "Bash", bash("touch denied.txt")), scriptedmodel.SayToolResult())
	r := s.NewRun(t, governed, nil)
	dir := project(t, nil)
	res := s.claude(t, r, dir, "create denied.txt", cliOpts{})

	if d, ok := res.denied()["toolu_denied"]; !ok || d.ToolName != "Bash" || d.ToolInput["command"] != "touch denied.txt" {
		t.Errorf("permission_denials = %+v, want the Bash call toolu_denied", res.PermissionDenials)
	}
	tr := s.ToolResult(t, "toolu_denied")
	const reason = `fluidbox denied (policy, rule no-denied): denied by rule "no-denied"`
	if !tr.IsError || !strings.Contains(tr.Content, reason) {
		t.Errorf("tool_result the model received = %+v, want is_error with %q", tr, reason)
	}
	if !strings.Contains(res.Result, reason) {
		t.Errorf("result = %q, want the model's echo of %q", res.Result, reason)
	}
	if exists(dir, "denied.txt") {
		t.Error("denied.txt exists: the denied command ran")
	}
	v := s.Ledger(t, r)
	if got := v.Decisions["toolu_denied"]; got.Decision != vocab.Deny || got.Source != "policy" || got.RuleID != "no-denied" || v.Requested["toolu_denied"] != "Bash" {
		t.Errorf("ledger: tool.requested %q, tool.decision %+v; want Bash, deny by policy rule no-denied", v.Requested["toolu_denied"], got)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestPolicyAllowed: an allowed command runs; the ledger shows the call
// and a reservation reconciled for each model request, and the run's
// budget shows the spend.
func TestPolicyAllowed(t *testing.T) {
	t.Parallel()
	s := newStack(t, call("toolu_allowed", "Bash", bash("touch allowed.txt")), scriptedmodel.SayText("done"))
	r := s.NewRun(t, governed, nil)
	dir := project(t, nil)
	res := s.claude(t, r, dir, "create allowed.txt", cliOpts{})

	if len(res.PermissionDenials) != 0 || res.IsError || res.Result != "done" {
		t.Errorf("result = %q (is_error %v), permission_denials = %+v; want done and none", res.Result, res.IsError, res.PermissionDenials)
	}
	if tr := s.ToolResult(t, "toolu_allowed"); tr.IsError {
		t.Errorf("tool_result = %+v, want success", tr)
	}
	if !exists(dir, "allowed.txt") {
		t.Error("allowed.txt does not exist: the allowed command did not run")
	}
	v := s.Ledger(t, r)
	if got := v.Decisions["toolu_allowed"]; got.Decision != vocab.Allow || got.RuleID != "touch" || v.Requested["toolu_allowed"] != "Bash" {
		t.Errorf("ledger: tool.requested %q, tool.decision %+v; want Bash, allow by rule touch", v.Requested["toolu_allowed"], got)
	}
	if v.Count["tool.requested"] != 1 || v.Count["tool.decision"] != 1 {
		t.Errorf("ledger has %d tool.requested, %d tool.decision; want exactly one each (one tool call)", v.Count["tool.requested"], v.Count["tool.decision"])
	}
	s.CheckModelTraffic(t, r, v)
	t.Logf("ledger: %s", strings.Join(v.Types, " "))
	ses, err := s.Admin.Session(context.Background(), r.ID)
	if err != nil || ses.Budget.SpentUSD <= 0 || ses.Budget.ReservedUSD != 0 {
		t.Errorf("budget after the run = %+v, %v; want money spent and nothing left reserved", ses.Budget, err)
	}
	t.Logf("budget: %+v", ses.Budget)
}

// TestApproval: a require_approval command holds the CLI in the hook until
// a human decides; approved through the CLI (`fluidbox approve`) it runs,
// denied through the API it does not, and unanswered it expires to deny.
func TestApproval(t *testing.T) {
	t.Parallel()
	t.Run("approved with fluidbox approve", approvedWithCLI)
	t.Run("denied through the API", deniedThroughAPI)
	t.Run("unanswered expires to deny", unansweredExpires)
}

// approvedWithCLI: approved through the CLI (`fluidbox approve`), the held
// command runs and the ledger shows it allowed through the approval.
func approvedWithCLI(t *testing.T) {
	t.Parallel()
	s, r, dir, done := startWaiting(t, "touch approved.txt")
	apr := s.pending(t, r, done)
	if apr.RuleID != "ask" || apr.ToolName != "Bash" || !strings.Contains(string(apr.Input), "touch approved.txt") {
		t.Errorf("pending approval = %+v, want Bash touch approved.txt by rule ask", apr)
	}
	if exists(dir, "approved.txt") {
		t.Fatal("approved.txt exists before anyone approved")
	}
	cmd := exec.Command(filepath.Join(fluidboxDir, "fluidbox"), "approve", apr.ID)
	cmd.Env = []string{"FLUIDBOX_URL=" + s.API.URL, "FLUIDBOX_ADMIN_TOKEN=" + adminToken}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fluidbox approve %s: %v\n%s", apr.ID, err, out)
	}
	t.Logf("fluidbox approve: %s", strings.TrimSpace(string(out)))
	res := finish(t, done)
	if len(res.PermissionDenials) != 0 || !exists(dir, "approved.txt") {
		t.Errorf("after approval: permission_denials %+v, approved.txt exists %v; want none and true", res.PermissionDenials, exists(dir, "approved.txt"))
	}
	if tr := s.ToolResult(t, "toolu_waiting"); tr.IsError {
		t.Errorf("tool_result = %+v, want success", tr)
	}
	v := s.Ledger(t, r)
	if got := v.Decisions["toolu_waiting"]; got.Decision != vocab.Allow || got.ApprovalID != apr.ID {
		t.Errorf("tool.decision = %+v, want allow through %s", got, apr.ID)
	}
	if v.Count["approval.requested"] != 1 || v.Count["approval.decided"] != 1 {
		t.Errorf("ledger %v, want one approval.requested and one approval.decided", v.Types)
	}
	s.CheckModelTraffic(t, r, v)
}

// deniedThroughAPI: denied through the API, the held command does not run.
func deniedThroughAPI(t *testing.T) {
	t.Parallel()
	s, r, dir, done := startWaiting(t, "touch approved.txt")
	apr := s.pending(t, r, done)
	got, err := s.Admin.Decide(context.Background(), apr.ID, vocab.ChoiceDenied, "not today")
	if err != nil || got.Applied == nil || !*got.Applied {
		t.Fatalf("POST /v1/approvals/%s/decision denied = %+v, %v", apr.ID, got, err)
	}
	s.checkRefused(t, r, finish(t, done), dir, "approved.txt", "approval")
}

// checkRefused: the held call (toolu_waiting) was refused by source: the
// CLI counts it denied, its tool result is fluidbox's denial, file does
// not exist (the command did not run), and the ledger says so.
func (s *stack) checkRefused(t *testing.T, r run, res cliResult, dir, file, source string) {
	t.Helper()
	if _, ok := res.denied()["toolu_waiting"]; !ok {
		t.Errorf("permission_denials = %+v, want toolu_waiting", res.PermissionDenials)
	}
	if tr := s.ToolResult(t, "toolu_waiting"); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied ("+source) {
		t.Errorf("tool_result = %+v, want is_error with fluidbox's %s denial", tr, source)
	}
	if exists(dir, file) {
		t.Errorf("%s exists: the refused command ran", file)
	}
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_waiting"]; d.Decision != vocab.Deny || d.Source != source {
		t.Errorf("tool.decision = %+v, want deny by %s", d, source)
	}
	s.CheckModelTraffic(t, r, v)
}

// unansweredExpires: unanswered, the approval expires to deny.
func unansweredExpires(t *testing.T) {
	t.Parallel()
	s, r, dir, done := startWaiting(t, "touch unanswered.txt")
	s.checkRefused(t, r, finish(t, done), dir, "unanswered.txt", "approval_expired")
	apprs, err := s.Admin.SessionApprovals(context.Background(), r.ID)
	if err != nil || len(apprs) != 1 || apprs[0].Status != vocab.ApprovalExpired {
		t.Errorf("run's approvals = %+v, %v; want one, expired", apprs, err)
	}
}

type cliDone chan struct {
	res cliResult
	err error
}

// startWaiting starts the CLI on a run whose model calls Bash with command
// (id toolu_waiting) and then echoes the tool result.
func startWaiting(t *testing.T, command string) (*stack, run, string, cliDone) {
	t.Helper()
	s := newStack(t, call("toolu_waiting", "Bash", bash(command)), scriptedmodel.SayToolResult())
	r := s.NewRun(t, governed, nil)
	dir := project(t, nil)
	runCLI := s.start(t, r, dir, "run "+command, cliOpts{})
	done := make(cliDone, 1)
	go func() {
		res, err := runCLI()
		done <- struct {
			res cliResult
			err error
		}{res, err}
	}()
	return s, r, dir, done
}

func finish(t *testing.T, done cliDone) cliResult {
	t.Helper()
	d := <-done
	if d.err != nil {
		t.Fatal(d.err)
	}
	t.Logf("claude -p (%s): subtype %s, %d permission denials, result %q", d.res.elapsed.Round(time.Millisecond), d.res.Subtype, len(d.res.PermissionDenials), d.res.Result)
	return d.res
}

// pending waits for the run's pending approval while the CLI is held.
func (s *stack) pending(t *testing.T, r run, done cliDone) client.Approval {
	t.Helper()
	deadline := time.Now().Add(cliTimeout)
	for time.Now().Before(deadline) {
		select {
		case d := <-done:
			t.Fatalf("the CLI finished before anyone decided: %+v %v", d.res, d.err)
		default:
		}
		list, err := s.Admin.SessionApprovals(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if a.Status == vocab.ApprovalPending {
				ses, err := s.Admin.Session(context.Background(), r.ID)
				if err != nil || ses.Status != vocab.AwaitingApproval {
					t.Errorf("run while the hook waits = %+v, %v; want awaiting_approval", ses, err)
				}
				return a
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no pending approval appeared")
	return client.Approval{}
}

// TestReadOnlyRun: a read_only run refuses every write and execution, even
// under a policy that allows everything, while reads still work.
func TestReadOnlyRun(t *testing.T) {
	t.Parallel()
	const allowAll = `{"name":"allow-all","default_verdict":"allow","rules":[]}`
	dir := project(t, map[string]string{"notes.md": "original\n"})
	s := newStack(t,
		call("toolu_bash", "Bash", bash("touch ro-bash.txt")),
		then("toolu_write", "Write", map[string]any{"file_path": filepath.Join(dir, "ro-write.txt"), "content": "x\n"}),
		then("toolu_read", "Read", map[string]any{"file_path": filepath.Join(dir, "notes.md")}),
		then("toolu_edit", "Edit", map[string]any{"file_path": filepath.Join(dir, "notes.md"), "old_string": "original", "new_string": "changed"}),
		then("toolu_fetch", "WebFetch", map[string]any{"url": "http://127.0.0.1:9/", "prompt": "summarize"}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, allowAll, map[string]any{"trust_tier": "read_only"})
	res := s.claude(t, r, dir, "try to change things", cliOpts{})

	denied := res.denied()
	v := s.Ledger(t, r)

	for _, id := range []string{"toolu_bash", "toolu_write", "toolu_edit", "toolu_fetch"} {
		if _, ok := denied[id]; !ok {
			t.Errorf("%s is not in permission_denials %+v", id, res.PermissionDenials)
		}
		if d := v.Decisions[id]; d.Decision != vocab.Deny || d.Source != "trust_tier" {
			t.Errorf("%s: tool.decision %+v, want deny by trust_tier", id, d)
		}
		if tr := s.ToolResult(t, id); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied (trust_tier") {
			t.Errorf("%s: tool_result %+v, want is_error with fluidbox's trust_tier denial", id, tr)
		}
	}
	if d := v.Decisions["toolu_read"]; d.Decision != vocab.Allow {
		t.Errorf("Read: tool.decision %+v, want allow (a read_only run may read)", d)
	}
	if tr := s.ToolResult(t, "toolu_read"); tr.IsError || !strings.Contains(tr.Content, "original") {
		t.Errorf("Read: tool_result %+v, want the file's content", tr)
	}
	for _, f := range []string{"ro-bash.txt", "ro-write.txt"} {
		if exists(dir, f) {
			t.Errorf("%s exists in a read_only run", f)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(b) != "original\n" {
		t.Errorf("notes.md = %q after a read_only run, want it unchanged", b)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestReadOnlyRunGitDiff: Bash's class is decided per call, so a read_only
// run's Claude Code can run git diff (read-only by the catalogue), and is
// refused git push, with the tier named; the remote receives nothing.
func TestReadOnlyRunGitDiff(t *testing.T) {
	t.Parallel()
	const allowAll = `{"name":"allow-all","default_verdict":"allow","rules":[]}`
	dir := project(t, map[string]string{"notes.md": "original\n"})
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitRun("init", "-q", "--bare", remote)
	gitRun("init", "-q")
	gitRun("add", "notes.md")
	gitRun("commit", "-qm", "first")
	gitRun("remote", "add", "origin", remote)
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("changed by the pull request\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStack(t,
		call("toolu_diff", "Bash", bash("git diff")),
		then("toolu_push", "Bash", bash("git push origin HEAD:main")),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, allowAll, map[string]any{"trust_tier": "read_only"})
	res := s.claude(t, r, dir, "review the change", cliOpts{})
	v := s.Ledger(t, r)

	if d := v.Decisions["toolu_diff"]; d.Decision != vocab.Allow {
		t.Errorf("git diff: tool.decision %+v, want allow (read-only by the catalogue)", d)
	}
	if tr := s.ToolResult(t, "toolu_diff"); tr.IsError || !strings.Contains(tr.Content, "changed by the pull request") {
		t.Errorf("git diff: tool_result %+v, want the diff", tr)
	}
	if _, ok := res.denied()["toolu_push"]; !ok {
		t.Errorf("git push is not in permission_denials %+v", res.PermissionDenials)
	}
	if d := v.Decisions["toolu_push"]; d.Decision != vocab.Deny || d.Source != "trust_tier" {
		t.Errorf("git push: tool.decision %+v, want deny by trust_tier", d)
	}
	if tr := s.ToolResult(t, "toolu_push"); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied (trust_tier") || !strings.Contains(tr.Content, "read_only") {
		t.Errorf("git push: tool_result %+v, want is_error with fluidbox's read_only denial", tr)
	}
	refs, err := os.ReadDir(filepath.Join(remote, "refs", "heads"))
	if err != nil || len(refs) != 0 {
		t.Errorf("remote refs/heads = %v (%v), want empty: the push ran", refs, err)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestDangerouslyDisableSandbox: Bash's dangerouslyDisableSandbox reaches
// the gate as a field a policy matches (match.input
// /dangerouslyDisableSandbox): the same command runs sandboxed and is
// refused unsandboxed.
func TestDangerouslyDisableSandbox(t *testing.T) {
	t.Parallel()
	s := newStack(t,
		call("toolu_unsandboxed", "Bash", map[string]any{"command": "touch unsandboxed.txt", "description": "Create a file", "dangerouslyDisableSandbox": true}),
		then("toolu_sandboxed", "Bash", map[string]any{"command": "touch sandboxed.txt", "description": "Create a file"}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, governed, nil)
	dir := project(t, nil)
	res := s.claude(t, r, dir, "create two files", cliOpts{})

	if d, ok := res.denied()["toolu_unsandboxed"]; !ok || d.ToolInput["dangerouslyDisableSandbox"] != true {
		t.Errorf("permission_denials = %+v, want toolu_unsandboxed with dangerouslyDisableSandbox true", res.PermissionDenials)
	}
	if tr := s.ToolResult(t, "toolu_unsandboxed"); !tr.IsError || !strings.Contains(tr.Content, "rule no-unsandboxed") {
		t.Errorf("tool_result = %+v, want is_error naming rule no-unsandboxed", tr)
	}
	if exists(dir, "unsandboxed.txt") || !exists(dir, "sandboxed.txt") {
		t.Errorf("unsandboxed.txt exists %v, sandboxed.txt exists %v; want false, true", exists(dir, "unsandboxed.txt"), exists(dir, "sandboxed.txt"))
	}
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_unsandboxed"]; d.Decision != vocab.Deny || d.RuleID != "no-unsandboxed" {
		t.Errorf("toolu_unsandboxed: tool.decision %+v, want deny by rule no-unsandboxed", d)
	}
	if d := v.Decisions["toolu_sandboxed"]; d.Decision != vocab.Allow || d.RuleID != "touch" {
		t.Errorf("toolu_sandboxed: tool.decision %+v, want allow by rule touch", d)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestFluidboxDown: the control plane's API goes away after the first
// tool call (the model proxy, on its own listener, keeps answering): the
// hook denies the next call and nothing runs. And when the hook cannot even
// start, Claude Code's own permission mode (dontAsk, from the README's
// settings) refuses the call: no answer from fluidbox is never a yes.
func TestFluidboxDown(t *testing.T) {
	t.Parallel()
	t.Run("API down mid-run", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, call("toolu_first", "Bash", bash("touch first.txt")))
		s.Model.Append(
			func(req scriptedmodel.Request) scriptedmodel.Reply {
				s.API.Close() // fluidbox's API is gone from here on
				return scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: "toolu_second", Name: "Bash", Input: bash("touch second.txt")}}
			},
			scriptedmodel.SayToolResult(),
		)
		r := s.NewRun(t, governed, nil)
		dir := project(t, nil)
		res := s.claude(t, r, dir, "create two files", cliOpts{})

		if !exists(dir, "first.txt") {
			t.Error("first.txt does not exist: the call before the outage did not run")
		}
		if exists(dir, "second.txt") {
			t.Error("second.txt exists: a call ran while fluidbox was down")
		}
		if _, ok := res.denied()["toolu_second"]; !ok || len(res.PermissionDenials) != 1 {
			t.Errorf("permission_denials = %+v, want only toolu_second", res.PermissionDenials)
		}
		if tr := s.ToolResult(t, "toolu_second"); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied this call") {
			t.Errorf("tool_result = %+v, want is_error with the hook's fail-closed reason", tr)
		} else {
			t.Logf("the model was told: %s", tr.Content)
		}
		// The ledger is read through the other listener on the same store.
		admin, err := client.New(s.Proxy.URL, adminToken)
		if err != nil {
			t.Fatal(err)
		}
		s.Admin = admin
		v := s.Ledger(t, r)
		if _, ok := v.Requested["toolu_second"]; ok {
			t.Error("toolu_second reached the ledger, though fluidbox was down")
		}
		if d := v.Decisions["toolu_first"]; d.Decision != vocab.Allow {
			t.Errorf("toolu_first: tool.decision %+v, want allow", d)
		}
		s.CheckModelTraffic(t, r, v)
	})
	t.Run("hook cannot start", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, call("toolu_nohook", "Bash", bash("touch nohook.txt")), scriptedmodel.SayToolResult())
		r := s.NewRun(t, governed, nil)
		dir := project(t, nil)
		// No fluidbox on PATH: the hook command is not found.
		res := s.claude(t, r, dir, "create nohook.txt", cliOpts{path: "/usr/bin:/bin"})
		if _, ok := res.denied()["toolu_nohook"]; !ok {
			t.Errorf("permission_denials = %+v, want toolu_nohook", res.PermissionDenials)
		}
		if exists(dir, "nohook.txt") {
			t.Error("nohook.txt exists: the call ran without a hook answer")
		}
		t.Logf("the model was told: %s", s.ToolResult(t, "toolu_nohook").Content)
		if v := s.Ledger(t, r); v.Count["tool.requested"] != 0 {
			t.Errorf("ledger %v: a tool call reached fluidbox without the hook", v.Types)
		}
	})
}
