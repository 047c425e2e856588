package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SlackMessage is where an approval's Slack message is, at
// SLACKMSG#<approval id>/HEAD: a partition of its own, so that the Slack
// function's IAM role can be limited to these items (dynamodb:LeadingKeys)
// and can write nothing of a run's. Status is the approval status the
// message last showed ("" while it is being posted).
type SlackMessage struct {
	ApprovalID string `dynamodbav:"approval_id"`
	Channel    string `dynamodbav:"channel,omitempty"`
	TS         string `dynamodbav:"ts,omitempty"`
	Status     string `dynamodbav:"status,omitempty"`
	ClaimedAt  string `dynamodbav:"claimed_at"`
}

func slackPK(approvalID string) string { return "SLACKMSG#" + approvalID }

// ErrSlackMessageClaimed: another worker holds the claim to post the
// message (or has posted it).
var ErrSlackMessageClaimed = fmt.Errorf("store: slack message claimed: %w", ErrExists)

// ClaimSlackMessage records that this worker is posting approvalID's
// message. It fails with ErrSlackMessageClaimed when a record exists,
// unless that record is an unfinished claim made before staleBefore
// (a worker that died mid-post), which it takes over.
func (s *Store) ClaimSlackMessage(ctx context.Context, approvalID, at, staleBefore string) error {
	av, err := item(slackPK(approvalID), "HEAD", SlackMessage{ApprovalID: approvalID, ClaimedAt: at})
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                av,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR (attribute_not_exists(ts) AND claimed_at < :stale)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":stale": &types.AttributeValueMemberS{Value: staleBefore},
		},
	})
	if err = translate("claim slack message "+approvalID, err); errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: claim slack message %s: %w", approvalID, ErrSlackMessageClaimed)
	}
	return err
}

// GetSlackMessage reads approvalID's message record.
func (s *Store) GetSlackMessage(ctx context.Context, approvalID string) (SlackMessage, error) {
	var m SlackMessage
	err := s.get(ctx, slackPK(approvalID), "HEAD", &m)
	return m, err
}

// PutSlackMessage records the posted message and the status it shows.
func (s *Store) PutSlackMessage(ctx context.Context, m SlackMessage) error {
	av, err := item(slackPK(m.ApprovalID), "HEAD", m)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av})
	return translate("put slack message "+m.ApprovalID, err)
}

// DeleteSlackMessage drops a claim whose post failed, so a retry posts.
func (s *Store) DeleteSlackMessage(ctx context.Context, approvalID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table),
		Key:       keyOf(slackPK(approvalID), "HEAD"),
	})
	return translate("delete slack message "+approvalID, err)
}

// ErrReplayed: a request with this digest was seen before.
var ErrReplayed = fmt.Errorf("store: request replayed: %w", ErrExists)

// TTLAttribute is the table's time-to-live attribute (template.yaml's
// TimeToLiveSpecification names it): DynamoDB deletes an item some time
// after the Unix time in it has passed. Only items that may vanish carry
// it; nothing of the ledger does.
const TTLAttribute = "expires_epoch"

// seenRequest is a signed request's digest, at SLACKREQ#<digest>/HEAD,
// kept until the request's signature could no longer pass (then the
// table's TTL removes it; the refusal never depends on that, as a request
// that old fails its timestamp check first).
type seenRequest struct {
	Seen    string `dynamodbav:"seen"`
	Expires int64  `dynamodbav:"expires_epoch"` // TTLAttribute
}

// ClaimRequest records a signed request by its digest; it fails with
// ErrReplayed when the same digest was recorded before.
func (s *Store) ClaimRequest(ctx context.Context, digest, at string, expiresEpoch int64) error {
	av, err := item("SLACKREQ#"+digest, "HEAD", seenRequest{Seen: at, Expires: expiresEpoch})
	if err != nil {
		return err
	}
	if err = s.putItemNew(ctx, "claim request", av); errors.Is(err, ErrConditionFailed) {
		return ErrReplayed
	}
	return err
}

// GetRunPolicy reads only the policy snapshot a run froze (GetFrozen reads
// its tools too).
func (s *Store) GetRunPolicy(ctx context.Context, runID string) (PolicySnapshot, error) {
	var p PolicySnapshot
	err := s.get(ctx, runPK(runID), frozenPrefix+"POLICY", &p)
	if errors.Is(err, ErrNotFound) {
		err = s.get(ctx, runPK(runID), "POLICY", &p) // a run created before
	}
	return p, err
}
