package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Calls reads the call records of a run's toolCallIDs with consistent
// reads, in one BatchGetItem for up to MaxPage ids (and one more per
// MaxPage after), and returns those that exist by tool_call_id. The model
// proxy reads every tool result new in a request this way, so a request
// costs one read however many parallel calls it answers. An id read twice
// is asked once. Keys DynamoDB leaves unprocessed are asked again, a
// bounded number of times; past that the answer is ErrUnavailable, never a
// partial map (a missing record would read as "never asked").
func (s *Store) Calls(ctx context.Context, runID string, toolCallIDs []string) (map[string]Call, error) {
	out := make(map[string]Call, len(toolCallIDs))
	seen := make(map[string]bool, len(toolCallIDs))
	var keys []map[string]types.AttributeValue
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := s.batchGetRun(ctx, keys, func(av map[string]types.AttributeValue) error {
			var c Call
			if err := attributevalue.UnmarshalMap(av, &c); err != nil {
				return fmt.Errorf("store: decode call of %s: %w", runID, err)
			}
			out[c.ToolCallID] = c
			return nil
		})
		keys = keys[:0]
		return err
	}
	for _, id := range toolCallIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		keys = append(keys, keyOf(runPK(runID), callSK(id)))
		if len(keys) == MaxPage {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// batchGetRun reads keys (at most MaxPage) with consistent reads and hands
// each item found to each.
func (s *Store) batchGetRun(ctx context.Context, keys []map[string]types.AttributeValue, each func(map[string]types.AttributeValue) error) error {
	req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0; attempt++ {
		if attempt == sdkAttempts {
			return fmt.Errorf("store: batch get calls: keys left unprocessed: %w", ErrUnavailable)
		}
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * txBackoffMin)
			select {
			case <-ctx.Done():
				t.Stop()
				return translate("batch get calls", ctx.Err())
			case <-t.C:
			}
		}
		res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return translate("batch get calls", err)
		}
		for _, av := range res.Responses[s.table] {
			if err := each(av); err != nil {
				return err
			}
		}
		req = res.UnprocessedKeys
	}
	return nil
}

// UnverifiedKey is the key of the item a run that only records the model
// proxy's findings (verify "record") writes, with attribute_not_exists,
// beside the tool.unverified event of toolCallID: the finding is recorded
// once, however many later requests carry the same result again, and
// whichever process sees it first.
func UnverifiedKey(runID, toolCallID string) Key {
	return Key{runPK(runID), "UNVERIFIED#" + toolCallID}
}

// Unverified is that item: the finding's reason and when it was made.
type Unverified struct {
	ToolCallID string `dynamodbav:"tool_call_id"`
	Reason     string `dynamodbav:"reason"`
	At         string `dynamodbav:"at"`
}

// HaltedKey is the key of the item the model proxy's halt of a run writes
// beside run.halted, in the same append: the table's stream carries its
// insert to the notify function (run.halted on the bus), whatever shape
// the ledger's own items take.
func HaltedKey(runID string) Key { return Key{runPK(runID), "HALTED"} }

// Halted is that item.
type Halted struct {
	RunID      string `dynamodbav:"run_id"`
	ToolCallID string `dynamodbav:"tool_call_id"`
	Reason     string `dynamodbav:"reason"`
	At         string `dynamodbav:"at"`
}
