package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Launch is a run's launch (RUN#<id> / LAUNCH): which launcher started its
// runner, who in it (By: the AWS launcher's Step Functions execution, so
// that only that execution's failure step ends the run), and the hash of
// the single-use credential it handed over.
// UsedAt is set by the one token issue the credential may make, in that
// issue's transaction; ReusedAt by the first refused use after it (later
// ones are refused without a record, so a leaked credential cannot flood
// the ledger).
type Launch struct {
	CredentialHash string `dynamodbav:"credential_hash"`
	Launcher       string `dynamodbav:"launcher"`
	By             string `dynamodbav:"by,omitempty"`
	LaunchedAt     string `dynamodbav:"launched_at"`
	UsedAt         string `dynamodbav:"used_at,omitempty"`
	ReusedAt       string `dynamodbav:"reused_at,omitempty"`
}

const launchSK = "LAUNCH"

// Launch conditions that did not hold.
var (
	// ErrLaunched: the run has a launch already; a run is launched once.
	ErrLaunched = fmt.Errorf("store: run launched already: %w", ErrConditionFailed)
	// ErrLaunchUsed: the launch credential was used already (or the run
	// has no launch).
	ErrLaunchUsed = fmt.Errorf("store: launch credential used already: %w", ErrConditionFailed)
	// ErrLaunchReuseRecorded: a reuse of the credential is recorded already.
	ErrLaunchReuseRecorded = fmt.Errorf("store: launch reuse recorded already: %w", ErrConditionFailed)
)

// PutLaunch is the op that records a run's launch, once.
func (s *Store) PutLaunch(runID string, l Launch) (Op, error) {
	av, err := item(runPK(runID), launchSK, l)
	if err != nil {
		return Op{}, err
	}
	return Op{item: putNew(s.table, av), failed: ErrLaunched}, nil
}

// GetLaunch reads a run's launch.
func (s *Store) GetLaunch(ctx context.Context, runID string) (Launch, error) {
	var l Launch
	err := s.get(ctx, runPK(runID), launchSK, &l)
	return l, err
}

// UseLaunch is the op that spends a run's launch credential: it holds
// once. (The credential's hash was checked when the request was
// authenticated; it never changes, since a run is launched once.)
func (s *Store) UseLaunch(runID, at string) Op {
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:           aws.String(s.table),
		Key:                 keyOf(runPK(runID), launchSK),
		UpdateExpression:    aws.String("SET used_at = :at"),
		ConditionExpression: aws.String("attribute_exists(credential_hash) AND attribute_not_exists(used_at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":at": &types.AttributeValueMemberS{Value: at},
		},
	}}, failed: ErrLaunchUsed}
}

// MarkLaunchReused is the op that records the first refused use of a spent
// launch credential.
func (s *Store) MarkLaunchReused(runID, at string) Op {
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:           aws.String(s.table),
		Key:                 keyOf(runPK(runID), launchSK),
		UpdateExpression:    aws.String("SET reused_at = :at"),
		ConditionExpression: aws.String("attribute_exists(used_at) AND attribute_not_exists(reused_at)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":at": &types.AttributeValueMemberS{Value: at},
		},
	}}, failed: ErrLaunchReuseRecorded}
}
