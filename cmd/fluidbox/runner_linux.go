package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go/middleware"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/launcher"
	"github.com/fluidbox/fluidbox/shared/runner"
	"github.com/fluidbox/fluidbox/shared/store"
)

const runnerEnv = `  FLUIDBOX_URL                 the control plane (--url overrides it)
  FLUIDBOX_MODEL_URL           the model proxy's base, when not the control plane's (AWS: the stack's ModelProxyUrl)
  FLUIDBOX_RUN_ID              the run (--run overrides it)
  FLUIDBOX_LAUNCH_CREDENTIAL   the run's launch credential, when not in --credential-file
  FLUIDBOX_LAUNCH_SECRET       the AWS launcher's launch secret (--launch-secret): the run, prompt, timeout and credential
  FLUIDBOX_PROMPT              the prompt, when --prompt is not given
`

// runnerCmd is `fluidbox runner`: run one run's agent (shared/runner).
// It makes itself undumpable first, so no process of another user, nor
// one of its own that it did not start, can read its memory or
// /proc/<pid>/environ, where the launch credential may have arrived.
func runnerCmd(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("runner", e.stderr, "runner --run ID [flags]")
	apiURL := fs.String("url", e.getenv("FLUIDBOX_URL"), "the control plane")
	modelURL := fs.String("model-url", e.getenv("FLUIDBOX_MODEL_URL"), "the model proxy's base URL (default: the control plane's)")
	runID := fs.String("run", e.getenv("FLUIDBOX_RUN_ID"), "the run (ses_...)")
	credFile := fs.String("credential-file", "", "a file holding the launch credential; read, then deleted")
	prompt := fs.String("prompt", e.getenv("FLUIDBOX_PROMPT"), "the prompt for claude -p")
	claude := fs.String("claude", "claude", "the Claude Code CLI")
	workdir := fs.String("workdir", "/workspace", "where the workspace is unpacked")
	home := fs.String("home", "/home/agent", "the agent's HOME")
	agentUser := fs.String("user", "agent", "the unprivileged user the agent runs as")
	timeout := fs.Int("timeout", 3600, "seconds the agent may run before it is killed and the run ended (timeout)")
	settings := fs.String("managed-settings", runner.ManagedSettingsPath, "where Claude Code's managed settings are written")
	secret := fs.String("launch-secret", e.getenv("FLUIDBOX_LAUNCH_SECRET"), "on AWS: the Secrets Manager secret holding the launch (run, prompt, timeout, credential), read with the task's identity and deleted before anything else")
	layoutOnly := fs.Bool("layout", false, "make the sandbox's directories (--workdir and --home for --user, the managed settings' directory) and exit: the runner image's build step")
	sandbox := fs.String("sandbox-unix", "", "inside the local launcher's namespaces: reach the control plane through this unix socket (loopback is brought up, /etc/claude-code is made private)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *layoutOnly {
		return layout(*agentUser, *workdir, *home, *settings)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("runner: make the process undumpable: %w", errno)
	}
	var cred auth.Token
	if *secret != "" {
		if *credFile != "" {
			return usagef("--launch-secret and --credential-file are two launchers' ways; give one")
		}
		sm, err := launchSecrets(e.getenv)
		if err != nil {
			return err
		}
		l, err := launcher.TakeSecret(ctx, sm, *secret)
		if err != nil {
			return err
		}
		*runID, *prompt, *timeout, cred = l.RunID, l.Prompt, l.TimeoutSeconds, l.Credential
	} else {
		var err error
		if cred, err = launchCredential(*credFile, e.getenv); err != nil {
			return err
		}
	}
	var problems []string
	if *runID == "" {
		problems = append(problems, "--run (or FLUIDBOX_RUN_ID) is required")
	}
	if *prompt == "" {
		problems = append(problems, "--prompt (or FLUIDBOX_PROMPT) is required")
	}
	if *apiURL == "" && *sandbox == "" {
		problems = append(problems, "--url (or FLUIDBOX_URL) is required")
	}
	if *timeout < 60 || *timeout > 86400 {
		problems = append(problems, "--timeout must be 60 to 86400 seconds")
	}
	u, err := user.Lookup(*agentUser)
	if err != nil {
		problems = append(problems, fmt.Sprintf("--user %q: no such user", *agentUser))
	}
	if len(problems) > 0 {
		return usagef("%s", strings.Join(problems, "; "))
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	claudePath, err := exec.LookPath(*claude)
	if err != nil {
		return fmt.Errorf("runner: the Claude Code CLI %q: %w", *claude, err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if *sandbox != "" {
		url, err := launcher.EnterSandbox(ctx, *sandbox)
		if err != nil {
			return err
		}
		*apiURL = url
		if *modelURL == "" {
			*modelURL = url
		}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	out, err := runner.Run(ctx, runner.Config{
		APIURL: *apiURL, ModelURL: *modelURL, RunID: *runID, Credential: cred,
		Claude: claudePath, Fluidbox: self, Prompt: *prompt,
		Workdir: *workdir, Home: *home, ManagedSettings: *settings,
		UID: uid, GID: gid, Timeout: time.Duration(*timeout) * time.Second,
		Path: filepath.Dir(claudePath) + ":" + filepath.Dir(self) + ":/usr/local/bin:/usr/bin:/bin",
		Log:  log,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "run %s ended: %s, exit status %d\n", *runID, out.Reason, out.ExitStatus)
	return nil
}

// layout makes the sandbox's directories for the agent's user and exits
// (runner.Layout): the runner image runs it at build.
func layout(agentUser, workdir, home, settings string) error {
	u, err := user.Lookup(agentUser)
	if err != nil {
		return usagef("--user %q: no such user", agentUser)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || gid == 0 {
		return runner.ErrRoot
	}
	return runner.Layout{Workdir: workdir, Home: home, SettingsDir: filepath.Dir(settings), UID: uid, GID: gid}.Make()
}

// launchSecrets is the Secrets Manager client of a runner on AWS, with the
// task role's credentials from the container credentials endpoint ECS
// serves the task (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI), or, outside
// ECS, the AWS_ACCESS_KEY_ID of the environment. Nothing else of the SDK's
// credential chain (files, SSO, IMDS) is consulted: missing credentials
// fail closed.
func launchSecrets(getenv func(string) string) (*secretsmanager.Client, error) {
	region := getenv("AWS_REGION")
	var creds aws.CredentialsProvider
	switch {
	case getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "":
		creds = endpointcreds.New("http://169.254.170.2" + getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"))
	case getenv("AWS_ACCESS_KEY_ID") != "":
		creds = credentials.NewStaticCredentialsProvider(getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN"))
	}
	if region == "" || creds == nil {
		return nil, errors.New("runner: --launch-secret needs AWS_REGION and the task's credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, as ECS sets them)")
	}
	return secretsmanager.New(secretsmanager.Options{
		Region:       region,
		Credentials:  aws.NewCredentialsCache(creds),
		BaseEndpoint: endpointOf(getenv("AWS_ENDPOINT_URL_SECRETS_MANAGER")),
		APIOptions:   []func(*middleware.Stack) error{store.BodyWithoutWriteTo},
	}), nil
}

func endpointOf(url string) *string {
	if url == "" {
		return nil
	}
	return &url
}

// launchCredential reads the credential from file (then deletes it, so no
// later process finds it) or from FLUIDBOX_LAUNCH_CREDENTIAL.
func launchCredential(file string, getenv func(string) string) (auth.Token, error) {
	var raw string
	switch {
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("runner: --credential-file: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, 1024))
		f.Close()
		if err != nil {
			return "", err
		}
		if err := os.Remove(file); err != nil {
			return "", fmt.Errorf("runner: delete the credential file: %w", err)
		}
		raw = strings.TrimSpace(string(b))
	default:
		raw = getenv("FLUIDBOX_LAUNCH_CREDENTIAL")
		// The agent's environment is built from nothing; this only keeps
		// the value out of anything this process starts by default.
		_ = os.Unsetenv("FLUIDBOX_LAUNCH_CREDENTIAL")
	}
	if !strings.HasPrefix(raw, auth.LaunchCredentialPrefix) {
		return "", errors.New("runner: no launch credential (--credential-file or FLUIDBOX_LAUNCH_CREDENTIAL, " + auth.LaunchCredentialPrefix + "...)")
	}
	return auth.Token(raw), nil
}
