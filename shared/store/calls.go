package store

import (
	"context"
	"fmt"
)

// ErrCallExists: a decision for this tool_call_id is already recorded.
var ErrCallExists = fmt.Errorf("store: call already decided: %w", ErrExists)

// Call is the recorded answer to one tool call, the gate's idempotency key.
type Call struct {
	ToolCallID       string `dynamodbav:"tool_call_id"`
	ToolName         string `dynamodbav:"tool_name"`
	InputDigest      string `dynamodbav:"input_digest"`
	Decision         string `dynamodbav:"decision"`
	Source           string `dynamodbav:"source,omitempty"`
	Reason           string `dynamodbav:"reason,omitempty"`
	RuleID           string `dynamodbav:"rule_id,omitempty"`
	Verdict          string `dynamodbav:"verdict,omitempty"`
	RewrittenVerdict string `dynamodbav:"rewritten_verdict,omitempty"`
	ApprovalID       string `dynamodbav:"approval_id,omitempty"`
	DecidedAt        string `dynamodbav:"decided_at"`
}

func callSK(id string) string { return "CALL#" + id }

// PutCall records a call's answer; it fails with ErrCallExists if one is
// recorded already.
func (s *Store) PutCall(runID string, c Call) (Op, error) {
	av, err := item(runPK(runID), callSK(c.ToolCallID), c)
	if err != nil {
		return Op{}, err
	}
	return Op{item: putNew(s.table, av), failed: ErrCallExists}, nil
}

// GetCall reads a call's recorded answer.
func (s *Store) GetCall(ctx context.Context, runID, toolCallID string) (Call, error) {
	var c Call
	err := s.get(ctx, runPK(runID), callSK(toolCallID), &c)
	return c, err
}
