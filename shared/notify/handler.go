package notify

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Handler publishes the notifications of approval transitions, from the
// table's stream (the notify function) or from the approval service's
// observer (the dev server). From the stream it also starts the expiry
// timer of each new pending approval.
type Handler struct {
	pub    Publisher
	timers approval.Scheduler
	log    *slog.Logger
	seq    Sequencer
}

// Sequencer numbers a run's pending ledger events (ledger.Ledger).
type Sequencer interface {
	Sequence(ctx context.Context, runID string) error
}

// Sequence makes the handler the runs' sequencer on the stream: each run
// whose unsequenced event (RUN#<id>/Q#...) a batch inserts is numbered
// once per batch (docs/architecture.md, "Ledger").
func (h *Handler) Sequence(s Sequencer) { h.seq = s }

// NewHandler returns a handler publishing through pub. timers starts the
// expiry timer of each new pending approval the stream carries (the notify
// function's Step Functions executions), so the functions that create
// approvals (gate, broker) need no Step Functions client or permission;
// nil starts none (the dev server, whose approval service keeps its own
// timers).
func NewHandler(pub Publisher, timers approval.Scheduler, log *slog.Logger) *Handler {
	return &Handler{pub: pub, timers: timers, log: log}
}

// Stream handles one batch of stream records: approval and input request
// rows, the insert of a run's head (session.created for a triggered run),
// and, when the handler sequences (Sequence), the insert of a run's
// unsequenced events. Other rows are skipped. When publishing fails, the answer names the first record
// not published as a batch item failure: Lambda (with
// ReportBatchItemFailures) retries the batch from that record, so nothing
// is lost and only that record onwards may be delivered twice. An approval
// or input request row that cannot be decoded is logged and skipped: retrying it cannot
// succeed and would hold up the shard. Each approval.requested starts its
// approval's expiry timer first (see schedule).
func (h *Handler) Stream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	b := h.read(ctx, ev.Records)
	// retryFrom is the first record Lambda must deliver again; -1 none.
	retryFrom := h.sequence(ctx, b)
	err := h.pub.Publish(ctx, b.entries)
	var pe *PublishError
	switch {
	case err == nil:
		h.log.InfoContext(ctx, "notify", "records", len(ev.Records), "published", len(b.entries), "sequenced", len(b.runs))
	case !errors.As(err, &pe) || pe.First < 0 || pe.First >= len(b.from):
		return resp, err
	default:
		h.log.ErrorContext(ctx, "notify: publish failed; retrying from a record", "sequence_number", ev.Records[b.from[pe.First]].Change.SequenceNumber, "published", pe.First, "err", pe.Err)
		if retryFrom < 0 || b.from[pe.First] < retryFrom {
			retryFrom = b.from[pe.First]
		}
	}
	if retryFrom >= 0 {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[retryFrom].Change.SequenceNumber})
	}
	return resp, nil
}

// batch is what a batch of stream records asks of notify.
type batch struct {
	entries []Entry
	from    []int // from[i]: the record entries[i] came from
	// runs to number, in the order of their first record (firstOf).
	runs    []string
	firstOf map[string]int
}

// read reads each record: a run to number, or the entries to publish.
func (h *Handler) read(ctx context.Context, records []events.DynamoDBEventRecord) batch {
	b := batch{firstOf: map[string]int{}}
	for i, rec := range records {
		if run, ok := UnsequencedRun(rec); ok && h.seq != nil {
			if _, seen := b.firstOf[run]; !seen {
				b.firstOf[run] = i
				b.runs = append(b.runs, run)
			}
			continue
		}
		for _, e := range h.entries(ctx, rec) {
			b.entries = append(b.entries, e)
			b.from = append(b.from, i)
		}
	}
	return b
}

// entries is what one record publishes: a halt's, a new run's, an input
// request's or an approval's change; a record that cannot be decoded is logged and
// publishes nothing.
func (h *Handler) entries(ctx context.Context, rec events.DynamoDBEventRecord) []Entry {
	if halt, ok, err := HaltFromStreamRecord(rec); ok || err != nil {
		if err != nil {
			h.log.ErrorContext(ctx, "notify: undecodable halt record skipped", "event_id", rec.EventID, "err", err)
			return nil
		}
		return HaltEntries(halt)
	}
	if head, ok, err := RunFromStreamRecord(rec); ok || err != nil {
		if err != nil {
			h.log.ErrorContext(ctx, "notify: undecodable run record skipped", "event_id", rec.EventID, "err", err)
		}
		return RunEntries(head)
	}
	if before, after, ok, err := InputFromStreamRecord(rec); ok || err != nil {
		if err != nil {
			h.log.ErrorContext(ctx, "notify: undecodable input request record skipped", "event_id", rec.EventID, "err", err)
		}
		return InputEntries(before, after)
	}
	before, after, ok, err := FromStreamRecord(rec)
	if err != nil {
		h.log.ErrorContext(ctx, "notify: undecodable approval record skipped", "event_id", rec.EventID, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	out := Entries(before, after)
	for _, e := range out {
		if e.Type == Requested {
			h.schedule(ctx, after)
		}
	}
	return out
}

// sequence numbers the batch's runs and returns the first record to
// retry from, or -1. Numbering is idempotent (a retried batch finds the
// events numbered or numbers them), so a run that fails is retried from
// its first record; readers number what is pending meanwhile.
func (h *Handler) sequence(ctx context.Context, b batch) int {
	retryFrom := -1
	for _, run := range b.runs {
		if err := h.seq.Sequence(ctx, run); err != nil {
			h.log.ErrorContext(ctx, "notify: sequence failed; retrying from a record", "run", run, "err", err)
			if retryFrom < 0 || b.firstOf[run] < retryFrom {
				retryFrom = b.firstOf[run]
			}
		}
	}
	return retryFrom
}

// schedule starts the expiry timer of a new pending approval. Starting it
// again (a batch retried from a later record) is harmless: the execution is
// named after the approval. A failure is logged, not retried: expiry does
// not depend on the timer (lazy expiry on read and the sweep expire an
// overdue approval that has none), and failing the record would hold up
// the shard's notifications.
func (h *Handler) schedule(ctx context.Context, a store.Approval) {
	if h.timers == nil {
		return
	}
	at, err := time.Parse(store.TimeLayout, a.ExpiresAt)
	if err == nil {
		err = h.timers.Schedule(ctx, a.ID, at)
	}
	if err != nil {
		h.log.ErrorContext(ctx, "notify: schedule approval expiry; lazy expiry and the sweep remain", "approval", a.ID, "err", err)
	}
}

// RunCreated publishes the notifications of a run's creation, for the dev
// server (in AWS the stream carries the head's insert). Like Observer it
// logs a failure.
func (h *Handler) RunCreated(ctx context.Context, head store.Head) {
	if err := h.pub.Publish(ctx, RunEntries(head)); err != nil {
		h.log.ErrorContext(ctx, "notify", "run", head.RunID, "err", err)
	}
}

// Halted publishes the notification of a halt, for the dev server (in AWS
// the stream carries the halt's item). Like Observer it logs a failure.
func (h *Handler) Halted(ctx context.Context, halt store.Halted) {
	if err := h.pub.Publish(ctx, HaltEntries(halt)); err != nil {
		h.log.ErrorContext(ctx, "notify", "run", halt.RunID, "err", err)
	}
}

// InputObserver is Observer for input requests.
func (h *Handler) InputObserver() elicitation.Observer {
	return func(ctx context.Context, before, after store.InputRequest) {
		if err := h.pub.Publish(ctx, InputEntries(before, after)); err != nil {
			h.log.ErrorContext(ctx, "notify", "input_request", after.ID, "err", err)
		}
	}
}

// Observer returns an approval.Observer that publishes each committed
// transition, for the dev server. It has no one to return an error to, so
// it logs it.
func (h *Handler) Observer() approval.Observer {
	return func(ctx context.Context, before, after store.Approval) {
		if err := h.pub.Publish(ctx, Entries(before, after)); err != nil {
			h.log.ErrorContext(ctx, "notify", "approval", after.ID, "err", err)
		}
	}
}
