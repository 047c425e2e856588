package notify

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/approval"
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
}

// NewHandler returns a handler publishing through pub. timers starts the
// expiry timer of each new pending approval the stream carries (the notify
// function's Step Functions executions), so the functions that create
// approvals (gate, broker) need no Step Functions client or permission;
// nil starts none (the dev server, whose approval service keeps its own
// timers).
func NewHandler(pub Publisher, timers approval.Scheduler, log *slog.Logger) *Handler {
	return &Handler{pub: pub, timers: timers, log: log}
}

// Stream handles one batch of stream records: approval rows, and the
// insert of a run's head (session.created for a triggered run). Other rows
// are skipped. When publishing fails, the answer names the first record
// not published as a batch item failure: Lambda (with
// ReportBatchItemFailures) retries the batch from that record, so nothing
// is lost and only that record onwards may be delivered twice. An approval
// row that cannot be decoded is logged and skipped: retrying it cannot
// succeed and would hold up the shard. Each approval.requested starts its
// approval's expiry timer first (see schedule).
func (h *Handler) Stream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	var entries []Entry
	var from []int // from[i]: the record entries[i] came from
	for i, rec := range ev.Records {
		if halt, ok, err := HaltFromStreamRecord(rec); ok || err != nil {
			if err != nil {
				h.log.ErrorContext(ctx, "notify: undecodable halt record skipped", "event_id", rec.EventID, "err", err)
				continue
			}
			for _, e := range HaltEntries(halt) {
				entries = append(entries, e)
				from = append(from, i)
			}
			continue
		}
		if head, ok, err := RunFromStreamRecord(rec); ok || err != nil {
			if err != nil {
				h.log.ErrorContext(ctx, "notify: undecodable run record skipped", "event_id", rec.EventID, "err", err)
			}
			for _, e := range RunEntries(head) {
				entries = append(entries, e)
				from = append(from, i)
			}
			continue
		}
		before, after, ok, err := FromStreamRecord(rec)
		if err != nil {
			h.log.ErrorContext(ctx, "notify: undecodable approval record skipped", "event_id", rec.EventID, "err", err)
			continue
		}
		if !ok {
			continue
		}
		for _, e := range Entries(before, after) {
			if e.Type == Requested {
				h.schedule(ctx, after)
			}
			entries = append(entries, e)
			from = append(from, i)
		}
	}
	err := h.pub.Publish(ctx, entries)
	if err == nil {
		h.log.InfoContext(ctx, "notify", "records", len(ev.Records), "published", len(entries))
		return resp, nil
	}
	var pe *PublishError
	if !errors.As(err, &pe) || pe.First < 0 || pe.First >= len(from) {
		return resp, err
	}
	failed := ev.Records[from[pe.First]]
	h.log.ErrorContext(ctx, "notify: publish failed; retrying from a record", "sequence_number", failed.Change.SequenceNumber, "published", pe.First, "err", pe.Err)
	resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: failed.Change.SequenceNumber})
	return resp, nil
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
