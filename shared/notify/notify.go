// Package notify turns committed approval transitions into the
// notifications of docs/api.md, "Notifications (EventBridge)": source
// "fluidbox", detail-types approval.requested and approval.decided.
//
// Guarantees:
//   - A notification exists only for a committed transition. In AWS the
//     input is the table's stream (a transactional outbox); in dev it is
//     the approval service's observer, called after the commit.
//   - The detail is exactly Detail: ids, tool name, rule, status, expiry and
//     who decided. Never the call's input, a result or a secret: Detail is
//     built field by field, not copied from the approval row.
//   - A failed publish is reported, never dropped: the stream handler names
//     the first record not published, and Lambda retries from there.
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

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/store"
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
)

// Detail is a notification's detail, field for field docs/api.md's.
type Detail struct {
	ApprovalID string `json:"approval_id"`
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	RuleID     string `json:"rule_id"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
	DecidedBy  string `json:"decided_by,omitempty"`
}

// Entry is one notification.
type Entry struct {
	Type   Type
	Detail Detail
}

// Entries returns the notifications of one transition of an approval:
// a new pending approval is approval.requested, pending to settled is
// approval.decided, and anything else is none.
func Entries(before, after store.Approval) []Entry {
	var t Type
	switch {
	case before.Status == "" && call.State(after.Status) == call.Pending:
		t = Requested
	case call.State(before.Status) == call.Pending && call.State(after.Status).Settled():
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
	if len(img) == 0 {
		return a, nil
	}
	raw, err := json.Marshal(img)
	if err != nil {
		return a, err
	}
	av, err := attributevalue.UnmarshalMapJSON(raw)
	if err != nil {
		return a, err
	}
	err = attributevalue.UnmarshalMap(av, &a)
	return a, err
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
