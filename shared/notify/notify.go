// Package notify turns committed approval and input request transitions,
// the creation of triggered runs and the model proxy's halts into the
// notifications of docs/api.md, "Notifications (EventBridge)": source
// "fluidbox", detail-types approval.requested, approval.decided,
// input.requested, input.settled, session.created and run.halted.
//
// Guarantees:
//   - A notification exists only for a committed transition. In AWS the
//     input is the table's stream (a transactional outbox); in dev it is
//     the approval service's observer, called after the commit.
//   - The detail is exactly Detail (ids, tool name, rule, status, expiry and
//     who decided), InputDetail (the same for an input request, with the
//     connection's name: never the link) or SessionDetail (the run, its trust tier and the
//     delivery's repository, pull request and head commit). Never the
//     call's input, a result, a token or a secret: details are built field
//     by field, not copied from the row.
//   - A failed publish is reported, never dropped: the stream handler names
//     the first record not published, and Lambda retries from there.
//   - Each new pending approval on the stream has its expiry timer started,
//     at most once per approval (the execution is named after it). A timer
//     that fails to start is logged and costs nothing but promptness:
//     expiry is also lazy and swept, so the approval still expires to deny.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Source is every notification's EventBridge source.
const Source = "fluidbox"

// Type is a notification's detail-type. Types are on the wire: never
// rename one.
type Type string

// Notification types.
const (
	Requested Type = "approval.requested"
	Decided   Type = "approval.decided"
	// SessionCreated: a trigger created a run, which has no tokens yet; a
	// runner picks it up and issues them (POST /v1/sessions/{id}/token).
	SessionCreated Type = "session.created"
	// RunHalted: the model proxy ended a run whose tool result answered a
	// call the gate did not allow with that input.
	RunHalted Type = "run.halted"
	// InputRequested: a brokered call waits for a person to open a link
	// its upstream asked for (shared/elicitation); InputSettled: it was
	// answered (completed, declined) or expired.
	InputRequested Type = "input.requested"
	InputSettled   Type = "input.settled"
)

// InputDetail is an input.requested or input.settled notification's
// detail: the request's ids, the connection's name in fluidbox, its status,
// expiry and who answered. Never its link: whoever shows the request reads
// the row.
type InputDetail struct {
	InputRequestID string `json:"input_request_id"`
	SessionID      string `json:"session_id"`
	ToolCallID     string `json:"tool_call_id"`
	ToolName       string `json:"tool_name"`
	ConnectionID   string `json:"connection_id"`
	Server         string `json:"server"`
	Status         string `json:"status"`
	ExpiresAt      string `json:"expires_at"`
	DecidedBy      string `json:"decided_by,omitempty"`
}

// InputEntries returns the notifications of one transition of an input
// request: a new pending one is input.requested, pending to any other
// status input.settled, and anything else is none.
func InputEntries(before, after store.InputRequest) []Entry {
	pending := string(elicitation.Pending)
	var t Type
	switch {
	case before.Status == "" && after.Status == pending:
		t = InputRequested
	case before.Status == pending && after.Status != pending && after.Status != "":
		t = InputSettled
	default:
		return nil
	}
	return []Entry{{Type: t, Detail: InputDetail{
		InputRequestID: after.ID, SessionID: after.RunID, ToolCallID: after.ToolCallID, ToolName: after.ToolName,
		ConnectionID: after.ConnectionID, Server: after.Server, Status: after.Status, ExpiresAt: after.ExpiresAt, DecidedBy: after.DecidedBy,
	}}}
}

// InputFromStreamRecord decodes a table stream record of an input request
// row (RUN#<id> / INP#<tool_call_id>#<id>) into the request before and
// after the change; either is the zero InputRequest when the image is
// absent. ok is false for every other row; a row that is an input request
// but cannot be decoded is an error.
func InputFromStreamRecord(rec events.DynamoDBEventRecord) (before, after store.InputRequest, ok bool, err error) {
	pk, sk := rec.Change.Keys["pk"], rec.Change.Keys["sk"]
	if pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString ||
		!strings.HasPrefix(pk.String(), "RUN#") || !strings.HasPrefix(sk.String(), "INP#") {
		return store.InputRequest{}, store.InputRequest{}, false, nil
	}
	if err := decodeInto(rec.Change.OldImage, &before); err != nil {
		return store.InputRequest{}, store.InputRequest{}, false, fmt.Errorf("notify: record %s: old image: %w", rec.EventID, err)
	}
	if err := decodeInto(rec.Change.NewImage, &after); err != nil {
		return store.InputRequest{}, store.InputRequest{}, false, fmt.Errorf("notify: record %s: new image: %w", rec.EventID, err)
	}
	return before, after, true, nil
}

// HaltDetail is a run.halted notification's detail: the run, the tool
// call whose result halted it and why, never the input or the result.
type HaltDetail struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Reason     string `json:"reason"`
	HaltedAt   string `json:"halted_at"`
}

// HaltEntries returns the notification of a halt.
func HaltEntries(h store.Halted) []Entry {
	return []Entry{{Type: RunHalted, Detail: HaltDetail{SessionID: h.RunID, ToolCallID: h.ToolCallID, Reason: h.Reason, HaltedAt: h.At}}}
}

// HaltFromStreamRecord decodes the insert of a halt's item (RUN#<id> /
// HALTED); ok is false for every other record.
func HaltFromStreamRecord(rec events.DynamoDBEventRecord) (store.Halted, bool, error) {
	pk, sk := rec.Change.Keys["pk"], rec.Change.Keys["sk"]
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString ||
		!strings.HasPrefix(pk.String(), "RUN#") || sk.String() != "HALTED" {
		return store.Halted{}, false, nil
	}
	var h store.Halted
	if err := decodeInto(rec.Change.NewImage, &h); err != nil {
		return store.Halted{}, false, fmt.Errorf("notify: record %s: new image: %w", rec.EventID, err)
	}
	return h, true, nil
}

// Detail is a notification's detail, field for field docs/api.md's.
type Detail struct {
	ApprovalID string               `json:"approval_id"`
	SessionID  string               `json:"session_id"`
	ToolCallID string               `json:"tool_call_id"`
	ToolName   string               `json:"tool_name"`
	RuleID     string               `json:"rule_id"`
	Status     vocab.ApprovalStatus `json:"status"`
	ExpiresAt  string               `json:"expires_at"`
	DecidedBy  string               `json:"decided_by,omitempty"`
}

// SessionDetail is a session.created notification's detail: what a runner
// needs to start a sandbox for a triggered run, never a token.
type SessionDetail struct {
	SessionID      string `json:"session_id"`
	Trigger        string `json:"trigger"`
	TriggerID      string `json:"trigger_id,omitempty"`
	TrustTier      string `json:"trust_tier"`
	Autonomous     bool   `json:"autonomous"`
	Repository     string `json:"repository,omitempty"`
	HeadRepository string `json:"head_repository,omitempty"`
	PullRequest    int    `json:"pull_request,omitempty"`
	HeadSHA        string `json:"head_sha,omitempty"`
	Fork           bool   `json:"fork"`
	CreatedAt      string `json:"created_at"`
}

// Entry is one notification. Detail is a Detail, an InputDetail, a
// SessionDetail or a HaltDetail.
type Entry struct {
	Type   Type
	Detail any
}

// RunEntries returns the notifications of a run's creation: session.created
// for a run a trigger started, none for a manual one (its creator holds
// its tokens already).
func RunEntries(h store.Head) []Entry {
	if h.Trigger == "" || h.Trigger == "manual" {
		return nil
	}
	d := SessionDetail{SessionID: h.RunID, Trigger: h.Trigger, TrustTier: h.TrustTier, Autonomous: h.Autonomous, CreatedAt: h.CreatedAt}
	if g := h.GitHub; g != nil {
		d.TriggerID, d.Repository, d.HeadRepository = g.TriggerID, g.Repository, g.HeadRepository
		d.PullRequest, d.HeadSHA, d.Fork = g.PullRequest, g.HeadSHA, g.Fork
	}
	return []Entry{{Type: SessionCreated, Detail: d}}
}

// FromStreamRecord's companion for runs: the head of a run as inserted
// (RUN#<id> / HEAD, an INSERT). ok is false for every other record.
func RunFromStreamRecord(rec events.DynamoDBEventRecord) (store.Head, bool, error) {
	pk, sk := rec.Change.Keys["pk"], rec.Change.Keys["sk"]
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString ||
		!strings.HasPrefix(pk.String(), "RUN#") || sk.String() != "HEAD" {
		return store.Head{}, false, nil
	}
	var h store.Head
	if err := decodeInto(rec.Change.NewImage, &h); err != nil {
		return store.Head{}, false, fmt.Errorf("notify: record %s: new image: %w", rec.EventID, err)
	}
	return h, true, nil
}

// UnsequencedRun is the run of a stream record that inserts an event not
// numbered yet (RUN#<id> / Q#...); ok is false for any other record.
func UnsequencedRun(rec events.DynamoDBEventRecord) (runID string, ok bool) {
	pk, sk := rec.Change.Keys["pk"], rec.Change.Keys["sk"]
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString ||
		!strings.HasPrefix(pk.String(), "RUN#") || !strings.HasPrefix(sk.String(), "Q#") {
		return "", false
	}
	return strings.TrimPrefix(pk.String(), "RUN#"), true
}

// Entries returns the notifications of one transition of an approval:
// a new pending approval is approval.requested, pending to settled is
// approval.decided, and anything else is none.
func Entries(before, after store.Approval) []Entry {
	var t Type
	switch {
	case before.Status == "" && after.Status == vocab.ApprovalPending:
		t = Requested
	case before.Status == vocab.ApprovalPending && after.Status.Settled():
		t = Decided
	default:
		return nil
	}
	return []Entry{{Type: t, Detail: Detail{
		ApprovalID: after.ID,
		SessionID:  after.RunID,
		ToolCallID: after.ToolCallID,
		ToolName:   after.ToolName,
		RuleID:     after.RuleID,
		Status:     after.Status,
		ExpiresAt:  after.ExpiresAt,
		DecidedBy:  after.DecidedBy,
	}}}
}

// FromStreamRecord decodes a table stream record of an approval row
// (RUN#<id> / APR#<tool_call_id>) into the approval before and after the
// change; either is the zero Approval when the image is absent. ok is false
// for every other row. A row that is an approval but cannot be decoded is
// an error.
func FromStreamRecord(rec events.DynamoDBEventRecord) (before, after store.Approval, ok bool, err error) {
	if !isApproval(rec.Change.Keys) {
		return store.Approval{}, store.Approval{}, false, nil
	}
	if before, err = decodeImage(rec.Change.OldImage); err != nil {
		return store.Approval{}, store.Approval{}, false, fmt.Errorf("notify: record %s: old image: %w", rec.EventID, err)
	}
	if after, err = decodeImage(rec.Change.NewImage); err != nil {
		return store.Approval{}, store.Approval{}, false, fmt.Errorf("notify: record %s: new image: %w", rec.EventID, err)
	}
	return before, after, true, nil
}

func isApproval(keys map[string]events.DynamoDBAttributeValue) bool {
	pk, sk := keys["pk"], keys["sk"]
	return pk.DataType() == events.DataTypeString && sk.DataType() == events.DataTypeString &&
		strings.HasPrefix(pk.String(), "RUN#") && strings.HasPrefix(sk.String(), "APR#")
}

// decodeImage converts a stream image to the SDK's attribute values through
// their common DynamoDB JSON form, then decodes it as the store wrote it.
func decodeImage(img map[string]events.DynamoDBAttributeValue) (store.Approval, error) {
	var a store.Approval
	err := decodeInto(img, &a)
	return a, err
}

func decodeInto(img map[string]events.DynamoDBAttributeValue, v any) error {
	if len(img) == 0 {
		return nil
	}
	raw, err := json.Marshal(img)
	if err != nil {
		return err
	}
	av, err := attributevalue.UnmarshalMapJSON(raw)
	if err != nil {
		return err
	}
	return attributevalue.UnmarshalMap(av, v)
}

// Publisher delivers notifications.
type Publisher interface {
	// Publish delivers entries in order. On failure the error is a
	// *PublishError naming the first entry that may not have been
	// delivered; every entry before it was.
	Publish(ctx context.Context, entries []Entry) error
}

// PublishError says how far a Publish got.
type PublishError struct {
	// First is the index of the first entry that may not be delivered.
	First int
	Err   error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("notify: publish from entry %d: %v", e.First, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// Printer is the dev server's Publisher: one line per notification,
// `notification <type> <detail JSON>`.
type Printer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewPrinter returns a Printer writing to w.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: w} }

// Publish prints entries.
func (p *Printer) Publish(_ context.Context, entries []Entry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range entries {
		detail, err := json.Marshal(e.Detail)
		if err != nil {
			return &PublishError{First: i, Err: err}
		}
		if _, err := fmt.Fprintf(p.w, "notification %s %s\n", e.Type, detail); err != nil {
			return &PublishError{First: i, Err: err}
		}
	}
	return nil
}
