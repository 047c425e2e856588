package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Approval is a call waiting for (or settled by) a human. It is kept in its
// run's partition, keyed by tool_call_id, so a retry of the call finds it.
// While pending it is in the sparse index gsi1 (gsi1pk "PENDING", sorted by
// request time), which is how the pending list is read.
type Approval struct {
	ID           string               `dynamodbav:"id"`
	RunID        string               `dynamodbav:"run_id"`
	ToolCallID   string               `dynamodbav:"tool_call_id"`
	ToolName     string               `dynamodbav:"tool_name"`
	Input        string               `dynamodbav:"input"`
	InputDigest  string               `dynamodbav:"input_digest"`
	ToolDigest   string               `dynamodbav:"tool_digest"`
	PolicyDigest string               `dynamodbav:"policy_digest"`
	RuleID       string               `dynamodbav:"rule_id,omitempty"`
	ScopeKey     string               `dynamodbav:"scope_key"`
	DefaultScope string               `dynamodbav:"default_scope"`
	Status       vocab.ApprovalStatus `dynamodbav:"status"`
	RequestedAt  string               `dynamodbav:"requested_at"`
	ExpiresAt    string               `dynamodbav:"expires_at"`
	DecidedBy    string               `dynamodbav:"decided_by,omitempty"`
	DecidedAt    string               `dynamodbav:"decided_at,omitempty"`
	// Reason is the decider's note (a deny's reason): free text from a
	// person, kept here for the people who read the approval and never in
	// the ledger.
	Reason       string `dynamodbav:"reason,omitempty"`
	ConnectionID string `dynamodbav:"connection_id,omitempty"`
	// Personal marks a call riding a personal connection (set by the broker
	// when it creates the approval): only the run's invoker may decide it.
	Personal bool `dynamodbav:"personal,omitempty"`
	// Input is bounded for display (shared/call); InputSize is the size
	// of the whole input and InputTruncated says it was cut. InputDigest is
	// always the digest of the whole input.
	InputSize      int  `dynamodbav:"input_size,omitempty"`
	InputTruncated bool `dynamodbav:"input_truncated,omitempty"`
	// The run's shadow policy's answer when it differed from the enforced
	// one's require_approval, carried to the tool.decision that settles
	// the call; empty otherwise.
	ShadowVerdict          string `dynamodbav:"shadow_verdict,omitempty"`
	ShadowRewrittenVerdict string `dynamodbav:"shadow_rewritten_verdict,omitempty"`
	ShadowRuleID           string `dynamodbav:"shadow_rule_id,omitempty"`
	ShadowError            string `dynamodbav:"shadow_error,omitempty"`
	// Source is the trigger source (shared/call's Pin.Source) whose count
	// of pending approvals (SourceKey) this one is in; "" for none. The
	// settlement takes it out of that count.
	Source string `dynamodbav:"source,omitempty"`
}

// PendingApproval is an approval row while it is pending: in the sparse
// index gsi1 under PendingIndex, sorted by request time.
type PendingApproval struct {
	Approval
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

// ApprovalRef points from an approval id to its row (at ApprovalRefKey).
type ApprovalRef struct {
	RunID      string `dynamodbav:"run_id"`
	ToolCallID string `dynamodbav:"tool_call_id"`
}

func approvalSK(toolCallID string) string { return "APR#" + toolCallID }

// GetApproval reads a run's approval for a call.
func (s *Store) GetApproval(ctx context.Context, runID, toolCallID string) (Approval, error) {
	var a Approval
	err := s.get(ctx, runPK(runID), approvalSK(toolCallID), &a)
	return a, err
}

// GetApprovalByID reads an approval by its id.
func (s *Store) GetApprovalByID(ctx context.Context, id string) (Approval, error) {
	var ref ApprovalRef
	k := ApprovalRefKey(id)
	if err := s.get(ctx, k.PK, k.SK, &ref); err != nil {
		return Approval{}, err
	}
	return s.GetApproval(ctx, ref.RunID, ref.ToolCallID)
}

// RunApprovals lists every approval of a run, any status.
func (s *Store) RunApprovals(ctx context.Context, runID string) ([]Approval, error) {
	var out []Approval
	err := s.queryPrefix(ctx, runPK(runID), "APR#", collect(&out))
	return out, err
}

// PendingApprovals lists pending approvals across runs, oldest first, at
// most limit. The index is eventually consistent: callers re-read a row
// before acting on it.
func (s *Store) PendingApprovals(ctx context.Context, limit int) ([]Approval, error) {
	return listIndex[Approval](ctx, s, indexQuery{op: "pending approvals", item: "approval", pk: PendingIndex, limit: limit})
}

// EachPendingApproval visits every pending approval, oldest first, one
// page of the index at a time, until visit returns an error (returned as
// is). visit may settle the approval it is given.
func (s *Store) EachPendingApproval(ctx context.Context, visit func(Approval) error) error {
	var decodeErr error
	err := s.queryIndex(ctx, indexQuery{op: "pending approvals", item: "approval", pk: PendingIndex}, func(av map[string]types.AttributeValue) error {
		var a Approval
		if err := attributevalue.UnmarshalMap(av, &a); err != nil {
			return err
		}
		if err := visit(a); err != nil {
			decodeErr = err
			return err
		}
		return nil
	})
	if decodeErr != nil {
		return decodeErr
	}
	return err
}

// ApprovalPosition is an approval's place in the order pending approvals
// are listed in (request time, then id): its sort key in the pending index.
func ApprovalPosition(a Approval) string { return a.RequestedAt + "#" + a.ID }

// PendingApprovalsAfter lists pending approvals across runs in request
// order, those after position after ("" from the start), at most limit.
// Like PendingApprovals it reads an eventually consistent index.
func (s *Store) PendingApprovalsAfter(ctx context.Context, after string, limit int) ([]Approval, error) {
	return listIndex[Approval](ctx, s, indexQuery{op: "pending approvals", item: "approval", pk: PendingIndex, after: after, limit: limit})
}

// RunPendingApprovals lists one run's pending approvals in request order,
// those after position after, at most limit: a consistent read of the
// run's partition, so an approval filed a moment ago is listed.
func (s *Store) RunPendingApprovals(ctx context.Context, runID, after string, limit int) ([]Approval, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("pk = :pk AND begins_with(sk, :p)"),
		FilterExpression:         aws.String("#status = :pending"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":      &types.AttributeValueMemberS{Value: runPK(runID)},
			":p":       &types.AttributeValueMemberS{Value: "APR#"},
			":pending": &types.AttributeValueMemberS{Value: string(vocab.ApprovalPending)},
		},
		ConsistentRead: aws.Bool(true),
	}
	var all []Approval
	visit := collect(&all)
	err := s.query(ctx, "run pending approvals "+runID, in, func(av map[string]types.AttributeValue) (bool, error) {
		if err := visit(av); err != nil {
			return false, fmt.Errorf("store: decode approval: %w", err)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// The partition is ordered by tool_call_id; the list is in request order.
	slices.SortFunc(all, func(a, b Approval) int { return strings.Compare(ApprovalPosition(a), ApprovalPosition(b)) })
	out := []Approval{}
	for _, a := range all {
		if ApprovalPosition(a) > after && (limit <= 0 || len(out) < limit) {
			out = append(out, a)
		}
	}
	return out, nil
}
