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
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/render"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// inputWidth is how much of an input the approvals table shows.
const inputWidth = 60

// approvals lists the caller's inbox, every page of it, with the total,
// and the links upstreams asked them to open (input requests) beside it:
// `fluidbox approvals [--json]`; shows one whole: `fluidbox approvals show
// ID` (an approval, apr_..., or an input request, inp_...); or answers an
// input request: `fluidbox approvals done|decline ID`. Signed in as a
// member, the inbox is the calls on their own personal connections; as an
// approver, admin or the operator, the shared calls (and their own
// personal ones).
func approvals(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "show":
			return showApproval(ctx, args[1:], getenv, stdout, stderr)
		case elicitation.DecisionDone, elicitation.DecisionDecline:
			return answerInput(ctx, args[0], args[1:], getenv, stdout, stderr)
		}
	}
	fs := newFlagSet("approvals", stderr, "approvals [--json] [--url URL] [--token TOKEN] | approvals show ID | approvals done|decline INPUT_REQUEST_ID")
	f := addAPIFlags(fs, getenv)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	list, err := c.Approvals(ctx)
	if err != nil {
		return explain(err)
	}
	inputs, err := c.InputRequests(ctx)
	if err != nil {
		return explain(err)
	}
	if f.json {
		if list == nil {
			list = []client.Approval{}
		}
		return f.write(stdout, map[string]any{"approvals": list, "total": len(list), "input_requests": inputs})
	}
	now := time.Now()
	if err := printApprovals(stdout, list, now); err != nil {
		return err
	}
	return printInputs(stdout, inputs, now)
}

// printApprovals is the approvals' table and total, or that there are none.
func printApprovals(stdout io.Writer, list []client.Approval, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(stdout, "no pending approvals")
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tRUN\tTOOL\tINPUT\tRULE\tLEFT")
	cut := 0
	for _, a := range list {
		rule := a.RuleID
		if rule == "" {
			rule = "(default)"
		}
		in := inputCell(a)
		if in.Cut() {
			cut++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(a.ID, 40), clean(a.SessionID, 40), clean(a.ToolName, 40),
			cellText(in), clean(rule, 30), timeLeft(a.ExpiresAt, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "%d pending\n", len(list)); err != nil {
		return err
	}
	var err error
	if cut > 0 {
		_, err = fmt.Fprintf(stdout, "%d inputs cut at %d characters ([+N] says how many are hidden): `fluidbox approvals show ID` prints one whole, with what each decision allows\n", cut, inputWidth)
	}
	return err
}

// linkWidth is how much of a link the input requests' table shows.
const linkWidth = 60

// printInputs is the input requests' table, after the approvals', when
// there are any: each link without its query (`approvals show` prints the
// link to open whole).
func printInputs(stdout io.Writer, inputs []client.InputRequest, now time.Time) error {
	if len(inputs) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nINPUT REQUEST\tRUN\tSERVER\tTOOL\tLINK\tLEFT")
	for _, r := range inputs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(r.ID, 40), clean(r.SessionID, 40), clean(r.Server, 30), clean(r.ToolName, 40),
			cellText(render.Clip(render.Line(r.Link), linkWidth, 1)), timeLeft(r.ExpiresAt, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "%d links to open: `fluidbox approvals show ID` prints one's link whole; open it, finish there, then `fluidbox approvals done ID` (or `decline ID` to refuse the call)\n", len(inputs))
	return err
}

// inputCell is an approval's input as the table shows it: the rendered
// summary, cut to inputWidth. A list leaves out an input over its bound
// and sends its first bytes (input_preview): the cell shows those, and
// always says it is cut.
func inputCell(a client.Approval) render.Clipped {
	if len(a.Input) == 0 && a.InputTruncated {
		c := render.Clip(render.Line(a.InputPreview), inputWidth, 1)
		if !c.Cut() {
			c.HiddenChars = max(a.InputSize-len(a.InputPreview), 1)
		}
		return c
	}
	return render.Clip(render.Call(a.ToolName, a.Input).Summary, inputWidth, 1)
}

func cellText(c render.Clipped) string {
	if !c.Cut() {
		return c.Text
	}
	return fmt.Sprintf("%s…[+%d]", c.Text, c.HiddenChars)
}

// showApproval prints one approval whole: the call as rendered for a
// human (a Write as its file, an Edit as its diff, every hidden character
// escaped), its rule, run and times, and what each decision allows.
func showApproval(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approvals show", stderr, "approvals show ID [--json] [--url URL] [--token TOKEN]")
	f := addAPIFlags(fs, getenv)
	id, err := parseOneArg(fs, args, "approval id (apr_...) or input request id (inp_...)")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if strings.HasPrefix(id, "inp_") {
		r, err := c.InputRequest(ctx, id)
		if err != nil {
			return explain(err)
		}
		if f.json {
			return f.write(stdout, r)
		}
		_, err = io.WriteString(stdout, describeInput(r, time.Now()))
		return err
	}
	a, err := c.Approval(ctx, id)
	if err != nil {
		return explain(err)
	}
	if f.json {
		return f.write(stdout, a)
	}
	_, err = io.WriteString(stdout, describeApproval(a, time.Now()))
	return err
}

// describeInput is `approvals show` of an input request as text: the link
// to open whole (escaped, with its query: the upstream's page needs it),
// said plainly not to be opened when it is no http or https link.
func describeInput(r client.InputRequest, now time.Time) string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-17s %s\n", k, v) }
	line("input request", render.Line(r.ID))
	line("run", render.Line(r.SessionID))
	line("tool", render.Line(r.ToolName))
	line("connection", render.Line(r.Server)+" ("+render.Line(r.ConnectionID)+")")
	line("status", render.Line(r.Status))
	line("requested", clock(r.RequestedAt))
	pending := r.Status == string(elicitation.Pending)
	if pending {
		line("expires", clock(r.ExpiresAt)+" ("+timeLeft(r.ExpiresAt, now)+" left, then the call is refused)")
	}
	if r.DecidedBy != "" {
		line("answered", render.Line(r.DecidedBy)+" at "+clock(r.DecidedAt))
	}
	link := r.URL
	if link == "" {
		link = r.Link
	}
	line("link", render.Line(link))
	if _, ok := slackbot.Openable(link); !ok {
		line("", "not an http or https link fluidbox offers to open: do not open it")
	}
	if pending {
		id := render.Line(r.ID)
		fmt.Fprintf(&b, "\nfluidbox approvals done %s\n  you opened the link and finished there; the call runs again\n", id)
		fmt.Fprintf(&b, "fluidbox approvals decline %s\n  refuses the call; the agent is told so\n", id)
	}
	return b.String()
}

// answerInput answers one input request: `fluidbox approvals done|decline
// ID`. It succeeds when the request ends as asked, whoever answered it;
// otherwise it says what settled it first.
func answerInput(ctx context.Context, decision string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approvals "+decision, stderr, "approvals "+decision+" INPUT_REQUEST_ID [--json] [--url URL] [--token TOKEN]")
	f := addAPIFlags(fs, getenv)
	id, err := parseOneArg(fs, args, "input request id (inp_...)")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	r, err := c.AnswerInput(ctx, id, decision)
	if err != nil {
		return explain(err)
	}
	applied := r.Applied != nil && *r.Applied
	want := elicitation.Completed
	if decision == elicitation.DecisionDecline {
		want = elicitation.Declined
	}
	if f.json {
		if err := f.write(stdout, r); err != nil {
			return err
		}
	} else if applied {
		fmt.Fprintf(stdout, "%s %s: applied (run %s, %s)\n", clean(r.ID, 40), clean(r.Status, 20), clean(r.SessionID, 40), clean(r.Server, 30))
	}
	if applied || r.Status == string(want) {
		if !applied && !f.json {
			fmt.Fprintf(stdout, "%s was already %s (by %s at %s)\n", clean(r.ID, 40), clean(r.Status, 20), clean(r.DecidedBy, 60), clock(r.DecidedAt))
		}
		return nil
	}
	by := ""
	if r.DecidedBy != "" {
		by = fmt.Sprintf(" by %s at %s", clean(r.DecidedBy, 60), clock(r.DecidedAt))
	}
	return fmt.Errorf("not applied: %s was already %s%s", clean(r.ID, 40), clean(r.Status, 20), by)
}

// describeApproval is `approvals show` as text.
func describeApproval(a client.Approval, now time.Time) string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-17s %s\n", k, v) }
	rule := render.Line(a.RuleID)
	if rule == "" {
		rule = "(the policy's default verdict)"
	}
	line("approval", render.Line(a.ID))
	line("run", render.Line(a.SessionID))
	line("tool", render.Line(a.ToolName))
	line("rule", rule)
	if f := a.Review; f != nil {
		if len(f.Rule) > 0 {
			line("rule (as frozen)", render.Value(f.Rule))
		} else {
			line("rule", "none matched; the policy's default verdict is "+render.Line(f.DefaultVerdict))
		}
		if f.Reason != "" {
			line("why asked", render.Line(f.Reason))
		}
		line("policy", render.Line(f.Policy))
		line("trust tier", render.Line(f.TrustTier))
		if f.Trigger != "" {
			line("trigger", render.Line(f.Trigger))
		}
		if f.Repository != "" {
			line("repository", render.Line(f.Repository))
		}
		if f.PullRequest != 0 {
			pr := fmt.Sprintf("#%d", f.PullRequest)
			if f.HeadRepository != "" {
				pr += " from " + render.Line(f.HeadRepository)
			}
			if f.Fork {
				pr += " (a fork)"
			}
			line("pull request", pr)
		}
		if f.Invoker != "" {
			line("invoked by", render.Line(f.Invoker))
		}
	}
	line("status", render.Line(string(a.Status)))
	line("requested", clock(a.RequestedAt))
	if a.Status == vocab.ApprovalPending {
		line("expires", clock(a.ExpiresAt)+" ("+timeLeft(a.ExpiresAt, now)+" left)")
	}
	if a.DecidedBy != "" {
		line("decided", render.Line(a.DecidedBy)+" at "+clock(a.DecidedAt))
	}
	if a.Reason != "" {
		line("reason", render.Line(a.Reason))
	}
	if a.InputTruncated {
		line("input", fmt.Sprintf("kept cut for display: the whole input is %d bytes, digest %s", a.InputSize, render.Line(a.InputDigest)))
	}
	v := render.Call(a.ToolName, a.Input)
	b.WriteString("\n")
	for _, sec := range v.Sections {
		fmt.Fprintf(&b, "%s:\n", sec.Label)
		for _, l := range strings.Split(sec.Text, "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	if a.Status == vocab.ApprovalPending {
		sc := render.Scope(a.ScopeKey, a.SessionID, a.DefaultScope)
		id := render.Line(a.ID)
		b.WriteString("\n")
		fmt.Fprintf(&b, "fluidbox approve %s\n  %s\n", id, sc.Once)
		if sc.RunOK {
			fmt.Fprintf(&b, "fluidbox approve %s --session\n  %s\n", id, sc.Run)
		} else {
			fmt.Fprintf(&b, "approve for run\n  %s\n", sc.Run)
		}
		fmt.Fprintf(&b, "fluidbox deny %s --reason TEXT\n  %s\n", id, sc.Deny)
	}
	return b.String()
}

// approve settles an approval: `fluidbox approve ID [--session]`.
func approve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("approve", stderr, "approve APPROVAL_ID [--session] [--reason TEXT] [--json]")
	session := fs.Bool("session", false, "approve for the rest of the run (approved_session) instead of this call once")
	return decide(ctx, fs, args, getenv, stdout, func() vocab.Choice {
		if *session {
			return vocab.ChoiceApprovedSession
		}
		return vocab.ChoiceApprovedOnce
	})
}

// denyApproval settles an approval as denied: `fluidbox deny ID`.
func denyApproval(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deny", stderr, "deny APPROVAL_ID [--reason TEXT] [--json]")
	return decide(ctx, fs, args, getenv, stdout, func() vocab.Choice { return vocab.ChoiceDenied })
}

// decide parses the arguments of approve or deny and settles one approval.
// It succeeds when the approval ends as asked, whoever settled it (a
// double-click is fine); otherwise it says what settled it first.
func decide(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string, stdout io.Writer, decision func() vocab.Choice) error {
	f := addAPIFlags(fs, getenv)
	reason := fs.String("reason", "", "a note kept with the decision")
	id, err := parseOneArg(fs, args, "approval id (apr_...)")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	want := decision()
	a, err := c.Decide(ctx, id, want, *reason)
	if err != nil {
		return explain(err)
	}
	applied := a.Applied != nil && *a.Applied
	if f.json {
		if err := f.write(stdout, a); err != nil {
			return err
		}
	} else if applied {
		fmt.Fprintf(stdout, "%s %s: applied (run %s, %s %s)\n", clean(a.ID, 40), clean(string(a.Status), 20),
			clean(a.SessionID, 40), clean(a.ToolName, 40), cellText(inputCell(a)))
	}
	if applied || want.Settles(a.Status) {
		if !applied && !f.json {
			fmt.Fprintf(stdout, "%s was already %s (by %s at %s)\n", clean(a.ID, 40), clean(string(a.Status), 20), clean(a.DecidedBy, 60), clock(a.DecidedAt))
		}
		return nil
	}
	by := ""
	if a.DecidedBy != "" {
		by = fmt.Sprintf(" by %s at %s", clean(a.DecidedBy, 60), clock(a.DecidedAt))
	}
	return fmt.Errorf("not applied: %s was already %s%s", clean(a.ID, 40), clean(string(a.Status), 20), by)
}
