//go:build linux

package launcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/runnertest"
	"github.com/fluidbox/fluidbox/shared/internal/smtest"
	"github.com/fluidbox/fluidbox/shared/launcher"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// The access keys the Secrets Manager stand-in sees: the launch
// function's role, and the runner task's.
const (
	launchRole = "LaunchFunction"
	taskRole   = "RunnerTaskRole"
	prefix     = "fluidbox-test/launch/"
)

// awsSteps are the launch function's steps over p's table as the Lambda
// function builds them, their table requests made in LaunchFunction's
// role of template.yaml (roles.Enforce, in runnertest.New).
func awsSteps(p *runnertest.Plane, sm *smtest.Server) *launcher.Steps {
	led := ledger.New(p.Store, time.Now, ledger.SequenceOnlyWhenRead)
	return &launcher.Steps{Runs: run.NewService(led, time.Now), Store: p.Store, Reports: report.New(led, p.Apps, time.Now),
		Secrets: sm.Client(launchRole), Prefix: prefix, Log: slog.New(slog.DiscardHandler)}
}

func asLaunch() context.Context { return roles.As(context.Background(), "LaunchFunction") }

// TestAWSLaunchSecret: Start issues the credential into a secret named by
// the run and the execution and answers only the secret's name (what the
// execution's history and the task's override show); the runner's read
// takes it (read, then deleted: a second read finds nothing) and the
// credential is good for the run's tokens once; a duplicate execution of
// the same session.created launches nothing and its Finish leaves the run
// alone; the launching execution's Finish ends the run the runner left
// open, as failed, by the launcher.
func TestAWSLaunchSecret(t *testing.T) {
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": "review the pull request", "timeout_seconds": 120})
	sm := smtest.New(t)
	steps := awsSteps(p, sm)
	h := p.Deliver(map[string]githubtest.File{"README.md": {Content: "hi\n"}})

	out, err := steps.Handle(asLaunch(), launcher.Input{Step: "start", SessionID: h.RunID, Execution: "exec-1"})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	history, _ := json.Marshal(out)
	want := launcher.StartOutput{Launched: true, Secret: prefix + h.RunID + "/exec-1", TaskTimeoutSeconds: 120 + launcher.TaskGraceSeconds}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Fatalf("start (-want +got):\n%s", diff)
	}
	if strings.Contains(string(history), auth.LaunchCredentialPrefix) {
		t.Fatalf("the step's output %s holds the credential: the execution history would show it", history)
	}
	value, ok := sm.Value(want.Secret)
	if !ok || !strings.Contains(value, auth.LaunchCredentialPrefix) {
		t.Fatalf("secret %s = %q, %v; want the launch document", want.Secret, value, ok)
	}

	// The same event delivered twice starts a second execution: it
	// launches nothing, stores nothing, and its Finish ends nothing.
	dup, err := steps.Start(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-2"})
	if err != nil || dup.Launched {
		t.Fatalf("second execution's start = %+v, %v; want not launched", dup, err)
	}
	if fin, err := steps.Finish(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-2", Error: "States.TaskFailed"}); err != nil || fin.Reason != "" {
		t.Fatalf("second execution's finish = %+v, %v; want the run left alone", fin, err)
	}

	l, err := launcher.TakeSecret(context.Background(), sm.Client(taskRole), want.Secret)
	if err != nil {
		t.Fatalf("TakeSecret: %v", err)
	}
	if l.RunID != h.RunID || l.Prompt != "review the pull request" || l.TimeoutSeconds != 120 {
		t.Errorf("launch = %s %q %d", l.RunID, l.Prompt, l.TimeoutSeconds)
	}
	if _, ok := sm.Value(want.Secret); ok {
		t.Error("the secret outlived the runner's read")
	}
	if _, err := launcher.TakeSecret(context.Background(), sm.Client(taskRole), want.Secret); err == nil {
		t.Error("a second read of the launch secret succeeded")
	}
	if st, b := p.Do("POST", "/v1/sessions/"+h.RunID+"/token", string(l.Credential), nil); st != 200 {
		t.Fatalf("token with the secret's credential = %d %s", st, b)
	}
	if st, _ := p.Do("POST", "/v1/sessions/"+h.RunID+"/token", string(l.Credential), nil); st != 409 {
		t.Errorf("second token issue = %d, want 409", st)
	}

	// The runner died holding the tokens: the task stopped, the run open.
	// Finish ends it and tells the pull request, which nobody else would.
	fin, err := steps.Handle(asLaunch(), launcher.Input{Step: "finish", SessionID: h.RunID, Execution: "exec-1"})
	if want := (launcher.FinishOutput{Reason: run.EndFailed, Reported: report.CheckRun}); err != nil || fin != want {
		t.Fatalf("finish = %+v, %v; want %+v", fin, err, want)
	}
	types, data := p.EventTypes(h.RunID)
	if want := []string{"session.created", "run.launched", "session.token_issued", "run.launch_refused", "session.ended", "run.reported"}; !cmp.Equal(types, want) {
		t.Errorf("ledger = %v, want %v", types, want)
	}
	checkFailureReported(t, p, h.RunID, "failed")
	if data["run.launched"]["launcher"] != "aws" || data["run.launched"]["by"] != "exec-1" ||
		data["session.ended"]["reason"] != "failed" || data["session.ended"]["ended_by"] != launcher.EndedBy {
		t.Errorf("run.launched %v, session.ended %v", data["run.launched"], data["session.ended"])
	}
	checkSecretCalls(t, sm)
}

// TestAWSLaunchFailures: a task that timed out ends its run as timeout and
// its unread secret is deleted; a Start that could not store the secret
// (the run launched, its credential lost) is caught and its Finish ends
// the run as failed; a run whose trigger has no prompt is not launched.
func TestAWSLaunchFailures(t *testing.T) {
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": "review", "timeout_seconds": 60})
	sm := smtest.New(t)
	steps := awsSteps(p, sm)

	h := p.Deliver(map[string]githubtest.File{"a": {Content: "1\n"}})
	if out, err := steps.Start(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-t"}); err != nil || !out.Launched {
		t.Fatalf("start = %+v, %v", out, err)
	}
	if fin, err := steps.Finish(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-t", Error: "States.Timeout"}); err != nil || fin.Reason != run.EndTimeout {
		t.Fatalf("finish after States.Timeout = %+v, %v; want timeout", fin, err)
	}
	checkFailureReported(t, p, h.RunID, "timeout")
	if names := sm.Names(); len(names) != 0 {
		t.Errorf("secrets left after finish: %v", names)
	}
	res, err := p.Store.GetResult(context.Background(), h.RunID)
	if err != nil || res.Reason != string(run.EndTimeout) || res.ExitStatus != -1 {
		t.Errorf("result = %+v, %v; want timeout, exit status -1", res, err)
	}

	// The secret's name is taken (a stale one): CreateSecret fails after
	// the run was launched.
	h2 := p.Deliver(map[string]githubtest.File{"b": {Content: "2\n"}})
	stale := prefix + h2.RunID + "/exec-f"
	if _, err := sm.Client(launchRole).CreateSecret(context.Background(), createInput(stale)); err != nil {
		t.Fatal(err)
	}
	if _, err := steps.Start(asLaunch(), launcher.Input{SessionID: h2.RunID, Execution: "exec-f"}); err == nil {
		t.Fatal("start succeeded without storing its secret")
	}
	if fin, err := steps.Finish(asLaunch(), launcher.Input{SessionID: h2.RunID, Execution: "exec-f", Error: "States.TaskFailed"}); err != nil || fin.Reason != run.EndFailed {
		t.Fatalf("finish after a failed start = %+v, %v; want failed", fin, err)
	}
	if head, err := p.Store.GetHead(context.Background(), h2.RunID); err != nil || head.Status != vocab.Ended {
		t.Errorf("run after a failed start: %+v, %v; want ended", head.Status, err)
	}
	checkFailureReported(t, p, h2.RunID, "failed")
	if _, ok := sm.Value(stale); ok {
		t.Error("finish left the execution's secret")
	}

	// Bad input names nothing.
	for _, in := range []launcher.Input{{Step: "start", SessionID: "ses_../x", Execution: "e"}, {Step: "finish", SessionID: h.RunID, Execution: "a/../b"}, {Step: "launch", SessionID: h.RunID, Execution: "e"}} {
		if _, err := steps.Handle(asLaunch(), in); err == nil {
			t.Errorf("step %+v accepted", in)
		}
	}
}

// TestAWSFinishRetriesTheReport: GitHub fails the report of a run whose
// runner died; Finish, having ended the run, fails, so the state machine
// retries it; the retry, finding the run ended, posts the report; a third
// Finish (a duplicate delivery) posts nothing more. The run is counted
// once in RunsEndedByLauncher, the metric LauncherEndedRunsAlarm reads.
func TestAWSFinishRetriesTheReport(t *testing.T) {
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": "review", "timeout_seconds": 60})
	steps := awsSteps(p, smtest.New(t))
	var metrics bytes.Buffer
	steps.Metrics = telemetry.WithCloudWatch(nil, &metrics, func(string) string { return "" })
	h := p.Deliver(map[string]githubtest.File{"a": {Content: "1\n"}})
	if out, err := steps.Start(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-r"}); err != nil || !out.Launched {
		t.Fatalf("start = %+v, %v", out, err)
	}
	in := launcher.Input{SessionID: h.RunID, Execution: "exec-r", Error: "States.TaskFailed"}
	p.GitHub.FailPosts(1)
	if fin, err := steps.Finish(asLaunch(), in); err == nil {
		t.Fatalf("finish while GitHub fails = %+v, nil; want an error, so the state machine retries", fin)
	}
	if types, _ := p.EventTypes(h.RunID); !cmp.Equal(types, []string{"session.created", "run.launched", "session.ended"}) {
		t.Errorf("ledger after the failed report = %v, want the run ended and not reported", types)
	}
	if fin, err := steps.Finish(asLaunch(), in); err != nil || fin != (launcher.FinishOutput{Reported: report.CheckRun}) {
		t.Fatalf("retried finish = %+v, %v; want the report posted and nothing ended", fin, err)
	}
	checkFailureReported(t, p, h.RunID, "failed")
	if fin, err := steps.Finish(asLaunch(), in); err != nil || fin != (launcher.FinishOutput{}) {
		t.Fatalf("third finish = %+v, %v; want nothing done", fin, err)
	}
	if posts := p.GitHub.Posts(); len(posts) != 1 {
		t.Errorf("posts = %d, want 1", len(posts))
	}
	if lines := strings.Split(strings.TrimSpace(metrics.String()), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], `"`+telemetry.MetricRunsEndedByLauncher+`"`) || !strings.Contains(lines[0], `"Reason":"failed"`) {
		t.Errorf("metrics written:\n%s\nwant one %s line, reason failed", metrics.String(), telemetry.MetricRunsEndedByLauncher)
	}
}

// TestAWSFinishWithoutTheApp: the App was removed from the repository
// while the run ran; Finish ends the run and succeeds without a report (no
// retry would post it), where a GitHub that fails is retried.
func TestAWSFinishWithoutTheApp(t *testing.T) {
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": "review", "timeout_seconds": 60})
	steps := awsSteps(p, smtest.New(t))
	h := p.Deliver(map[string]githubtest.File{"a": {Content: "1\n"}})
	if out, err := steps.Start(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-u"}); err != nil || !out.Launched {
		t.Fatalf("start = %+v, %v", out, err)
	}
	p.GitHub.Uninstall(runnertest.Repository)
	fin, err := steps.Finish(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-u", Error: "States.TaskFailed"})
	if err != nil || fin != (launcher.FinishOutput{Reason: run.EndFailed}) {
		t.Fatalf("finish without the App = %+v, %v; want the run ended, nothing reported, no error", fin, err)
	}
	if posts := p.GitHub.Posts(); len(posts) != 0 {
		t.Errorf("posts = %+v, want none", posts)
	}
}

// checkFailureReported: the pull request holds one check run of run id,
// concluded failure, whose summary gives reason and exit status -1.
func checkFailureReported(t *testing.T, p *runnertest.Plane, id, reason string) {
	t.Helper()
	var mine []githubtest.Post
	for _, post := range p.GitHub.Posts() {
		if post.Body["external_id"] == id {
			mine = append(mine, post)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("check runs of %s = %+v, want 1", id, mine)
	}
	output, _ := mine[0].Body["output"].(map[string]any)
	summary, _ := output["summary"].(string)
	if mine[0].Kind != report.CheckRun || mine[0].Body["conclusion"] != "failure" || !strings.Contains(summary, reason+", exit status -1") {
		t.Errorf("report of %s = %s, conclusion %v, summary %q; want a check run, failure, %s", id, mine[0].Kind, mine[0].Body["conclusion"], summary, reason)
	}
}

// TestAWSLaunchNeedsPrompt: a run whose trigger has no prompt waits for a
// runner started by hand; the launcher writes nothing.
func TestAWSLaunchNeedsPrompt(t *testing.T) {
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, nil)
	sm := smtest.New(t)
	h := p.Deliver(map[string]githubtest.File{"a": {Content: "1\n"}})
	out, err := awsSteps(p, sm).Start(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-1"})
	if err != nil || out.Launched || len(sm.Calls()) != 0 {
		t.Fatalf("start = %+v, %v, secrets calls %v; want nothing", out, err, sm.Calls())
	}
	if _, err := p.Store.GetLaunch(context.Background(), h.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("launch record = %v, want none", err)
	}
}

// checkSecretCalls: only the launch function creates secrets, only the
// runner's task reads them, and each read that found one is followed by
// its delete.
func checkSecretCalls(t *testing.T, sm *smtest.Server) {
	t.Helper()
	calls := sm.Calls()
	for i, c := range calls {
		switch c.Op {
		case "CreateSecret":
			if c.Key != launchRole {
				t.Errorf("%s by %s", c.Op, c.Key)
			}
		case "GetSecretValue":
			if c.Key != taskRole {
				t.Errorf("%s by %s", c.Op, c.Key)
			}
			if c.OK && (i+1 >= len(calls) || calls[i+1] != (smtest.Call{Key: taskRole, Op: "DeleteSecret", Name: c.Name, OK: true})) {
				t.Errorf("read of %s not followed by its delete: %v", c.Name, calls[i+1:])
			}
		}
	}
	if !slices.ContainsFunc(calls, func(c smtest.Call) bool { return c.Op == "GetSecretValue" && c.OK }) {
		t.Error("no secret was read")
	}
}

func createInput(name string) *secretsmanager.CreateSecretInput {
	return &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String("{}")}
}

// TestRunnerTakesLaunchSecret: `fluidbox runner` started as the runner
// image starts it on Fargate, with nothing but the secret's name and the
// task's credentials, reads and deletes the secret, runs the agent (as
// nobody, with no AWS variable and no credential but its session token in
// its environment, the runner's environ unreadable) and ends the run
// itself; the state machine's Finish then finds nothing to do.
func TestRunnerTakesLaunchSecret(t *testing.T) {
	runnertest.NeedRoot(t)
	t.Parallel()
	dir := runnertest.Sandbox(t)
	settings := filepath.Join(dir, "etc", "claude-code", "managed-settings.json")
	prompt, _ := json.Marshal(map[string]any{"settings": settings})
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": string(prompt), "timeout_seconds": 120})
	sm := smtest.New(t)
	steps := awsSteps(p, sm)
	h := p.Deliver(map[string]githubtest.File{"README.md": {Content: "hi\n"}})
	start, err := steps.Start(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-1"})
	if err != nil || !start.Launched {
		t.Fatalf("start = %+v, %v", start, err)
	}
	fluidbox := runnertest.Build(t, dir, "fluidbox", "github.com/fluidbox/fluidbox/cmd/fluidbox")
	claude := runnertest.Build(t, dir, "claude", "github.com/fluidbox/fluidbox/shared/runner/testdata/agent")
	cmd := exec.Command(fluidbox, "runner", "--claude", claude, "--user", "nobody",
		"--workdir", filepath.Join(dir, "work"), "--home", filepath.Join(dir, "home"), "--managed-settings", settings)
	// The task definition's environment and the container override.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "FLUIDBOX_URL=" + p.URL, "FLUIDBOX_LAUNCH_SECRET=" + start.Secret,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=" + taskRole, "AWS_SECRET_ACCESS_KEY=test", "AWS_ENDPOINT_URL_SECRETS_MANAGER=" + sm.URL}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fluidbox runner: %v\n%s", err, out)
	}
	res, err := p.Store.GetResult(context.Background(), h.RunID)
	if err != nil || res.Reason != string(run.EndExited) {
		t.Fatalf("result = %+v, %v; want exited", res, err)
	}
	var rep struct {
		UID           int               `json:"uid"`
		Env           map[string]string `json:"env"`
		ParentEnviron string            `json:"parent_environ"`
	}
	if err := json.Unmarshal([]byte(res.FinalMessage), &rep); err != nil {
		t.Fatalf("final message %q: %v", res.FinalMessage, err)
	}
	for k, v := range rep.Env {
		if strings.HasPrefix(k, "AWS_") || strings.Contains(v, prefix) || strings.Contains(v, auth.LaunchCredentialPrefix) || strings.Contains(v, auth.RunnerTokenPrefix) {
			t.Errorf("agent's environment holds %s=%s", k, v)
		}
	}
	if rep.UID != runnertest.Nobody || rep.ParentEnviron != "error" {
		t.Errorf("agent: uid %d, read the runner's environ: %s", rep.UID, rep.ParentEnviron)
	}
	if names := sm.Names(); len(names) != 0 {
		t.Errorf("secrets left: %v", names)
	}
	checkSecretCalls(t, sm)
	if fin, err := steps.Finish(asLaunch(), launcher.Input{SessionID: h.RunID, Execution: "exec-1"}); err != nil || fin.Reason != "" {
		t.Errorf("finish after the runner ended the run = %+v, %v; want nothing done", fin, err)
	}
	if res, _ := p.Store.GetResult(context.Background(), h.RunID); res.Reason != string(run.EndExited) {
		t.Errorf("result after finish = %s, want still exited", res.Reason)
	}
	if _, err := os.Stat(settings); err != nil {
		t.Errorf("managed settings: %v", err)
	}
}
