package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The ledger export's checkpoint of a run (docs/ledger-export.md): the last
// seq delivered, at EXPORT#<run>/HEAD, a partition of its own so that the
// exporter's role can write these items and nothing of a run's
// (dynamodb:LeadingKeys).
type exportCheckpoint struct {
	Through int64  `dynamodbav:"exported_through"`
	At      string `dynamodbav:"exported_at"`
}

func exportPK(runID string) string { return "EXPORT#" + runID }

// ExportedThrough returns the last seq of runID's ledger the export has
// delivered, 0 when none.
func (s *Store) ExportedThrough(ctx context.Context, runID string) (int64, error) {
	var c exportCheckpoint
	err := s.get(ctx, exportPK(runID), "HEAD", &c)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return c.Through, err
}

// AdvanceExport moves runID's checkpoint from from to to (to > from), on
// the checkpoint still being from: ErrConditionFailed when another
// consumer moved it first.
func (s *Store) AdvanceExport(ctx context.Context, runID string, from, to int64, at string) error {
	if to <= from {
		return fmt.Errorf("store: advance export of %s from %d to %d: %w", runID, from, to, ErrInvalidRequest)
	}
	cond := "exported_through = :from"
	vals := map[string]types.AttributeValue{
		":to": &types.AttributeValueMemberN{Value: strconv.FormatInt(to, 10)},
		":at": &types.AttributeValueMemberS{Value: at},
	}
	if from == 0 {
		cond = "attribute_not_exists(pk)"
	} else {
		vals[":from"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(from, 10)}
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyOf(exportPK(runID), "HEAD"),
		UpdateExpression:          aws.String("SET exported_through = :to, exported_at = :at"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	return translate(fmt.Sprintf("advance export of %s to %d", runID, to), err)
}
