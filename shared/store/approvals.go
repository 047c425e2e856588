package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Approval is a call waiting for (or settled by) a human. It is kept in its
// run's partition, keyed by tool_call_id, so a retry of the call finds it.
// While pending it is in the sparse index gsi1 (gsi1pk "PENDING", sorted by
// request time), which is how the pending list is read.
type Approval struct {
	ID           string `dynamodbav:"id"`
	RunID        string `dynamodbav:"run_id"`
	ToolCallID   string `dynamodbav:"tool_call_id"`
	ToolName     string `dynamodbav:"tool_name"`
	Input        string `dynamodbav:"input"`
	InputDigest  string `dynamodbav:"input_digest"`
	ToolDigest   string `dynamodbav:"tool_digest"`
	PolicyDigest string `dynamodbav:"policy_digest"`
	RuleID       string `dynamodbav:"rule_id,omitempty"`
	ScopeKey     string `dynamodbav:"scope_key"`
	DefaultScope string `dynamodbav:"default_scope"`
	Status       string `dynamodbav:"status"`
	RequestedAt  string `dynamodbav:"requested_at"`
	ExpiresAt    string `dynamodbav:"expires_at"`
	Decision     string `dynamodbav:"decision,omitempty"`
	DecidedBy    string `dynamodbav:"decided_by,omitempty"`
	DecidedAt    string `dynamodbav:"decided_at,omitempty"`
	ConnectionID string `dynamodbav:"connection_id,omitempty"`
	// Personal marks a call riding a personal connection (set by the broker
	// when it creates the approval): only the run's invoker may decide it.
	Personal bool `dynamodbav:"personal,omitempty"`
}

type pendingApproval struct {
	Approval
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
}

// approvalRef points from an approval id to its row.
type approvalRef struct {
	RunID      string `dynamodbav:"run_id"`
	ToolCallID string `dynamodbav:"tool_call_id"`
}

func approvalSK(toolCallID string) string { return "APR#" + toolCallID }

// ErrApprovalExists: the call already has an approval.
var ErrApprovalExists = fmt.Errorf("store: approval exists: %w", ErrExists)

// PutApproval creates a pending approval and the pointer from its id.
func (s *Store) PutApproval(a Approval) ([]Op, error) {
	row, err := item(runPK(a.RunID), approvalSK(a.ToolCallID), pendingApproval{Approval: a, GSI1PK: "PENDING", GSI1SK: ApprovalPosition(a)})
	if err != nil {
		return nil, err
	}
	ref, err := item("APRID#"+a.ID, "HEAD", approvalRef{RunID: a.RunID, ToolCallID: a.ToolCallID})
	if err != nil {
		return nil, err
	}
	return []Op{
		{item: putNew(s.table, row), failed: ErrApprovalExists},
		{item: putNew(s.table, ref), failed: ErrApprovalExists},
	}, nil
}

// GetApproval reads a run's approval for a call.
func (s *Store) GetApproval(ctx context.Context, runID, toolCallID string) (Approval, error) {
	var a Approval
	err := s.get(ctx, runPK(runID), approvalSK(toolCallID), &a)
	return a, err
}

// GetApprovalByID reads an approval by its id.
func (s *Store) GetApprovalByID(ctx context.Context, id string) (Approval, error) {
	var ref approvalRef
	if err := s.get(ctx, "APRID#"+id, "HEAD", &ref); err != nil {
		return Approval{}, err
	}
	return s.GetApproval(ctx, ref.RunID, ref.ToolCallID)
}

// ErrApprovalSettled: the approval is no longer pending, or has expired.
var ErrApprovalSettled = fmt.Errorf("store: approval already settled: %w", ErrConditionFailed)

// Settlement is how a pending approval ends.
type Settlement struct {
	Status    string
	Decision  string
	DecidedBy string
	DecidedAt string
	// Now is when the settlement happens: a decision needs the approval
	// unexpired at Now, an expiry needs it overdue at Now.
	Now string
	// Expiring settles an overdue approval as expired instead.
	Expiring bool
}

// SettleApproval is the compare-and-swap that settles an approval: it holds
// only while the approval is pending and (for a decision) not yet expired,
// or (for an expiry) already past its time. It leaves the pending index.
func (s *Store) SettleApproval(a Approval, st Settlement) Op {
	cond := "#status = :pending AND expires_at > :now"
	if st.Expiring {
		cond = "#status = :pending AND expires_at <= :now"
	}
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:                aws.String(s.table),
		Key:                      keyOf(runPK(a.RunID), approvalSK(a.ToolCallID)),
		UpdateExpression:         aws.String("SET #status = :status, decision = :decision, decided_by = :by, decided_at = :at REMOVE gsi1pk, gsi1sk"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pending":  &types.AttributeValueMemberS{Value: "pending"},
			":now":      &types.AttributeValueMemberS{Value: st.Now},
			":status":   &types.AttributeValueMemberS{Value: st.Status},
			":decision": &types.AttributeValueMemberS{Value: st.Decision},
			":by":       &types.AttributeValueMemberS{Value: st.DecidedBy},
			":at":       &types.AttributeValueMemberS{Value: st.DecidedAt},
		},
	}}, failed: ErrApprovalSettled}
}

// SettleCall records the final answer of a call that was pending.
func (s *Store) SettleCall(runID string, c Call) Op {
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:                aws.String(s.table),
		Key:                      keyOf(runPK(runID), callSK(c.ToolCallID)),
		UpdateExpression:         aws.String("SET decision = :d, #source = :s, reason = :r, decided_at = :at"),
		ConditionExpression:      aws.String("decision = :pending"),
		ExpressionAttributeNames: map[string]string{"#source": "source"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d":       &types.AttributeValueMemberS{Value: c.Decision},
			":s":       &types.AttributeValueMemberS{Value: c.Source},
			":r":       &types.AttributeValueMemberS{Value: c.Reason},
			":at":      &types.AttributeValueMemberS{Value: c.DecidedAt},
			":pending": &types.AttributeValueMemberS{Value: "pending"},
		},
	}}, failed: ErrApprovalSettled}
}

// Grant is a session grant: later require_approval calls of the run whose
// scope key it covers are allowed.
type Grant struct {
	ScopeKey   string `dynamodbav:"scope_key" json:"scope_key"`
	ApprovalID string `dynamodbav:"approval_id" json:"approval_id"`
	GrantedBy  string `dynamodbav:"granted_by" json:"granted_by"`
	GrantedAt  string `dynamodbav:"granted_at" json:"granted_at"`
}

func grantSK(key string) string { return "GRANT#" + key }

// PutGrant records a session grant (replacing one with the same key).
func (s *Store) PutGrant(runID string, g Grant) (Op, error) {
	av, err := item(runPK(runID), grantSK(g.ScopeKey), g)
	if err != nil {
		return Op{}, err
	}
	return Op{item: types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: av}}, failed: ErrConditionFailed}, nil
}

// ErrNoGrant: there is no grant with that key.
var ErrNoGrant = fmt.Errorf("store: no such grant: %w", ErrNotFound)

// DeleteGrant revokes a session grant; it fails with ErrNoGrant if absent.
func (s *Store) DeleteGrant(runID, scopeKey string) Op {
	return Op{item: types.TransactWriteItem{Delete: &types.Delete{
		TableName:           aws.String(s.table),
		Key:                 keyOf(runPK(runID), grantSK(scopeKey)),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	}}, failed: ErrNoGrant}
}

// Grants lists a run's session grants.
func (s *Store) Grants(ctx context.Context, runID string) ([]Grant, error) {
	var out []Grant
	err := s.queryPrefix(ctx, runPK(runID), "GRANT#", collect(&out))
	return out, err
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
	return listIndex[Approval](ctx, s, indexQuery{op: "pending approvals", item: "approval", pk: "PENDING", limit: limit})
}

// ApprovalPosition is an approval's place in the order pending approvals
// are listed in (request time, then id): its sort key in the pending index.
func ApprovalPosition(a Approval) string { return a.RequestedAt + "#" + a.ID }

// PendingApprovalsAfter lists pending approvals across runs in request
// order, those after position after ("" from the start), at most limit.
// Like PendingApprovals it reads an eventually consistent index.
func (s *Store) PendingApprovalsAfter(ctx context.Context, after string, limit int) ([]Approval, error) {
	return listIndex[Approval](ctx, s, indexQuery{op: "pending approvals", item: "approval", pk: "PENDING", after: after, limit: limit})
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
			":pending": &types.AttributeValueMemberS{Value: "pending"},
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
