package store

import (
	"context"

	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Call is the recorded answer to one tool call, the gate's idempotency key,
// and for a brokered call its execution. shared/call writes it.
type Call struct {
	ToolCallID  string `dynamodbav:"tool_call_id"`
	ToolName    string `dynamodbav:"tool_name"`
	InputDigest string `dynamodbav:"input_digest"`
	// RequestDigest digests the whole request the decision was made on
	// (input, cwd, resolved paths, ...): a retry of the tool_call_id is
	// answered from this record only if its own digest is the same.
	RequestDigest    string         `dynamodbav:"request_digest,omitempty"`
	Decision         vocab.Decision `dynamodbav:"decision"`
	Source           string         `dynamodbav:"source,omitempty"`
	Reason           string         `dynamodbav:"reason,omitempty"`
	RuleID           string         `dynamodbav:"rule_id,omitempty"`
	Verdict          string         `dynamodbav:"verdict,omitempty"`
	RewrittenVerdict string         `dynamodbav:"rewritten_verdict,omitempty"`
	// UpdatedInputDigest is set when the answer narrowed the input.
	UpdatedInputDigest string `dynamodbav:"updated_input_digest,omitempty"`
	ApprovalID         string `dynamodbav:"approval_id,omitempty"`
	DecidedAt          string `dynamodbav:"decided_at"`
	// ExecutedAt is when a brokered call's one execution was claimed.
	ExecutedAt string `dynamodbav:"executed_at,omitempty"`
	// The outcome of an executed call: digests and numbers, never the
	// result. ResultDigest is set once the outcome is stored.
	ResultDigest string `dynamodbav:"result_digest,omitempty"`
	LatencyMS    int64  `dynamodbav:"latency_ms,omitempty"`
	IsError      bool   `dynamodbav:"is_error,omitempty"`
	// Brokered is set once tool.brokered for the outcome is in the ledger.
	Brokered bool `dynamodbav:"brokered,omitempty"`
	// Task is set while an executing call's upstream runs it as a task
	// that outlived the request which claimed it (ParkTask).
	Task *Task `dynamodbav:"task,omitempty"`
}

// Task is an executing brokered call's upstream task: the upstream's MCP
// session and task ids (the upstream chose them; they stay on this record,
// never in the ledger or a log line), its protocol revision, and the time
// past which it is no longer waited for.
type Task struct {
	Session  string `dynamodbav:"session"`
	Protocol string `dynamodbav:"protocol"`
	ID       string `dynamodbav:"id"`
	Until    string `dynamodbav:"until"`
}

func callSK(id string) string { return "CALL#" + id }

// GetCall reads a call's record.
func (s *Store) GetCall(ctx context.Context, runID, toolCallID string) (Call, error) {
	var c Call
	err := s.get(ctx, runPK(runID), callSK(toolCallID), &c)
	return c, err
}

// RecordedCall is the call record that refused err, a decision's write of
// its own record for toolCallID (the call was recorded already), when the
// refusal carried it; false when the caller must read it (GetCall).
func RecordedCall(err error, runID, toolCallID string) (Call, bool) {
	var c Call
	ok := Existing(err, CallKey(runID, toolCallID), &c)
	return c, ok
}
