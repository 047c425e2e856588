package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// OpenKey is the key of the set of leases on runID's open requests. It
// lives in its own partition per run, outside the run's, like the rate
// counters: reading a run's items never meets it, and counting never
// contends with a decision.
func OpenKey(runID string) Key { return Key{"OPEN#" + runID, "HEAD"} }

// The item at an OpenKey: the string set of leases, and their number,
// kept beside it because a condition on size() of a set that may be
// missing is not portable (minidyn refuses it) and a number is. The set
// always holds leaseAnchor too, so it never becomes empty: DynamoDB drops
// an emptied set, but minidyn keeps a typeless value that then breaks
// every Query of the table.
const (
	attrLeases  = "leases"
	attrHeld    = "held"
	leaseAnchor = "anchor"
)

// HoldLease adds lease to the set at k unless the set already holds limit
// leases (expired ones included: the caller drops those first), in which
// case it fails with ErrConditionFailed and adds nothing. One conditional
// UpdateItem, so every instance counts into the same set atomically.
// expires (Unix seconds) goes in the table's TTL attribute, so a set
// nobody touches again is deleted by DynamoDB.
func (s *Store) HoldLease(ctx context.Context, k Key, lease string, limit int, expires int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      k.av(),
		UpdateExpression:         aws.String("ADD #n :one, #l :lease SET #ttl = :exp"),
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :limit"),
		ExpressionAttributeNames: map[string]string{"#n": attrHeld, "#l": attrLeases, "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   &types.AttributeValueMemberN{Value: "1"},
			":lease": &types.AttributeValueMemberSS{Value: []string{lease, leaseAnchor}},
			":limit": &types.AttributeValueMemberN{Value: strconv.Itoa(limit)},
			":exp":   &types.AttributeValueMemberN{Value: strconv.FormatInt(expires, 10)},
		},
	})
	return translate("hold lease", err)
}

// Leases reads the leases held at k, consistently; none when nothing is
// held.
func (s *Store) Leases(ctx context.Context, k Key) ([]string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            k.av(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, translate("read leases", err)
	}
	switch v := out.Item[attrLeases].(type) {
	case nil:
		return nil, nil
	case *types.AttributeValueMemberSS:
		var leases []string
		for _, l := range v.Value {
			if l != leaseAnchor {
				leases = append(leases, l)
			}
		}
		return leases, nil
	}
	return nil, translate("read leases", errLeasesType)
}

var errLeasesType = errors.New("the leases attribute is not a string set")

// DropLeases removes leases from the set at k and their count from its
// number, only if every one of them is still there (otherwise
// ErrConditionFailed, and nothing changes): so a lease dropped twice, by
// its request and by another instance's purge, is counted off once.
func (s *Store) DropLeases(ctx context.Context, k Key, leases []string) error {
	if len(leases) == 0 {
		return nil
	}
	vals := map[string]types.AttributeValue{
		":leases": &types.AttributeValueMemberSS{Value: leases},
		":minus":  &types.AttributeValueMemberN{Value: strconv.Itoa(-len(leases))},
	}
	cond := make([]string, len(leases))
	for i, l := range leases {
		name := ":l" + strconv.Itoa(i)
		vals[name] = &types.AttributeValueMemberS{Value: l}
		cond[i] = "contains(#l, " + name + ")"
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       k.av(),
		UpdateExpression:          aws.String("ADD #n :minus DELETE #l :leases"),
		ConditionExpression:       aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:  map[string]string{"#n": attrHeld, "#l": attrLeases},
		ExpressionAttributeValues: vals,
	})
	return translate("drop leases", err)
}
