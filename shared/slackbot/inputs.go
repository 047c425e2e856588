package slackbot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/render"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Input requests in Slack: a brokered call waits for a person to open a
// link its upstream asked for (shared/elicitation). Its message goes where
// the call's approval would (channelFor: a personal connection's to the
// run's invoker alone), names the connection as fluidbox knows it, and
// shows the link as the person must open it, with its query (the
// upstream's state, which its page needs: docs/api.md, "Input requests"),
// as literal text and, only when it is an http or https link, behind an
// Open button. Done and Decline answer it through the same service as the
// API, with the same rule of who may. Once it is settled the message is
// updated from the committed row: the link is cut to scheme, host and
// path (what the ledger keeps), and the buttons are gone.

// Action ids of an input request's buttons.
const (
	ActionInputOpen    = "fluidbox_input_open"
	ActionInputDone    = "fluidbox_input_done"
	ActionInputDecline = "fluidbox_input_decline"
)

// maxOpenURL is the longest link the Open button carries (Slack takes
// 3,000 characters; the broker keeps at most 2,048 bytes).
const maxOpenURL = 2048

// InputBlocks is an input request's message as its committed state
// stands: pending with the link and its buttons, or settled without them.
func InputBlocks(r store.InputRequest, now time.Time) ([]slack.Block, string) {
	server := render.Line(r.Server)
	pending := elicitation.State(r.Status) == elicitation.Pending
	var head string
	switch elicitation.State(r.Status) {
	case elicitation.Pending:
		head = "Link to open for " + server
	case elicitation.Completed:
		head = "Done by " + render.Line(r.DecidedBy) + ": " + server
	case elicitation.Declined:
		head = "Declined by " + render.Line(r.DecidedBy) + " (the call is refused): " + server
	case elicitation.Expired:
		head = "Expired (nobody answered in time, so the call is refused): " + server
	default:
		head = render.Line(r.Status) + ": " + server
	}
	blocks := []slack.Block{slack.NewHeaderBlock(plain(clip(head, maxHeader)))}
	if r.Personal {
		blocks = append(blocks, slack.NewContextBlock("", plain(clip("Only you answer this: the call runs on your personal connection "+render.Line(r.ConnectionID)+". Nobody else is shown it.", 1900))))
	}
	link := r.Link
	if pending {
		link = r.URL
		blocks = append(blocks, slack.NewSectionBlock(plain(clip("The connection "+server+" asks a person to open this link to finish a call of "+render.Line(r.ToolName)+
			". Open it, finish there, then press Done; Decline refuses the call.", 1900)), nil, nil))
	}
	if link == "" {
		blocks = append(blocks, slack.NewContextBlock("", plain("The link cannot be shown here.")))
	} else {
		blocks = append(blocks, slack.NewRichTextBlock("", &slack.RichTextPreformatted{
			Type:     slack.RTEPreformatted,
			Elements: []slack.RichTextSectionElement{slack.NewRichTextSectionTextElement(clip(render.Line(link), 2900), nil)},
		}))
	}
	fields := []*slack.TextBlockObject{
		plain("Run: " + render.Line(r.RunID)), plain(clip("Tool: "+render.Line(r.ToolName), 1900)),
		plain(clip("Connection: "+server+" ("+render.Line(r.ConnectionID)+")", 1900)),
	}
	if pending {
		fields = append(fields, plain("Time left: "+left(r.ExpiresAt, now)+" (then the call is refused)"))
	}
	blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	fallback := head + " · " + render.Line(r.ID)
	if !pending {
		return blocks, fallback
	}
	return append(blocks, slack.NewActionBlock("fluidbox_input", inputButtons(r)...)), fallback
}

// inputButtons are a pending request's buttons: Open (only for a link
// Openable allows), Done and Decline.
func inputButtons(r store.InputRequest) []slack.BlockElement {
	var buttons []slack.BlockElement
	if u, ok := Openable(r.URL); ok {
		open := slack.NewButtonBlockElement(ActionInputOpen, r.ID, plain("Open link"))
		open.URL = u
		buttons = append(buttons, open)
	}
	done := slack.NewButtonBlockElement(ActionInputDone, r.ID, plain("Done"))
	done.Style = slack.StylePrimary
	done.Confirm = slack.NewConfirmationBlockObject(plain("Finished at the link?"), plain("Done tells fluidbox you opened the link and finished there; the call then runs again."), plain("Done"), plain("Cancel"))
	decline := slack.NewButtonBlockElement(ActionInputDecline, r.ID, plain("Decline"))
	decline.Style = slack.StyleDanger
	decline.Confirm = slack.NewConfirmationBlockObject(plain("Decline?"), plain("The call is refused, and the agent is told so."), plain("Decline"), plain("Cancel"))
	return append(buttons, done, decline)
}

// Openable reports whether raw may be offered as a link to click, and the
// link as it is offered. The rule is the page's too (safeHref in
// shared/web/static/app.js), held to one list of cases both are tested
// against (testdata/openable.json): at most maxOpenURL bytes; no byte
// below '!', no DEL, no backslash; "http://" or "https://" (any case)
// then a host, with no user info; every '%' starting an escape (two hex
// digits); a port, if any, of at most 65535; and a URL the language's own
// parser reads. Each part closes a way two parsers read one text apart:
// a browser drops tabs, turns a backslash into a slash and takes
// "https:host" as a host. Anything else is shown as text only.
func Openable(raw string) (string, bool) {
	if raw == "" || len(raw) > maxOpenURL || strings.ContainsAny(raw, " \t\r\n\\") || !validEscapes(raw) {
		return "", false
	}
	for _, c := range raw {
		if c < 0x21 || c == 0x7f {
			return "", false
		}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return "", false
	}
	if rest == "" || strings.IndexAny(rest, "/?#") == 0 {
		return "", false // no host
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n > 65535 {
			return "", false
		}
	}
	return u.String(), true
}

// validEscapes says every '%' in s starts a two-hex-digit escape.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// ShowInput brings an input request's message in line with the request as
// committed now, as Show does for an approval.
func (n *Notifier) ShowInput(ctx context.Context, id string) error {
	r, err := n.st.GetInputRequestByID(ctx, id)
	if err != nil {
		return fmt.Errorf("slackbot: read input request %s: %w", id, err)
	}
	return n.keep(ctx, shown{
		kind: "input_request", route: store.Approval{ID: r.ID, RunID: r.RunID, Personal: r.Personal},
		status: r.Status, pendingAs: string(elicitation.Pending),
		blocks: func(now time.Time) ([]slack.Block, string) { return InputBlocks(r, now) },
		again:  func(ctx context.Context) error { return n.ShowInput(ctx, id) },
	})
}

// InputDecider is the input request service's public decision API.
type InputDecider interface {
	Decide(ctx context.Context, who auth.Principal, id, decision string) (store.InputRequest, bool, error)
}

var _ InputDecider = (*elicitation.Service)(nil)

// WithInputs lets the handler answer input requests (Done, Decline)
// through d. It returns h.
func (h *Interactions) WithInputs(d InputDecider) *Interactions {
	h.inputs = d
	return h
}

// inputAction answers an input request from a click on Done or Decline,
// as the clicker, and tells them how it went.
func (h *Interactions) inputAction(ctx context.Context, cb slack.InteractionCallback, actionID, id string) {
	decision := elicitation.DecisionDone
	if actionID == ActionInputDecline {
		decision = elicitation.DecisionDecline
	}
	if h.inputs == nil {
		h.reply(ctx, cb, "This control plane does not answer input requests from Slack; use the approvals page. Nothing was answered.")
		return
	}
	who, err := h.users.Principal(ctx, cb.User.ID)
	if err != nil {
		h.reply(ctx, cb, refusal(err))
		return
	}
	r, applied, err := h.inputs.Decide(ctx, who, id, decision)
	switch {
	case errors.Is(err, elicitation.ErrNotFound):
		h.reply(ctx, cb, "There is no input request "+id+".")
		return
	case errors.Is(err, elicitation.ErrForbidden):
		h.reply(ctx, cb, "You may not answer this input request: it needs an approver (role admin or approver), and a call on a personal connection only its owner answers.")
		return
	case err != nil:
		h.log.ErrorContext(ctx, "slack input decision", "input_request", id, "err", err)
		h.reply(ctx, cb, "fluidbox could not record the answer; nothing was answered. Try again, or use the approvals page.")
		return
	}
	h.log.InfoContext(ctx, "input request decided", "input_request", id, "run", r.RunID, "by", who.Subject, "via", "slack", "status", r.Status, "applied", applied)
	if applied {
		h.reply(ctx, cb, fmt.Sprintf("Done: %s %s (%s).", render.Line(r.ID), render.Line(r.Status), render.Line(r.Server)))
		return
	}
	s := fmt.Sprintf("Already settled: %s is %s", render.Line(r.ID), render.Line(r.Status))
	if r.DecidedBy != "" {
		s += " by " + render.Line(r.DecidedBy)
	}
	h.reply(ctx, cb, s+".")
}
