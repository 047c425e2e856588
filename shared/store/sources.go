package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SourceKey is the key of the count of approvals pending across every run
// of one trigger source (a pull request's repository and author, a
// schedule). The key holds the source's SHA-256, not the source itself,
// so any source fits a key.
func SourceKey(source string) Key {
	sum := sha256.Sum256([]byte(source))
	return Key{"SRC#" + hex.EncodeToString(sum[:]), "PENDING"}
}

// SourcePending is the item at a SourceKey.
type SourcePending struct {
	Pending int64 `dynamodbav:"pending"`
}

// SourcePendingOp is the op that adds delta (1 or -1) to the count at k.
// Adding holds only while the count is below limit, taking away only while
// it is above zero; otherwise the Append fails with failed. So the count
// never passes the limit however many runs file at once, and a settlement
// never takes it below zero.
func (s *Store) SourcePendingOp(k Key, delta int64, limit int, failed error) Op {
	cond, vals := "#p > :zero", map[string]types.AttributeValue{":zero": num(0)}
	if delta > 0 {
		cond, vals = "attribute_not_exists(#p) OR #p < :limit", map[string]types.AttributeValue{":limit": &types.AttributeValueMemberN{Value: strconv.Itoa(limit)}}
	}
	vals[":d"] = num(delta)
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       k.av(),
		UpdateExpression:          aws.String("ADD #p :d"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#p": "pending"},
		ExpressionAttributeValues: vals,
	}}, failed: failed}
}
