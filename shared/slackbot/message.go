package slackbot

import (
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/render"
	"github.com/fluidbox/fluidbox/shared/review"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Action ids of the message's buttons and the deny modal.
const (
	ActionApproveOnce    = "fluidbox_approve_once"
	ActionApproveSession = "fluidbox_approve_session"
	ActionDeny           = "fluidbox_deny"
	CallbackDeny         = "fluidbox_deny_reason"
	reasonBlock          = "reason"
	reasonInput          = "reason"
)

// Bounds that keep a message inside Slack's limits (3,000 characters a
// text object, 50 blocks a message) with room to spare.
const (
	maxSectionChars = 2500
	maxSectionLines = 40
	maxSections     = 8
	maxHeader       = 140
)

// Blocks is an approval's message as its committed state stands: pending
// with its buttons, or settled without them.
func Blocks(a store.Approval, f review.Facts, now time.Time) ([]slack.Block, string) {
	head := heading(a)
	fallback := head + " · " + render.Line(a.ID)
	blocks := []slack.Block{slack.NewHeaderBlock(plain(clip(head, maxHeader)))}
	if a.Personal {
		blocks = append(blocks, slack.NewContextBlock("", plain(clip("Only you decide this: the call runs on your personal connection "+render.Line(a.ConnectionID)+". Nobody else is shown it.", 1900))))
	}
	if len(f.Danger) > 0 && a.Status == vocab.ApprovalPending {
		warn := ":warning: Look twice before approving:"
		for _, d := range f.Danger {
			warn += "\n• " + render.Line(d)
		}
		blocks = append(blocks, slack.NewSectionBlock(plain(clip(warn, 1900)), nil, nil))
	}
	input, cut := inputBlocks(a)
	blocks = append(blocks, input...)
	if m := f.Matched; m != nil {
		blocks = append(blocks, slack.NewContextBlock("", plain(clip(fmt.Sprintf("The rule asked about part %d of %d: %s", m.Index, m.Of, render.Line(m.Text)), 1900))))
	}
	if cut {
		blocks = append(blocks, slack.NewContextBlock("", plain("Part of this input is not shown here. See it whole with `fluidbox approvals show "+render.Line(a.ID)+"` or on the approvals page before deciding.")))
	}
	blocks = append(blocks, slack.NewSectionBlock(nil, factFields(a, f, now), nil))
	if a.Status != vocab.ApprovalPending {
		return blocks, fallback
	}
	return append(blocks, decideBlocks(a, f)...), fallback
}

// heading is the message's header: what is asked, or how it was settled.
func heading(a store.Approval) string {
	tool := render.Line(a.ToolName)
	switch a.Status {
	case vocab.ApprovalPending:
		return "Approval needed: " + tool
	case vocab.ApprovedOnce:
		return "Approved once by " + render.Line(a.DecidedBy) + ": " + tool
	case vocab.ApprovedSession:
		return "Approved for the run by " + render.Line(a.DecidedBy) + ": " + tool
	case vocab.ApprovalDenied:
		return "Denied by " + render.Line(a.DecidedBy) + ": " + tool
	case vocab.ApprovalExpired:
		return "Expired (nobody decided in time, so denied): " + tool
	default:
		return render.Line(string(a.Status)) + ": " + tool
	}
}

// inputBlocks are the call's input, a labelled preformatted block per
// section (at most maxSections, each clipped), and whether any of it was
// left out.
func inputBlocks(a store.Approval) ([]slack.Block, bool) {
	var blocks []slack.Block
	v := render.Call(a.ToolName, []byte(a.Input))
	cut := false
	for i, s := range v.Sections {
		if i == maxSections {
			blocks = append(blocks, slack.NewContextBlock("", plain(fmt.Sprintf("%d more input fields not shown", len(v.Sections)-i))))
			return blocks, true
		}
		c := render.Clip(s.Text, maxSectionChars, maxSectionLines)
		text := c.Text
		if c.Cut() {
			text += "\n… " + c.Notice()
			cut = true
		}
		blocks = append(blocks,
			slack.NewContextBlock("", plain(s.Label)),
			slack.NewRichTextBlock("", &slack.RichTextPreformatted{
				Type:     slack.RTEPreformatted,
				Elements: []slack.RichTextSectionElement{slack.NewRichTextSectionTextElement(nonEmpty(text), nil)},
			}))
	}
	return blocks, cut
}

// factFields are the facts a reviewer decides by: run, policy, rule, why,
// trust tier, where the run came from, and the time left (or, settled,
// the decider's reason).
func factFields(a store.Approval, f review.Facts, now time.Time) []*slack.TextBlockObject {
	fields := []*slack.TextBlockObject{plain("Run: " + render.Line(a.RunID)), plain(clip("Policy: "+render.Line(f.Policy), 1900))}
	if len(f.Rule) > 0 {
		fields = append(fields, plain(clip("Rule: "+render.Value(f.Rule), 1900)))
	} else {
		fields = append(fields, plain("Rule: none matched; the policy's default verdict ("+render.Line(f.DefaultVerdict)+") asked"))
	}
	if f.Reason != "" {
		fields = append(fields, plain(clip("Why: "+render.Line(f.Reason), 1900)))
	}
	fields = append(fields, plain("Trust tier: "+render.Line(f.TrustTier)))
	if f.Repository != "" {
		repo := "Repository: " + render.Line(f.Repository)
		if f.PullRequest != 0 {
			repo += fmt.Sprintf(" · pull request #%d", f.PullRequest)
			if f.Fork {
				repo += " (from a fork: " + render.Line(f.HeadRepository) + ")"
			}
		}
		fields = append(fields, plain(clip(repo, 1900)))
	} else if f.Trigger != "" {
		fields = append(fields, plain("Trigger: "+render.Line(f.Trigger)))
	}
	if a.Status == vocab.ApprovalPending {
		fields = append(fields, plain("Time left: "+left(a.ExpiresAt, now)+" (then it is denied)"))
	} else if a.Reason != "" {
		fields = append(fields, plain(clip("Reason: "+render.Line(a.Reason), 1900)))
	}
	return fields
}

// decideBlocks are a pending approval's last blocks: what each decision
// allows, and its buttons.
func decideBlocks(a store.Approval, f review.Facts) []slack.Block {
	sc := render.Scope(a.ScopeKey, a.RunID, a.DefaultScope)
	what := "Approve once: " + sc.Once + "\nApprove for run: " + sc.Run + "\nDeny: " + sc.Deny
	if f.GrantCovers != "" {
		what += "\nNote: " + render.Line(f.GrantCovers) + "."
	}
	once := slack.NewButtonBlockElement(ActionApproveOnce, a.ID, plain("Approve once"))
	if len(f.Danger) == 0 {
		// On a dangerous call approving is not the primary action.
		once.Style = slack.StylePrimary
	}
	buttons := []slack.BlockElement{once}
	if sc.RunOK {
		run := slack.NewButtonBlockElement(ActionApproveSession, a.ID, plain("Approve for run"))
		run.Confirm = slack.NewConfirmationBlockObject(plain("Approve for the rest of the run?"), plain(clip(sc.Run, 290)), plain("Approve for run"), plain("Cancel"))
		buttons = append(buttons, run)
	}
	deny := slack.NewButtonBlockElement(ActionDeny, a.ID, plain("Deny…"))
	deny.Style = slack.StyleDanger
	buttons = append(buttons, deny)
	return []slack.Block{
		slack.NewSectionBlock(plain(clip(what, 2900)), nil, nil),
		slack.NewActionBlock("fluidbox_decide", buttons...),
	}
}

// DenyModal asks for a deny's reason.
func DenyModal(a store.Approval) slack.ModalViewRequest {
	input := slack.NewPlainTextInputBlockElement(plain("why, for the agent and the record"), reasonInput)
	input.Multiline = true
	input.MaxLength = 500
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		Title:           plain("Deny this call"),
		Submit:          plain("Deny"),
		Close:           plain("Cancel"),
		CallbackID:      CallbackDeny,
		PrivateMetadata: a.ID,
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(plain(clip(render.Line(a.ToolName)+": "+render.Call(a.ToolName, []byte(a.Input)).Summary, 2000)), nil, nil),
			slack.NewInputBlock(reasonBlock, plain("Reason"), nil, input),
		}},
	}
}

// ResultModal tells the decider how a deny went.
func ResultModal(text string) *slack.ModalViewRequest {
	return &slack.ModalViewRequest{
		Type:   slack.VTModal,
		Title:  plain("fluidbox"),
		Close:  plain("Close"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(plain(clip(text, 2900)), nil, nil)}},
	}
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, nonEmpty(s), false, false)
}

func nonEmpty(s string) string {
	if s == "" {
		return " "
	}
	return s
}

// clip cuts an already rendered text to n characters, saying so.
func clip(s string, n int) string {
	c := render.Clip(s, n-40, 1000)
	if !c.Cut() {
		return s
	}
	return c.Text + fmt.Sprintf("… [+%d characters]", c.HiddenChars)
}

func left(expiresAt string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, expiresAt)
	if err != nil {
		return "unknown"
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "none"
	}
	return d.String() + " (until " + t.UTC().Format("15:04:05 MST") + ")"
}
