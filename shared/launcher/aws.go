package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// AWSLauncher names the AWS launcher in run.launched and in a run's launch.
const AWSLauncher = "aws"

// TaskGraceSeconds is how much longer than its agent's timeout the state
// machine lets a runner's task run: Fargate provisioning and the image
// pull, the workspace, and ending the run. The runner kills its agent at
// the trigger's timeout itself; the state's timeout is the backstop.
const TaskGraceSeconds = 600

// Steps are the AWS launcher's two Lambda steps, around the ECS task of
// the launch state machine (infra/launch.asl.json): Start issues the
// run's launch credential and stores it as a secret only the runner's
// task role may read, Finish deletes that secret and ends the run with
// the reason when the task failed, timed out or left the run open.
//
// The credential never travels through the state machine: Start answers
// the secret's name, which is all the task's container override carries,
// so neither the execution's history nor DescribeTasks shows it, and the
// runner reads it with its task identity and deletes it at once
// (docs/architecture.md, "Launchers").
type Steps struct {
	Runs  *run.Service
	Store *store.Store
	// Reports asks for a run's report once its task is done.
	Reports *report.Service
	Secrets *secretsmanager.Client
	// Prefix starts every launch secret's name: "<stack>/launch/", the
	// path the task role may read and delete under.
	Prefix string
	Log    *slog.Logger
	// Metrics counts the runs Finish ends (RunsEndedByLauncher); nil is
	// off.
	Metrics *telemetry.Telemetry
}

// Input is a step's input, from the state machine: the step ("start" or
// "finish"), the run of session.created, the state machine's execution
// ($$.Execution.Name) and, for finish, the Step Functions error the task
// failed with (States.Timeout, States.TaskFailed, ...), "" when the task
// stopped by itself.
type Input struct {
	Step      string `json:"step"`
	SessionID string `json:"session_id"`
	Execution string `json:"execution"`
	Error     string `json:"error,omitempty"`
}

// StartOutput is what the state machine needs to run the task: never the
// credential.
type StartOutput struct {
	Launched bool `json:"launched"`
	// Secret is the launch secret's name, the task's FLUIDBOX_LAUNCH_SECRET.
	Secret string `json:"secret,omitempty"`
	// TaskTimeoutSeconds is the task state's timeout: the trigger's
	// timeout_seconds and TaskGraceSeconds.
	TaskTimeoutSeconds int `json:"task_timeout_seconds,omitempty"`
}

// FinishOutput says what Finish did.
type FinishOutput struct {
	// Reason is the end reason Finish gave the run, which was still open
	// ("" when it had ended, or was another execution's).
	Reason run.EndReason `json:"reason,omitempty"`
	// Reported is the kind of report Finish posted (check_run, comment),
	// "" when it posted none: the runner had, or there was none to post.
	Reported string `json:"reported,omitempty"`
}

// secretDoc is a launch secret's value.
type secretDoc struct {
	RunID          string `json:"run_id"`
	Credential     string `json:"credential"`
	Prompt         string `json:"prompt"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// executionName is what Step Functions allows in an execution's name and
// a secret's name can hold.
var executionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// ErrInput: a step's input names no valid run or execution.
var ErrInput = errors.New("launcher: the step's input needs a run id (ses_...) and an execution name")

func checkInput(session, execution string) error {
	if !ids.Valid("ses_", session) || !executionName.MatchString(execution) {
		return ErrInput
	}
	return nil
}

// SecretName is the launch secret of run id in execution: under prefix,
// named by both, so a retried or failed execution finds its own secret
// and no other.
func SecretName(prefix, runID, execution string) string {
	return prefix + runID + "/" + execution
}

// Handle is the launch function: the step in.Step names.
func (s *Steps) Handle(ctx context.Context, in Input) (any, error) {
	switch in.Step {
	case "start":
		return s.Start(ctx, in)
	case "finish":
		return s.Finish(ctx, in)
	}
	return nil, fmt.Errorf("launcher: no step %q (start, finish)", in.Step)
}

// Start launches in.SessionID if it is a launcher's run (Prepare): it
// issues the credential and stores it, with the prompt and the timeout,
// as the secret SecretName. A run that is not the launcher's answers
// Launched false and nothing is written.
func (s *Steps) Start(ctx context.Context, in Input) (StartOutput, error) {
	if err := checkInput(in.SessionID, in.Execution); err != nil {
		return StartOutput{}, err
	}
	h, err := s.Store.GetHead(ctx, in.SessionID)
	if err != nil {
		return StartOutput{}, fmt.Errorf("launcher: read run %s: %w", in.SessionID, err)
	}
	l, ok, err := Prepare(ctx, s.Runs, s.Store, h, AWSLauncher, in.Execution)
	if err != nil || !ok {
		s.Log.InfoContext(ctx, "launcher: not launched", "run", in.SessionID, "err", err)
		return StartOutput{}, err
	}
	doc, err := json.Marshal(secretDoc{RunID: l.RunID, Credential: string(l.Credential), Prompt: l.Prompt, TimeoutSeconds: l.TimeoutSeconds})
	if err != nil {
		return StartOutput{}, err
	}
	name := SecretName(s.Prefix, l.RunID, in.Execution)
	if _, err := s.Secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name:         aws.String(name),
		SecretString: aws.String(string(doc)),
		Description:  aws.String("fluidbox launch credential of " + l.RunID + ": read and deleted by its runner"),
	}); err != nil {
		// The run is launched with a credential nobody holds: the state
		// machine's Finish ends it.
		return StartOutput{}, fmt.Errorf("launcher: store the launch secret of %s: %w", l.RunID, err)
	}
	s.Log.InfoContext(ctx, "launcher: launched", "run", l.RunID, "execution", in.Execution)
	return StartOutput{Launched: true, Secret: name, TaskTimeoutSeconds: l.TimeoutSeconds + TaskGraceSeconds}, nil
}

// Finish runs after the task, however it went: it deletes the launch
// secret (gone already when the runner read it) and, if the run is this
// execution's or was never launched, ends it unless it has ended: with
// reason timeout after States.Timeout, failed otherwise (the task failed,
// or stopped with the run open: the runner never reached it, or died).
// Then it asks for the run's report (ReportIfDue), so the pull request
// hears of a run whose runner died; a failure to post is an error, which
// the state machine retries. A run another launcher or execution launched
// is left alone.
func (s *Steps) Finish(ctx context.Context, in Input) (FinishOutput, error) {
	if err := checkInput(in.SessionID, in.Execution); err != nil {
		return FinishOutput{}, err
	}
	if err := deleteSecret(ctx, s.Secrets, SecretName(s.Prefix, in.SessionID, in.Execution)); err != nil {
		return FinishOutput{}, err
	}
	l, err := s.Store.GetLaunch(ctx, in.SessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Start failed before launching: nobody will drive the run.
	case err != nil:
		return FinishOutput{}, err
	case l.Launcher != AWSLauncher || l.By != in.Execution:
		s.Log.InfoContext(ctx, "launcher: run launched elsewhere; left alone", "run", in.SessionID, "launcher", l.Launcher)
		return FinishOutput{}, nil
	}
	reason := run.EndFailed
	if in.Error == "States.Timeout" {
		reason = run.EndTimeout
	}
	ended, err := EndIfOpen(ctx, s.Runs, s.Store, in.SessionID, reason)
	if err != nil {
		return FinishOutput{}, err
	}
	var out FinishOutput
	if ended {
		out.Reason = reason
		s.Metrics.RunEndedByLauncher(ctx, string(reason))
	}
	if out.Reported, err = ReportIfDue(ctx, s.Reports, in.SessionID, s.Log); err != nil {
		return out, err
	}
	s.Log.InfoContext(ctx, "launcher: finished", "run", in.SessionID, "task_error", in.Error, "end_reason", out.Reason, "report", out.Reported)
	return out, nil
}

// deleteSecret deletes a launch secret at once (no recovery window: it
// holds a credential); one that does not exist is deleted already.
func deleteSecret(ctx context.Context, sm *secretsmanager.Client, name string) error {
	_, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(name), ForceDeleteWithoutRecovery: aws.Bool(true)})
	var nf *smtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("launcher: delete launch secret: %w", err)
	}
	return nil
}

// TakeSecret is the runner's side: it reads the launch secret name with
// the task's identity, deletes it before anything else happens (so no
// later process, the agent included, can read it even with the task's
// credentials), and returns the launch it holds. A secret that cannot be
// deleted is not used: the runner stops and the state machine ends the run.
func TakeSecret(ctx context.Context, sm *secretsmanager.Client, name string) (Launch, error) {
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
	if err != nil {
		return Launch{}, fmt.Errorf("launcher: read launch secret: %w", err)
	}
	if err := deleteSecret(ctx, sm, name); err != nil {
		return Launch{}, err
	}
	var doc secretDoc
	dec := json.NewDecoder(strings.NewReader(aws.ToString(out.SecretString)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return Launch{}, errors.New("launcher: the launch secret is not a launch document")
	}
	switch {
	case !ids.Valid("ses_", doc.RunID):
		return Launch{}, errors.New("launcher: the launch secret names no run")
	case !strings.HasPrefix(doc.Credential, auth.LaunchCredentialPrefix):
		return Launch{}, errors.New("launcher: the launch secret holds no launch credential")
	case doc.Prompt == "":
		return Launch{}, errors.New("launcher: the launch secret holds no prompt")
	case doc.TimeoutSeconds < 60 || doc.TimeoutSeconds > 86400:
		return Launch{}, errors.New("launcher: the launch secret's timeout is not 60 to 86400 seconds")
	}
	return Launch{RunID: doc.RunID, Prompt: doc.Prompt, TimeoutSeconds: doc.TimeoutSeconds, Credential: auth.Token(doc.Credential)}, nil
}
