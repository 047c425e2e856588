package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RateKey is the key of runID's request counter for the window starting at
// the Unix second window. Counters live in their own partition per run,
// outside the run's, so reading a run's items never meets them.
func RateKey(runID string, window int64) Key {
	return Key{"RATE#" + runID, "W#" + strconv.FormatInt(window, 10)}
}

// ReserveRequests adds n to the counter at k unless that would take it
// past limit, in which case it fails with a *CountedError (wrapping
// ErrConditionFailed) saying how many the counter holds, and counts
// nothing. One conditional UpdateItem, so every Lambda instance counts
// into the same number atomically, and the sum of what they reserved never
// passes limit. expires (Unix seconds) goes in the table's TTL attribute,
// so spent windows are deleted by DynamoDB.
func (s *Store) ReserveRequests(ctx context.Context, k Key, n, limit int, expires int64) error {
	if n < 1 || n > limit {
		// attribute_not_exists would let a new counter start past limit.
		return fmt.Errorf("store: reserve %d requests of %d", n, limit)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      k.av(),
		UpdateExpression:         aws.String("ADD #n :n SET #ttl = :exp"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n <= :room"),
		ExpressionAttributeNames: map[string]string{"#n": "n", "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n":    &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
			":room": &types.AttributeValueMemberN{Value: strconv.Itoa(limit - n)},
			":exp":  &types.AttributeValueMemberN{Value: strconv.FormatInt(expires, 10)},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		var c struct {
			N int `dynamodbav:"n"`
		}
		if err := attributevalue.UnmarshalMap(ccf.Item, &c); err != nil {
			return translate("reserve requests", err)
		}
		return &CountedError{Count: c.N}
	}
	return translate("reserve requests", err)
}

// CountedError is ReserveRequests' refusal: the counter holds Count.
type CountedError struct{ Count int }

func (e *CountedError) Error() string {
	return "store: reserve requests: the counter holds " + strconv.Itoa(e.Count) + ": " + ErrConditionFailed.Error()
}

// Unwrap makes errors.Is(err, ErrConditionFailed) hold.
func (e *CountedError) Unwrap() error { return ErrConditionFailed }
