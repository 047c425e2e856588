package slackbot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/review"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// ErrBusy: another worker is posting the same message; try again later.
var ErrBusy = errors.New("slackbot: message being posted by another worker")

// claimStale is how long a claim to post may stay unfinished before
// another worker takes it over (its holder died mid-post).
const claimStale = time.Minute

// Poster is the part of the Slack Web API the Notifier uses: messages, and
// the users to send a personal call's message to.
type Poster interface {
	UserInfo
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	UpdateMessageContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, string, error)
}

var _ Poster = (*slack.Client)(nil)

// Notifier keeps one Slack message per approval in step with the
// approval's committed state.
type Notifier struct {
	api     Poster
	st      *store.Store
	channel string
	// users finds the Slack user a personal call's message goes to.
	users *Directory
	log   *slog.Logger
	now   func() time.Time
	// Retry paces the in-process retries of Observer; tests shorten it.
	Retry []time.Duration
}

// NewNotifier returns a Notifier posting to channel, and a personal
// connection's calls to their owner directly.
func NewNotifier(api Poster, st *store.Store, channel string, log *slog.Logger, now func() time.Time) *Notifier {
	return &Notifier{api: api, st: st, channel: channel, users: NewDirectory(api, st, nil, 0, now), log: log, now: now,
		Retry: []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}}
}

// WithUsers gives the Notifier the explicit Slack user mapping
// (FLUIDBOX_SLACK_USERS), which it asks first for a personal call's owner,
// as the interactions do for a clicker. It returns n.
func (n *Notifier) WithUsers(explicit map[string]string) *Notifier {
	n.users.explicit = explicit
	return n
}

// errNoRecipient: a personal call's owner has no Slack user fluidbox can
// vouch for, so its message goes nowhere (it waits in the owner's inbox).
var errNoRecipient = errors.New("slackbot: the owner of this personal call has no Slack user to send it to")

// Show brings approvalID's message in line with the approval as committed
// now: it posts the message if there is none, and updates it (removing
// its buttons) once the approval is settled. Calling it again changes
// nothing, so every delivery of a notification may call it.
func (n *Notifier) Show(ctx context.Context, approvalID string) error {
	a, err := n.st.GetApprovalByID(ctx, approvalID)
	if err != nil {
		return fmt.Errorf("slackbot: read approval %s: %w", approvalID, err)
	}
	f, err := review.Load(ctx, n.st, a)
	if err != nil {
		return err
	}
	return n.keep(ctx, shown{
		kind: "approval", route: a, status: string(a.Status), pendingAs: string(vocab.ApprovalPending),
		blocks: func(now time.Time) ([]slack.Block, string) { return Blocks(a, f, now) },
		again:  func(ctx context.Context) error { return n.Show(ctx, approvalID) },
	})
}

// shown is one message as its subject (an approval, an input request)
// stands committed now.
type shown struct {
	kind string // in log lines: "approval", "input_request"
	// route is where the message goes (channelFor): its ID keys the
	// message record.
	route store.Approval
	// status is where the subject stands, pendingAs the status it has
	// while pending.
	status, pendingAs string
	blocks            func(now time.Time) ([]slack.Block, string)
	// again shows the subject anew, read again.
	again func(ctx context.Context) error
}

// keep posts m's message if there is none, and updates it once m is
// settled; a settled message never goes back to pending.
func (n *Notifier) keep(ctx context.Context, m shown) error {
	rec, err := n.st.GetSlackMessage(ctx, m.route.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return n.post(ctx, m)
	case err != nil:
		return err
	case rec.TS == "":
		if rec.ClaimedAt < store.FormatTime(n.now().Add(-claimStale)) {
			return n.post(ctx, m)
		}
		return ErrBusy
	case rec.Status != m.pendingAs || m.status == m.pendingAs:
		// Already showing the settled state, or nothing has changed.
		return nil
	}
	blocks, text := m.blocks(n.now())
	if _, _, _, err := n.api.UpdateMessageContext(ctx, rec.Channel, rec.TS, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false)); err != nil {
		return fmt.Errorf("slackbot: update message of %s: %w", m.route.ID, err)
	}
	rec.Status = m.status
	if err := n.st.PutSlackMessage(ctx, rec); err != nil {
		return err
	}
	n.log.InfoContext(ctx, "slack message updated", m.kind, m.route.ID, "status", m.status)
	return nil
}

func (n *Notifier) post(ctx context.Context, m shown) error {
	now := n.now()
	at := store.FormatTime(now)
	id := m.route.ID
	err := n.st.ClaimSlackMessage(ctx, id, at, store.FormatTime(now.Add(-claimStale)))
	if errors.Is(err, store.ErrSlackMessageClaimed) {
		return ErrBusy
	}
	if err != nil {
		return err
	}
	to, err := n.channelFor(ctx, m.route)
	if err != nil {
		if derr := n.st.DeleteSlackMessage(ctx, id); derr != nil {
			n.log.ErrorContext(ctx, "slackbot: drop claim after a failed read", m.kind, id, "err", derr)
		}
		if errors.Is(err, errNoRecipient) {
			// Nothing to retry: nobody else may see or decide it.
			n.log.InfoContext(ctx, "slack message not sent: a personal call's owner has no Slack user fluidbox can vouch for; it waits in their inbox", m.kind, id)
			return nil
		}
		return err
	}
	blocks, text := m.blocks(now)
	channel, ts, err := n.api.PostMessageContext(ctx, to, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false))
	if err != nil {
		if derr := n.st.DeleteSlackMessage(ctx, id); derr != nil {
			n.log.ErrorContext(ctx, "slackbot: drop claim after a failed post", m.kind, id, "err", derr)
		}
		return fmt.Errorf("slackbot: post message of %s: %w", id, err)
	}
	if err := n.st.PutSlackMessage(ctx, store.SlackMessage{ApprovalID: id, Channel: channel, TS: ts, Status: m.status, ClaimedAt: at}); err != nil {
		return err
	}
	n.log.InfoContext(ctx, "slack message posted", m.kind, id, "status", m.status)
	if m.status == m.pendingAs {
		// Settled while we posted? Show it now rather than at the next
		// delivery.
		return m.again(ctx)
	}
	return nil
}

// channelFor is where approval a is announced. A call on a personal
// connection goes to its owner alone, the run's invoker, as a direct
// message: nobody else may decide it, and its input is the owner's
// business, so no channel sees it (errNoRecipient when the owner has no
// Slack user). Any other goes to the channel its run's trigger names, else
// the configured one. A trigger deleted since falls back to the configured
// channel; any other failed read is an error (and retried), so a throttled
// read never sends a message elsewhere.
func (n *Notifier) channelFor(ctx context.Context, a store.Approval) (string, error) {
	h, err := n.st.GetHead(ctx, a.RunID)
	if err != nil {
		return "", fmt.Errorf("slackbot: run of %s: %w", a.ID, err)
	}
	if a.Personal {
		user, err := n.users.SlackUser(ctx, h.Invoker)
		if errors.Is(err, ErrUnknownUser) || errors.Is(err, ErrInactive) {
			return "", errNoRecipient
		}
		if err != nil {
			return "", fmt.Errorf("slackbot: owner of %s: %w", a.ID, err)
		}
		return user, nil
	}
	if h.GitHub == nil || h.GitHub.TriggerID == "" {
		return n.channel, nil
	}
	t, err := n.st.GetTrigger(ctx, h.GitHub.TriggerID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return n.channel, nil
	case err != nil:
		return "", fmt.Errorf("slackbot: trigger of %s: %w", a.ID, err)
	case t.SlackChannel != "":
		return t.SlackChannel, nil
	}
	return n.channel, nil
}

// HandleEvent is the Lambda entry point: one EventBridge notification
// (approval.requested, approval.decided, input.requested, input.settled or
// run.halted from source fluidbox). An error makes Lambda deliver it again.
func (n *Notifier) HandleEvent(ctx context.Context, ev events.EventBridgeEvent) error {
	if ev.Source == notify.Source && ev.DetailType == string(notify.RunHalted) {
		var h notify.HaltDetail
		if err := json.Unmarshal(ev.Detail, &h); err != nil || !ids.Valid("ses_", h.SessionID) {
			n.log.ErrorContext(ctx, "slackbot: undecodable notification skipped", "id", ev.ID)
			return nil
		}
		return n.ShowHalt(ctx, h)
	}
	if ev.Source == notify.Source && (ev.DetailType == string(notify.InputRequested) || ev.DetailType == string(notify.InputSettled)) {
		var d notify.InputDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil || !ids.Valid("inp_", d.InputRequestID) {
			n.log.ErrorContext(ctx, "slackbot: undecodable notification skipped", "id", ev.ID)
			return nil
		}
		if err := n.ShowInput(ctx, d.InputRequestID); err != nil {
			n.log.ErrorContext(ctx, "slackbot: show input request failed; Lambda retries", "input_request", d.InputRequestID, "err", err)
			return err
		}
		return nil
	}
	if ev.Source != notify.Source || (ev.DetailType != string(notify.Requested) && ev.DetailType != string(notify.Decided)) {
		n.log.WarnContext(ctx, "slackbot: event ignored", "source", ev.Source, "detail_type", ev.DetailType)
		return nil
	}
	var d notify.Detail
	if err := json.Unmarshal(ev.Detail, &d); err != nil || !ids.Valid("apr_", d.ApprovalID) {
		n.log.ErrorContext(ctx, "slackbot: undecodable notification skipped", "id", ev.ID)
		return nil
	}
	if err := n.Show(ctx, d.ApprovalID); err != nil {
		n.log.ErrorContext(ctx, "slackbot: show approval failed; Lambda retries", "approval", d.ApprovalID, "err", err)
		return err
	}
	return nil
}

// failedInvocation is the record Lambda sends an asynchronous invocation's
// on-failure destination once its retries are exhausted or the event grew
// too old: the event as it was invoked, and why it failed (read only to
// log it).
type failedInvocation struct {
	RequestContext struct {
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	RequestPayload json.RawMessage `json:"requestPayload"`
}

// HandleRetries is the Lambda entry point for the retry queue, the
// on-failure destination of HandleEvent's asynchronous invocations: each
// message names a notification whose message Lambda's own retries could
// not show. Each is shown again (as the approval stands now, so a late one
// is harmless); one that fails again is reported as a batch item failure,
// which SQS delivers again after the queue's visibility timeout and, past
// its receive limit, moves to the dead-letter queue. A message that is no
// failure record is logged and dropped: showing it can never succeed.
func (n *Notifier) HandleRetries(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, m := range ev.Records {
		var f failedInvocation
		var inner events.EventBridgeEvent
		if err := json.Unmarshal([]byte(m.Body), &f); err != nil || len(f.RequestPayload) == 0 || json.Unmarshal(f.RequestPayload, &inner) != nil {
			n.log.ErrorContext(ctx, "slackbot: retry queue message is no failed notification; dropped", "message_id", m.MessageId)
			continue
		}
		n.log.InfoContext(ctx, "slackbot: retrying a notification", "message_id", m.MessageId, "id", inner.ID,
			"condition", f.RequestContext.Condition, "invocations", f.RequestContext.ApproximateInvokeCount, "receives", m.Attributes["ApproximateReceiveCount"])
		if err := n.HandleEvent(ctx, inner); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

// Invoke is the Slack function's one Lambda entry point: a batch from the
// retry queue (records from aws:sqs) goes to HandleRetries, anything else
// is an EventBridge notification for HandleEvent.
func (n *Notifier) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if json.Unmarshal(payload, &probe) == nil && len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs" {
		var ev events.SQSEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("slackbot: decode retry batch: %w", err)
		}
		return n.HandleRetries(ctx, ev)
	}
	var ev events.EventBridgeEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		n.log.ErrorContext(ctx, "slackbot: undecodable invocation skipped")
		return nil, nil
	}
	return nil, n.HandleEvent(ctx, ev)
}

// Observer is the dev server's feed: each committed transition shows its
// approval in the background, retried with Retry's pauses, so Slack never
// delays the transition that caused it.
func (n *Notifier) Observer() approval.Observer {
	return func(_ context.Context, before, after store.Approval) {
		if len(notify.Entries(before, after)) == 0 {
			return
		}
		go n.showRetrying("approval", after.ID, n.Show)
	}
}

// InputObserver is Observer for input requests.
func (n *Notifier) InputObserver() elicitation.Observer {
	return func(_ context.Context, before, after store.InputRequest) {
		if len(notify.InputEntries(before, after)) == 0 {
			return
		}
		go n.showRetrying("input request", after.ID, n.ShowInput)
	}
}

// showRetrying shows the item of kind id, retried with Retry's pauses.
func (n *Notifier) showRetrying(kind, id string, show func(context.Context, string) error) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := show(ctx, id)
		cancel()
		if err == nil {
			return
		}
		if attempt == len(n.Retry) {
			n.log.Error("slackbot: giving up on a message", "item", kind, "id", id, "attempts", attempt+1, "err", err)
			return
		}
		n.log.Warn("slackbot: show "+kind+" failed; retrying", "item", kind, "id", id, "attempt", attempt+1, "err", err)
		time.Sleep(n.Retry[attempt])
	}
}
