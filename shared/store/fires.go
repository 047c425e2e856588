package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Fire is the claim of one due time of a scheduled trigger, at TRG#<id> /
// FIRE#<due>: the process (dev ticker or scheduling function) whose
// conditional write creates it fires that due time, and every other, or a
// retry of the same, finds it. It names the run the fire creates, whose id
// is derived from the trigger and the due time, so a fire that stopped
// between its claim and its run is finished by the next tick and never
// makes a second run. It expires (TTLAttribute) once its due time is past
// every look-back.
type Fire struct {
	TriggerID string `dynamodbav:"trigger_id"`
	Due       string `dynamodbav:"due"`
	RunID     string `dynamodbav:"run_id"`
	ClaimedAt string `dynamodbav:"claimed_at"`
	Expires   int64  `dynamodbav:"expires_epoch"`
}

// ErrFireClaimed: the due time was claimed before.
var ErrFireClaimed = fmt.Errorf("store: fire claimed: %w", ErrExists)

const firePrefix = "FIRE#"

// ClaimFire records f unless it is recorded, in one transaction with a
// check that trigger t still holds the schedule it was read with (same
// expression, set at the same time). ErrFireClaimed: the due time was
// claimed before. ErrTriggerChanged: the trigger was deleted or its
// schedule changed or removed since t was read; nothing is written.
func (s *Store) ClaimFire(ctx context.Context, f Fire, t Trigger) error {
	av, err := item(triggerPK(f.TriggerID), firePrefix+f.Due, f)
	if err != nil {
		return err
	}
	err = s.transactWrite(ctx, []types.TransactWriteItem{
		putNew(s.table, av),
		{ConditionCheck: &types.ConditionCheck{
			TableName:           aws.String(s.table),
			Key:                 keyOf(triggerPK(t.ID), "HEAD"),
			ConditionExpression: aws.String("schedule = :schedule AND schedule_since = :since"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":schedule": &types.AttributeValueMemberS{Value: t.Schedule},
				":since":    &types.AttributeValueMemberS{Value: t.ScheduleSince},
			},
		}},
	})
	if conditionFailed(err) {
		// Which condition failed: the claim's (it exists) or the trigger's.
		if _, gerr := s.GetFire(ctx, f.TriggerID, f.Due); gerr == nil {
			return fmt.Errorf("store: fire %s at %s: %w", f.TriggerID, f.Due, ErrFireClaimed)
		} else if !errors.Is(gerr, ErrNotFound) {
			return gerr
		}
		return fmt.Errorf("store: fire %s at %s: %w", f.TriggerID, f.Due, ErrTriggerChanged)
	}
	return translate("claim fire "+f.TriggerID, err)
}

// GetFire reads the claim of a trigger's due time.
func (s *Store) GetFire(ctx context.Context, triggerID, due string) (Fire, error) {
	var f Fire
	err := s.get(ctx, triggerPK(triggerID), firePrefix+due, &f)
	return f, err
}

// ScheduledTriggers returns every trigger configuration with a schedule.
func (s *Store) ScheduledTriggers(ctx context.Context) ([]Trigger, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(gsi1),
		KeyConditionExpression:    aws.String("gsi1pk = :p"),
		FilterExpression:          aws.String("attribute_exists(schedule)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: triggerIndex}},
	}
	var out []Trigger
	err := s.query(ctx, "list scheduled triggers", in, func(av map[string]types.AttributeValue) (bool, error) {
		var t Trigger
		if err := attributevalue.UnmarshalMap(av, &t); err != nil {
			return false, fmt.Errorf("store: decode trigger: %w", err)
		}
		out = append(out, t)
		return true, nil
	})
	return out, err
}
