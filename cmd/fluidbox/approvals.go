package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
)

// approvals lists the pending approvals: `fluidbox approvals [--json]`.
func approvals(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approvals", stderr, "approvals [--json] [--url URL] [--token TOKEN]")
	f := addAPIFlags(fs, getenv)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	list, err := c.Approvals(ctx)
	if err != nil {
		return explain(err)
	}
	if f.json {
		if list == nil {
			list = []client.Approval{}
		}
		return writeJSON(stdout, map[string]any{"approvals": list})
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(stdout, "no pending approvals")
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tRUN\tTOOL\tINPUT\tRULE\tLEFT")
	for _, a := range list {
		rule := a.RuleID
		if rule == "" {
			rule = "(default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(a.ID, 40), clean(a.SessionID, 40), clean(a.ToolName, 40),
			inputSummary(a.Input, 60), clean(rule, 30), timeLeft(a.ExpiresAt, now))
	}
	return tw.Flush()
}

// approve settles an approval: `fluidbox approve ID [--session]`.
func approve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approve", stderr, "approve APPROVAL_ID [--session] [--reason TEXT] [--json]")
	session := fs.Bool("session", false, "approve for the rest of the run (approved_session) instead of this call once")
	return decide(ctx, fs, args, getenv, stdout, func() string {
		if *session {
			return client.ApprovedSession
		}
		return client.ApprovedOnce
	})
}

// denyApproval settles an approval as denied: `fluidbox deny ID`.
func denyApproval(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deny", stderr, "deny APPROVAL_ID [--reason TEXT] [--json]")
	return decide(ctx, fs, args, getenv, stdout, func() string { return client.Denied })
}

// decide parses the arguments of approve or deny and settles one approval.
// It succeeds when the approval ends as asked, whoever settled it (a
// double-click is fine); otherwise it says what settled it first.
func decide(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, stdout io.Writer, decision func() string) error {
	f := addAPIFlags(fs, getenv)
	reason := fs.String("reason", "", "a note kept with the decision")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		fs.Usage()
		return fmt.Errorf("want exactly one approval id (apr_...), got %d arguments", len(pos))
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	want := decision()
	a, err := c.Decide(ctx, pos[0], want, *reason)
	if err != nil {
		return explain(err)
	}
	applied := a.Applied != nil && *a.Applied
	if f.json {
		if err := writeJSON(stdout, a); err != nil {
			return err
		}
	} else if applied {
		fmt.Fprintf(stdout, "%s %s: applied (run %s, %s %s)\n", clean(a.ID, 40), clean(a.Status, 20),
			clean(a.SessionID, 40), clean(a.ToolName, 40), inputSummary(a.Input, 60))
	}
	if applied || a.Status == want {
		if !applied && !f.json {
			fmt.Fprintf(stdout, "%s was already %s (by %s at %s)\n", clean(a.ID, 40), clean(a.Status, 20), clean(a.DecidedBy, 60), clock(a.DecidedAt))
		}
		return nil
	}
	by := ""
	if a.DecidedBy != "" {
		by = fmt.Sprintf(" by %s at %s", clean(a.DecidedBy, 60), clock(a.DecidedAt))
	}
	return fmt.Errorf("not applied: %s was already %s%s", clean(a.ID, 40), clean(a.Status, 20), by)
}
