package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Grant is a session grant: later require_approval calls of the run that
// the rule RuleID asks about with scope key ScopeKey are allowed (see
// policy.AnswerGrants for what exactly it answers).
type Grant struct {
	// RuleID is the rule that asked ("" for the policy's default verdict).
	RuleID     string `dynamodbav:"rule_id" json:"rule_id"`
	ScopeKey   string `dynamodbav:"scope_key" json:"scope_key"`
	ApprovalID string `dynamodbav:"approval_id" json:"approval_id"`
	GrantedBy  string `dynamodbav:"granted_by" json:"granted_by"`
	GrantedAt  string `dynamodbav:"granted_at" json:"granted_at"`
}

// grantPrefix starts the sort key of a grant keyed by its rule. Grants
// written before grants belonged to a rule sit under "GRANT#" followed by
// the scope key's digest alone; nothing reads that prefix any more, so
// they are never honoured (nor listed: they answer nothing).
const grantPrefix = "RGRANT#"

// GrantKey is the key of a run's session grant asked for by ruleID with
// scopeKey. The sort key holds a SHA-256 of both, never the key itself: a
// scope key is derived from tool input, which must not reach a key (and
// would not fit DynamoDB's 1,024-byte sort key for a long command). The
// rule id is length-prefixed, so no rule id and scope key pair can spell
// another's. Both are kept as attributes.
func GrantKey(runID, ruleID, scopeKey string) Key {
	sum := sha256.Sum256([]byte(strconv.Itoa(len(ruleID)) + ":" + ruleID + scopeKey))
	return Key{runPK(runID), grantPrefix + hex.EncodeToString(sum[:])}
}

// GrantHeldOp is the op that holds only while the run still holds the
// grant ruleID asked for with scopeKey; otherwise the Append fails with
// failed. A decision a grant answered is recorded with it, so a revoke
// that lands between reading the grants and recording the decision fences
// the decision out by its own condition, not only by the run's counter.
func (s *Store) GrantHeldOp(runID, ruleID, scopeKey string, failed error) Op {
	return Op{item: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:           aws.String(s.table),
		Key:                 GrantKey(runID, ruleID, scopeKey).av(),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	}}, failed: failed}
}

// Grants lists a run's session grants, read consistently: a grant
// revoked a moment ago is not in the list, one written a moment ago is.
func (s *Store) Grants(ctx context.Context, runID string) ([]Grant, error) {
	var out []Grant
	err := s.queryPrefix(ctx, runPK(runID), grantPrefix, collect(&out))
	return out, err
}
