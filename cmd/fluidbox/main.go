// Command fluidbox is the local control plane (`fluidbox dev`), the CLI for
// the humans who decide approvals, read timelines and manage runs and
// triggers, and the Claude Code hook that asks the gate before every tool
// call.
//
// It is built on the standard library's flag package rather than a CLI
// framework: every command is one row of commands below (its name,
// synopsis, summary and environment), from which the usage, each
// command's --help and the bash, zsh and fish completions are all
// generated, so none of them can drift from what the commands accept.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes, the same for every command but the hook (which answers
// Claude Code in JSON and exits 0 whatever it decides).
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed: the server refused, was unreachable, or said no
	exitUsage = 2 // the command line was wrong
)

// exitCodes is every command's help footer.
const exitCodes = `exit codes:
  0  done (--help too)
  1  failed: the server is unreachable, refused the token or the request, or the outcome is not the one asked for
  2  the command line is wrong
`

// clientEnv is what every command that calls the API reads.
const clientEnv = `  FLUIDBOX_URL          the control plane (default http://127.0.0.1:8080); --url overrides it
  FLUIDBOX_ADMIN_TOKEN  the admin token or an SSO bearer; --token overrides it (the variable keeps it out of ps)
`

// cmdEnv is what a command runs with.
type cmdEnv struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one row of the CLI.
type command struct {
	name     string
	synopsis string // the arguments, after the name
	summary  string
	// environment lists the variables it reads, one "  NAME  meaning" a line.
	environment string
	// words are its subcommands and flags, for completion.
	words []string
	run   func(ctx context.Context, args []string, e cmdEnv) error
}

// commands is the CLI. A new command is a row here. It is filled in init:
// the commands' help reads it.
var commands []command

func init() {
	commands = []command{
		{name: "dev", synopsis: "", summary: "run the local control plane on 127.0.0.1 (what \"make run\" starts)",
			environment: devEnv, words: []string{"--print-webhook-secret", "--webhook-secret-file", "--launcher", "--claude"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return dev(ctx, args, e.getenv, e.stdout, e.stderr)
			}},
		{name: "dynamodb", synopsis: "[--addr A] [--chaos SPEC]", summary: "serve the local DynamoDB API alone, so dev can restart and keep its data",
			words: []string{"--addr", "--chaos"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return dynamodb(ctx, args, e.stdout, e.stderr)
			}},
		{name: "approvals", synopsis: "[show ID | done ID | decline ID] [--json]", summary: "list pending approvals and links to open, show one whole, or answer a link",
			environment: clientEnv, words: []string{"show", "done", "decline", "--json", "--jq", "--url", "--token"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return approvals(ctx, args, e.getenv, e.stdout, e.stderr)
			}},
		{name: "approve", synopsis: "ID [--session] [--reason TEXT] [--json]", summary: "approve one call once, or for the rest of its run",
			environment: clientEnv, words: []string{"--session", "--reason", "--json", "--jq", "--url", "--token"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return approve(ctx, args, e.getenv, e.stdout, e.stderr)
			}},
		{name: "deny", synopsis: "ID [--reason TEXT] [--json]", summary: "deny a pending call, telling the agent why",
			environment: clientEnv, words: []string{"--reason", "--json", "--jq", "--url", "--token"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return denyApproval(ctx, args, e.getenv, e.stdout, e.stderr)
			}},
		{name: "events", synopsis: "RUN [--follow] [--after SEQ] [--json] | export --since T [--format ndjson|ocsf]", summary: "a run's timeline; --follow streams it, resuming exactly; export writes every run's events as JSON lines",
			environment: clientEnv, words: []string{"export", "--follow", "--after", "--json", "--jq", "--since", "--format", "--url", "--token"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return events(ctx, args, e.getenv, e.stdout, e.stderr)
			}},
		{name: "runs", synopsis: "list|get|create|token ...", summary: "list runs (filters, pages), show one, create one, issue a triggered run's tokens",
			environment: clientEnv + "  FLUIDBOX_TRIGGER_KEY  runs token: a trigger's runner key, instead of the admin token\n",
			words:       []string{"list", "get", "create", "token", "--policy", "--policy-version", "--budget", "--capabilities", "--connections", "--workspace", "--tier", "--autonomous", "--shadow-policy", "--status", "--trigger", "--repository", "--since", "--until", "--limit", "--all", "--json", "--jq", "--url", "--token"},
			run:         runs},
		{name: "triggers", synopsis: "list|get|create|update|delete|send-test ...", summary: "manage trigger configurations; send-test signs a sample pull_request delivery",
			environment: clientEnv + "  FLUIDBOX_GITHUB_WEBHOOK_SECRET  send-test: the secret to sign with (--secret overrides it)\n",
			words:       []string{"list", "get", "create", "update", "delete", "send-test", "-f", "--rotate-runner-key", "--repository", "--fork", "--action", "--number", "--secret", "--delivery", "--json", "--jq", "--url", "--token"},
			run:         triggers},
		{name: "connections", synopsis: "authorize ID [--open] [--json]", summary: "print an OAuth connection's authorization URL (--open: open a browser)",
			environment: clientEnv, words: []string{"authorize", "--open", "--json", "--jq", "--url", "--token"},
			run: func(ctx context.Context, args []string, e cmdEnv) error {
				return connections(ctx, args, e.getenv, e.stdout, e.stderr)
			}},
		{name: "policy", synopsis: "list|get|create|update|eval|shadow|test|fmt|import-claude ...", summary: "list, show and store policies; decide a call against a stored policy or a file (nothing recorded), summarise a shadow policy's differences, test and format policy files offline, import Claude Code's permissions",
			environment: clientEnv, words: []string{"list", "get", "create", "update", "-f", "--all", "--cursor", "eval", "shadow", "--since", "--until", "--limit", "test", "fmt", "--check", "import-claude", "--bash-options", "-o", "--command", "--tool", "--input", "--version", "--tier", "--autonomous", "--workspace", "--cwd", "--class", "--name", "--default", "--json", "--jq", "--url", "--token"},
			run: policyCmd},
		{name: "runner", synopsis: "--run ID --prompt TEXT [flags]", summary: "run one run's agent: spend its launch credential, fetch its workspace, run Claude Code as an unprivileged user under managed settings, end the run",
			environment: runnerEnv, words: []string{"--url", "--model-url", "--run", "--credential-file", "--prompt", "--claude", "--workdir", "--home", "--user", "--timeout", "--managed-settings", "--sandbox-unix"},
			run: runnerCmd},
		// hook's run is nil: run calls hook itself, which returns its own code.
		{name: "hook", synopsis: "claude-code", summary: "a Claude Code PreToolUse hook: asks the gate, answers allow/deny",
			environment: hookEnv, words: []string{"claude-code"}},
		{name: "version", synopsis: "[--json]", summary: "the module version and commit this binary was built from",
			words: []string{"--json", "--jq"}, run: version},
		{name: "completion", synopsis: "bash|zsh|fish", summary: "print a shell completion script",
			words: []string{"bash", "zsh", "fish"}, run: completion},
		{name: "help", synopsis: "[COMMAND]", summary: "this text, or a command's", words: nil},
	}
}

const devEnv = `  FLUIDBOX_ADDR                   listen address (default 127.0.0.1:8080; keep it on loopback)
  FLUIDBOX_ADMIN_TOKEN            the admin token (generated and printed when unset)
  FLUIDBOX_GITHUB_WEBHOOK_SECRET  the GitHub webhook secret; --print-webhook-secret generates and prints one when unset
  AWS_ENDPOINT_URL_DYNAMODB       a DynamoDB to use (fluidbox dynamodb); unset, one is embedded in memory
  FLUIDBOX_TABLE, FLUIDBOX_PRICES_FILE, FLUIDBOX_KMS_KEY_ID, FLUIDBOX_MODEL_UPSTREAM_URL, FLUIDBOX_MODEL_UPSTREAM_KEY,
  FLUIDBOX_UPSTREAM_TOOLS_TTL_SECONDS, FLUIDBOX_SLACK_*  see the README's Configuration
`

const hookEnv = `  FLUIDBOX_URL                   the control plane
  FLUIDBOX_SESSION_ID            the run (ses_...) the hook asks for
  FLUIDBOX_SESSION_TOKEN         that run's session token
  FLUIDBOX_HOOK_TIMEOUT_SECONDS  total wait for a decision before denying (default 540; keep it below the hook's timeout)
`

// hookExit is the hook's own footer: it never fails Claude Code's call open.
const hookExit = `exit codes:
  0  an answer was printed (allow or deny; every failure is a deny with its reason)
  2  the command line is wrong, or the answer could not be written (Claude Code then blocks the call)
`

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage is the top-level help.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: fluidbox <command> [arguments]    (fluidbox <command> --help for one command)\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s %s\n      %s\n", c.name, c.synopsis, c.summary)
	}
	b.WriteString("\nenvironment (every command that calls the API):\n" + clientEnv + "\n" + exitCodes)
	return b.String()
}

// commandHelp is one command's --help: its synopsis, environment and exit
// codes (flags follow, from its flag set, when it has one).
func commandHelp(c command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: fluidbox %s %s\n\n%s\n", c.name, c.synopsis, c.summary)
	if c.environment != "" {
		b.WriteString("\nenvironment:\n" + c.environment)
	}
	if c.name == "hook" {
		b.WriteString("\n" + hookExit)
	} else {
		b.WriteString("\n" + exitCodes)
	}
	return b.String()
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command and returns the process's exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	if isHelp(args[0]) {
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				fmt.Fprint(stdout, commandHelp(c))
				return exitOK
			}
		}
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "fluidbox: unknown command %q\n\n%s", args[0], usage())
		return exitUsage
	}
	e := cmdEnv{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 2 && isHelp(args[1]) {
		// Help goes to stdout: each command's flag set prints its help
		// (commandHelp and its flags) on what it takes as stderr.
		e.stderr = stdout
		if c.run == nil {
			fmt.Fprint(stdout, commandHelp(c))
			return exitOK
		}
	}
	if c.name == "hook" {
		if len(args) == 3 && isHelp(args[2]) { // hook claude-code --help
			fmt.Fprint(stdout, commandHelp(c))
			return exitOK
		}
		// The hook's own code answers Claude Code.
		return hook(ctx, args[1:], getenv, stdin, stdout, stderr)
	}
	err := c.run(ctx, args[1:], e)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "fluidbox %s: %v\n", args[0], err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "fluidbox %s: %v\n", args[0], err)
	return exitError
}

// usageError is a wrong command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }
