package store

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RateKey is the key of runID's request counter for the window starting at
// the Unix second window. Counters live in their own partition per run,
// outside the run's, so reading a run's items never meets them.
func RateKey(runID string, window int64) Key {
	return Key{"RATE#" + runID, "W#" + strconv.FormatInt(window, 10)}
}

// CountRequest adds one to the counter at k unless it has reached limit,
// in which case it fails with ErrConditionFailed and counts nothing. One
// conditional UpdateItem, so every Lambda instance counts into the same
// number atomically. expires (Unix seconds) goes in the table's TTL
// attribute, so spent windows are deleted by DynamoDB.
func (s *Store) CountRequest(ctx context.Context, k Key, limit int, expires int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      k.av(),
		UpdateExpression:         aws.String("ADD #n :one SET #ttl = :exp"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :limit"),
		ExpressionAttributeNames: map[string]string{"#n": "n", "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   &types.AttributeValueMemberN{Value: "1"},
			":limit": &types.AttributeValueMemberN{Value: strconv.Itoa(limit)},
			":exp":   &types.AttributeValueMemberN{Value: strconv.FormatInt(expires, 10)},
		},
	})
	return translate("count request", err)
}
