package slackbot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/render"
	"github.com/fluidbox/fluidbox/shared/store"
)

// The run.halted message: the model proxy ended a run whose tool result
// answered a call the gate did not allow with that input. It has no
// buttons (nothing is left to decide: the run is over) and is posted once
// per run, under a claim of its own (haltMessageKey), where the run's
// approvals are announced.

// haltMessageKey is the Slack message record of runID's halt: beside the
// approvals' records, in the partitions the Slack function may write.
func haltMessageKey(runID string) string { return "halt_" + runID }

// HaltBlocks is a halt's message.
func HaltBlocks(h notify.HaltDetail) ([]slack.Block, string) {
	head := "Run halted: a tool ran without the gate's allowing it"
	why := map[string]string{
		"unasked":        "The gate was never asked about this call, yet the runner sent its result to the model (a hook missing from the settings, or a runner that does not ask).",
		"input_mismatch": "The gate allowed this call id with another tool or input than the model asked for.",
		"denied_result":  "The gate did not allow this call, yet the runner sent a result as if it had run.",
	}[h.Reason]
	if why == "" {
		why = "The tool result did not answer a call the gate allowed."
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(plain(why+" Nothing more of this run reaches the model, and its session token is refused."), []*slack.TextBlockObject{
			plain("Run: " + render.Line(h.SessionID)),
			plain("Tool call: " + render.Line(h.ToolCallID)),
			plain("Reason: " + render.Line(h.Reason)),
			plain("At: " + render.Line(h.HaltedAt)),
		}, nil),
		slack.NewContextBlock("", plain("See the run's timeline: fluidbox events "+render.Line(h.SessionID))),
	}
	return blocks, head + " · " + render.Line(h.SessionID)
}

// ShowHalt posts a halt's message, once: a delivery after the first finds
// the claim and changes nothing.
func (n *Notifier) ShowHalt(ctx context.Context, h notify.HaltDetail) error {
	key := haltMessageKey(h.SessionID)
	now := n.now()
	at := store.FormatTime(now)
	err := n.st.ClaimSlackMessage(ctx, key, at, store.FormatTime(now.Add(-claimStale)))
	if errors.Is(err, store.ErrSlackMessageClaimed) {
		if m, gerr := n.st.GetSlackMessage(ctx, key); gerr == nil && m.TS != "" {
			return nil // posted already
		}
		return ErrBusy
	}
	if err != nil {
		return err
	}
	to, err := n.channelFor(ctx, store.Approval{ID: key, RunID: h.SessionID})
	if err == nil {
		blocks, text := HaltBlocks(h)
		var channel, ts string
		channel, ts, err = n.api.PostMessageContext(ctx, to, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false))
		if err == nil {
			n.log.InfoContext(ctx, "slack halt message posted", "run", h.SessionID)
			return n.st.PutSlackMessage(ctx, store.SlackMessage{ApprovalID: key, Channel: channel, TS: ts, Status: "halted", ClaimedAt: at})
		}
		err = fmt.Errorf("slackbot: post halt of %s: %w", h.SessionID, err)
	}
	if derr := n.st.DeleteSlackMessage(ctx, key); derr != nil {
		n.log.ErrorContext(ctx, "slackbot: drop claim after a failed post", "run", h.SessionID, "err", derr)
	}
	return err
}

// HaltObserver is the dev server's feed of halts: each is posted in the
// background, retried with Retry's pauses.
func (n *Notifier) HaltObserver() func(context.Context, store.Halted) {
	return func(_ context.Context, h store.Halted) {
		d := notify.HaltDetail{SessionID: h.RunID, ToolCallID: h.ToolCallID, Reason: h.Reason, HaltedAt: h.At}
		go func() {
			for attempt := 0; ; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := n.ShowHalt(ctx, d)
				cancel()
				if err == nil || attempt == len(n.Retry) {
					if err != nil {
						n.log.Error("slackbot: giving up on a halt message", "run", h.RunID, "err", err)
					}
					return
				}
				time.Sleep(n.Retry[attempt])
			}
		}()
	}
}
