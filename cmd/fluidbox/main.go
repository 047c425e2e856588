// Command fluidbox is the local control plane (`fluidbox dev`), the CLI for
// the humans who decide approvals and read timelines, and the Claude Code
// hook that asks the gate before every tool call.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: fluidbox <command> [arguments]

commands:
  dev                       run the local control plane on 127.0.0.1 (what "make run" starts)
  dynamodb [--addr A]       serve the local DynamoDB API alone, so dev can restart and keep its data;
                            --chaos conflict=0.2,throttle=0.05 fails requests as DynamoDB does under load
  approvals                 list pending approvals: run, tool, input, rule, time left
  approvals show ID         one approval whole: the call (a Write as its file, an Edit as its diff), what each decision allows
  approve ID [--session]    approve one call once, or for the rest of its run
  deny ID [--reason TEXT]   deny a pending call, telling the agent why
  events RUN [--follow]     a run's timeline; --follow streams it, resuming exactly
  hook claude-code          a Claude Code PreToolUse hook: asks the gate, answers allow/deny

approvals, approve, deny and events take --json (for scripts), --url (FLUIDBOX_URL,
default http://127.0.0.1:8080) and --token (FLUIDBOX_ADMIN_TOKEN). The hook reads
FLUIDBOX_URL, FLUIDBOX_SESSION_ID, FLUIDBOX_SESSION_TOKEN and FLUIDBOX_HOOK_TIMEOUT_SECONDS.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command and returns the process's exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "dev":
		err = dev(ctx, args[1:], getenv, stdout, stderr)
	case "dynamodb":
		err = dynamodb(ctx, args[1:], stdout, stderr)
	case "hook":
		return hook(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "approvals":
		err = approvals(ctx, args[1:], getenv, stdout, stderr)
	case "approve":
		err = approve(ctx, args[1:], getenv, stdout, stderr)
	case "deny":
		err = denyApproval(ctx, args[1:], getenv, stdout, stderr)
	case "events":
		err = events(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "fluidbox: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fluidbox %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
