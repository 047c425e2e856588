// Package store is fluidbox's only door to DynamoDB.
//
// Everything lives in one table keyed by pk/sk strings; a run's items share
// its partition, so everything one decision touches is one partition and
// one transaction. DynamoDB's errors never leave this package: conditional
// failures become the sentinels below; a request DynamoDB refuses as
// invalid becomes ErrInvalidRequest (a bug in fluidbox, answered 500, not
// worth a retry); anything else (throttling, a 5xx, a closed connection, a
// transaction still cancelled for conflict after its retries) becomes
// ErrUnavailable, which callers answer with deny / 503 — never allow.
// Transactions DynamoDB cancels for conflict or throttling are retried
// here, in one place (transactWrite); single-item conflicts by the SDK
// (RetryConflicts).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Sentinels. Callers test them with errors.Is.
var (
	// ErrNotFound: the item does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: an item that must be new already exists.
	ErrExists = errors.New("store: already exists")
	// ErrConditionFailed: a domain condition of a write did not hold.
	ErrConditionFailed = errors.New("store: condition failed")
	// ErrUnavailable: DynamoDB could not be reached or refused to work.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrInvalidRequest: DynamoDB refused a request as malformed (a
	// ValidationException, or a transaction cancelled with
	// ValidationError). Retrying cannot help: it is a bug.
	ErrInvalidRequest = errors.New("store: request refused as invalid")
)

// Store reads and writes fluidbox's table.
type Store struct {
	db    *dynamodb.Client
	table string
	// frozen keeps what RunState read of runs' frozen state (runstate.go).
	frozen frozenMemo
}

// New returns a Store over db and the named table.
func New(db *dynamodb.Client, table string) *Store {
	return &Store{db: db, table: table}
}

// Table returns the table's name.
func (s *Store) Table() string { return s.table }

// The secondary index of pending approvals and listings.
const (
	gsi1       = "gsi1"
	attrPK     = "pk"
	attrSK     = "sk"
	attrGSI1PK = "gsi1pk"
	attrGSI1SK = "gsi1sk"
)

// CreateTable creates the table with the schema template.yaml declares. It
// is for the dev server and tests; in AWS the stack owns the table. An
// existing table is not an error.
func (s *Store) CreateTable(ctx context.Context) error {
	str := types.ScalarAttributeTypeS
	_, err := s.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(s.table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: str},
			{AttributeName: aws.String(attrSK), AttributeType: str},
			{AttributeName: aws.String(attrGSI1PK), AttributeType: str},
			{AttributeName: aws.String(attrGSI1SK), AttributeType: str},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(gsi1),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrGSI1PK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrGSI1SK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return nil
	}
	return translate("create table", err)
}

// translate maps a DynamoDB error to the package's sentinels.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("store: %s: %w", op, ErrConditionFailed)
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return fmt.Errorf("store: %s: %w: %s", op, ErrInvalidRequest, api.ErrorMessage())
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ValidationError" {
				return fmt.Errorf("store: %s: %w: %s", op, ErrInvalidRequest, aws.ToString(r.Message))
			}
		}
	}
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("store: %s: table missing: %w", op, ErrUnavailable)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("store: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("store: %s: %w: %v", op, ErrUnavailable, err)
}

// conditionFailed says whether a transaction was cancelled because a
// condition of one of its items did not hold.
func conditionFailed(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

// TimeLayout is how times are stored: RFC 3339 in UTC with a fixed nine
// fractional digits, so that stored times compare correctly as strings (in
// condition expressions and in sort keys).
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// FormatTime formats t for storage.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }
