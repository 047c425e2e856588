package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The write primitives below name an item by a Key from this file, and
// build the request; the key layout stays here, with the reads that use
// the same keys. A condition on an item is always the store's own: the
// moves of a call are written by moves.go under shared/call's table, and
// the generic puts and deletes here carry only existence conditions.

// Key is an item's primary key.
type Key struct{ PK, SK string }

func (k Key) av() map[string]types.AttributeValue { return keyOf(k.PK, k.SK) }

// CallKey is the key of a run's call record for toolCallID.
func CallKey(runID, toolCallID string) Key { return Key{runPK(runID), callSK(toolCallID)} }

// ApprovalKey is the key of a run's approval row for toolCallID.
func ApprovalKey(runID, toolCallID string) Key { return Key{runPK(runID), approvalSK(toolCallID)} }

// ApprovalRefKey is the key of the pointer from an approval id to its row.
func ApprovalRefKey(approvalID string) Key { return Key{"APRID#" + approvalID, "HEAD"} }

// PendingIndex is the gsi1 partition of pending approvals.
const PendingIndex = "PENDING"

// PutNew is the op that writes v at k unless an item with that key exists;
// then the Append fails with failed, and the error carries the item that
// was there (read it with Existing): a retry learns what was recorded
// from its own cancelled write, with no read of its own.
func (s *Store) PutNew(k Key, v any, failed error) (Op, error) {
	av, err := item(k.PK, k.SK, v)
	if err != nil {
		return Op{}, err
	}
	put := putNew(s.table, av)
	put.Put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return Op{item: put, failed: failed}, nil
}

// Put is the op that writes v at k, replacing any item there.
func (s *Store) Put(k Key, v any) (Op, error) {
	av, err := item(k.PK, k.SK, v)
	if err != nil {
		return Op{}, err
	}
	return Op{item: types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: av}}, failed: ErrConditionFailed}, nil
}

// Update is a change to one item's attributes.
type Update struct {
	// Set assigns attributes; Remove deletes them.
	Set    map[string]any
	Remove []string
	// Cond is the condition the item must meet, written over Names
	// (#placeholders) and Values (:placeholders); "" for none. Every
	// placeholder given must be used in Cond.
	Cond   string
	Names  map[string]string
	Values map[string]any
}

// expression builds u's update expression and its names and values.
func (u Update) expression() (string, map[string]string, map[string]types.AttributeValue, error) {
	names := map[string]string{}
	vals := map[string]types.AttributeValue{}
	for k, v := range u.Names {
		names[k] = v
	}
	for k, v := range u.Values {
		av, err := attributevalue.Marshal(v)
		if err != nil {
			return "", nil, nil, fmt.Errorf("store: marshal %s: %w", k, err)
		}
		vals[k] = av
	}
	attrs := make([]string, 0, len(u.Set))
	for a := range u.Set {
		attrs = append(attrs, a)
	}
	sort.Strings(attrs)
	expr := ""
	for i, a := range attrs {
		n, v := "#u"+strconv.Itoa(i), ":u"+strconv.Itoa(i)
		av, err := attributevalue.Marshal(u.Set[a])
		if err != nil {
			return "", nil, nil, fmt.Errorf("store: marshal %s: %w", a, err)
		}
		names[n], vals[v] = a, av
		if i == 0 {
			expr = "SET "
		} else {
			expr += ", "
		}
		expr += n + " = " + v
	}
	for i, a := range u.Remove {
		n := "#r" + strconv.Itoa(i)
		names[n] = a
		if i == 0 {
			if expr != "" {
				expr += " "
			}
			expr += "REMOVE "
		} else {
			expr += ", "
		}
		expr += n
	}
	if expr == "" {
		return "", nil, nil, errors.New("store: an update that changes nothing")
	}
	return expr, names, vals, nil
}

// updateOp is the op that applies u to the item at k; when u.Cond does not
// hold the Append fails with failed.
func (s *Store) updateOp(k Key, u Update, failed error) (Op, error) {
	expr, names, vals, err := u.expression()
	if err != nil {
		return Op{}, err
	}
	up := &types.Update{
		TableName:                aws.String(s.table),
		Key:                      k.av(),
		UpdateExpression:         aws.String(expr),
		ExpressionAttributeNames: names,
	}
	if len(vals) > 0 {
		up.ExpressionAttributeValues = vals
	}
	if u.Cond != "" {
		up.ConditionExpression = aws.String(u.Cond)
	}
	return Op{item: types.TransactWriteItem{Update: up}, failed: failed}, nil
}

// DeleteExisting is the op that deletes the item at k; when there is none
// the Append fails with failed.
func (s *Store) DeleteExisting(k Key, failed error) Op {
	return Op{item: types.TransactWriteItem{Delete: &types.Delete{
		TableName:           aws.String(s.table),
		Key:                 k.av(),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	}}, failed: failed}
}

// updateItem applies u to the item at k on its own, outside any Append.
// When u.Cond does not hold it fails with ErrConditionFailed and, if old is
// not nil, decodes the item as it was into old (left zero when there is
// none). op names the write in errors.
func (s *Store) updateItem(ctx context.Context, op string, k Key, u Update, old any) error {
	expr, names, vals, err := u.expression()
	if err != nil {
		return err
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 k.av(),
		UpdateExpression:                    aws.String(expr),
		ExpressionAttributeNames:            names,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(vals) > 0 {
		in.ExpressionAttributeValues = vals
	}
	if u.Cond != "" {
		in.ConditionExpression = aws.String(u.Cond)
	}
	_, err = s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && old != nil && ccf.Item != nil {
		if derr := attributevalue.UnmarshalMap(ccf.Item, old); derr != nil {
			return fmt.Errorf("store: %s: decode the item as it was: %w", op, derr)
		}
	}
	return translate(op, err)
}

// Get reads the item at k into v with a consistent read; ErrNotFound when
// there is none.
func (s *Store) Get(ctx context.Context, k Key, v any) error {
	return s.get(ctx, k.PK, k.SK, v)
}
