package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// query runs in page by page and hands every item to visit, in order, until
// the items end or visit returns more false or an error (returned as is).
// op names the query in a DynamoDB error.
func (s *Store) query(ctx context.Context, op string, in *dynamodb.QueryInput, visit func(map[string]types.AttributeValue) (more bool, err error)) error {
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return translate(op, err)
		}
		for _, av := range out.Items {
			if more, err := visit(av); err != nil || !more {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// queryPrefix visits every item of a partition whose sort key starts with
// prefix, in order, with consistent reads.
func (s *Store) queryPrefix(ctx context.Context, pk, prefix string, visit func(map[string]types.AttributeValue) error) error {
	_, err := s.queryPrefixUpTo(ctx, pk, prefix, 0, visit)
	return err
}

// queryPrefixUpTo is queryPrefix that stops after limit items (above zero);
// cut reports that the partition holds more.
func (s *Store) queryPrefixUpTo(ctx context.Context, pk, prefix string, limit int, visit func(map[string]types.AttributeValue) error) (cut bool, err error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk},
			":p":  &types.AttributeValueMemberS{Value: prefix},
		},
		ConsistentRead: aws.Bool(true),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit + 1)) // one more says whether there is more
	}
	n := 0
	err = s.query(ctx, "query "+pk+"/"+prefix, in, func(av map[string]types.AttributeValue) (bool, error) {
		if limit > 0 && n == limit {
			cut = true
			return false, nil
		}
		n++
		if err := visit(av); err != nil {
			return false, fmt.Errorf("store: decode %s/%s: %w", pk, prefix, err)
		}
		return true, nil
	})
	return cut, err
}

// indexQuery is a listing of one partition of gsi1. The index is eventually
// consistent: a listed item may have changed since, and one written a
// moment ago may be missing.
type indexQuery struct {
	op     string // the listing, in a DynamoDB error ("list members")
	item   string // an item, in a decode error ("member")
	pk     string // the gsi1 partition
	before string // when set, only sort keys below it
	after  string // when set, only sort keys above it
	limit  int    // when above zero, stop after this many items
}

// queryIndex visits the items of q's partition of gsi1 in index order.
func (s *Store) queryIndex(ctx context.Context, q indexQuery, visit func(map[string]types.AttributeValue) error) error {
	cond := "gsi1pk = :p"
	values := map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: q.pk}}
	if q.before != "" {
		cond += " AND gsi1sk < :before"
		values[":before"] = &types.AttributeValueMemberS{Value: q.before}
	}
	if q.after != "" {
		cond += " AND gsi1sk > :after"
		values[":after"] = &types.AttributeValueMemberS{Value: q.after}
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(gsi1),
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeValues: values,
	}
	n := 0
	return s.query(ctx, q.op, in, func(av map[string]types.AttributeValue) (bool, error) {
		if err := visit(av); err != nil {
			return false, fmt.Errorf("store: decode %s: %w", q.item, err)
		}
		n++
		return q.limit <= 0 || n < q.limit, nil
	})
}

// listIndex lists q's partition of gsi1 as values of T; nil when it is
// empty.
func listIndex[T any](ctx context.Context, s *Store, q indexQuery) ([]T, error) {
	var out []T
	if err := s.queryIndex(ctx, q, collect(&out)); err != nil {
		return nil, err
	}
	return out, nil
}

// collect returns a visit function that decodes each item as a T and
// appends it to out.
func collect[T any](out *[]T) func(map[string]types.AttributeValue) error {
	return func(av map[string]types.AttributeValue) error {
		var v T
		if err := attributevalue.UnmarshalMap(av, &v); err != nil {
			return err
		}
		*out = append(*out, v)
		return nil
	}
}

// putClaimed writes, in one transaction, a new item at pk/HEAD and the
// claim claimPK/HEAD pointing at id (a unique name or repository): both are
// written or neither. It fails with ErrExists when either exists already,
// and with translate(op, ...) otherwise.
func (s *Store) putClaimed(ctx context.Context, op, pk string, v any, claimPK, id string) error {
	head, err := item(pk, "HEAD", v)
	if err != nil {
		return err
	}
	claim, err := item(claimPK, "HEAD", nameItem{ID: id})
	if err != nil {
		return err
	}
	return s.transactOp(ctx, op, []types.TransactWriteItem{putNew(s.table, head), putNew(s.table, claim)})
}

// putItemNew writes av unless an item with its key exists; then it fails
// with ErrConditionFailed. op names the write in errors.
func (s *Store) putItemNew(ctx context.Context, op string, av map[string]types.AttributeValue) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                av,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return translate(op, err)
}
