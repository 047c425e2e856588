package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/redact"
)

// SeqConflictError says that a run's counter moved since the head the
// caller saw. Current is the head as it is now (DynamoDB returns it with the
// cancellation), so a retry needs no extra read.
type SeqConflictError struct {
	Current Head
}

func (e *SeqConflictError) Error() string {
	return fmt.Sprintf("store: run %s moved to seq %d", e.Current.RunID, e.Current.LastSeq)
}

// Batch is what one Append writes atomically: the run's events, changes to
// its head, and the domain items the events describe.
type Batch struct {
	Events []redact.Envelope
	Head   HeadChange
	Ops    []Op
}

// HeadChange is a change to a run's head. Zero fields change nothing.
type HeadChange struct {
	Status string
	// Reserved and Spent are added to the budget; Available moves by
	// -(Reserved+Spent).
	Reserved, Spent int64
	// MinAvailable, when set, conditions the write on available >= it.
	MinAvailable *int64
	// WantStatus, when set, conditions the write on the current status.
	WantStatus string
	// Pending is added to the run's count of pending approvals.
	Pending int64
	// Tokens, when set, replaces the run's token hashes and records when:
	// the one-time issue of a triggered run's tokens.
	Tokens *TokenHashes
}

// TokenHashes are a run's new token hashes.
type TokenHashes struct {
	Session, Runner, IssuedAt string
}

// Op is one domain write inside an Append. Failed is what Append returns
// when the op's own condition does not hold.
type Op struct {
	item   types.TransactWriteItem
	failed error
}

// Append writes b to a run whose head the caller saw as seen: it advances
// the counter from seen.LastSeq, puts each event at the next seq, applies
// the head change and the ops, all in one TransactWriteItems conditioned on
// the counter still being seen.LastSeq. Every write to a run goes through
// here, so a successful Append also proves that nothing in the run changed
// since seen. On a counter conflict it returns *SeqConflictError with the
// current head; on an op's condition, that op's error. It retries only
// what DynamoDB cancelled for conflict or throttling (transactWrite), never
// a failed condition: that is the caller's to resolve.
func (s *Store) Append(ctx context.Context, seen Head, at string, b Batch) (Head, error) {
	if len(b.Events) == 0 {
		return Head{}, errors.New("store: append without events")
	}
	pk := runPK(seen.RunID)
	next := seen.LastSeq + int64(len(b.Events))

	update := "SET last_seq = :next"
	cond := "last_seq = :seen"
	vals := map[string]types.AttributeValue{
		":seen": num(seen.LastSeq),
		":next": num(next),
	}
	names := map[string]string{}
	if b.Head.Status != "" {
		update += ", #status = :status"
		names["#status"] = "status"
		vals[":status"] = &types.AttributeValueMemberS{Value: b.Head.Status}
	}
	if b.Head.WantStatus != "" {
		cond += " AND #status = :want"
		names["#status"] = "status"
		vals[":want"] = &types.AttributeValueMemberS{Value: b.Head.WantStatus}
	}
	if t := b.Head.Tokens; t != nil {
		update += ", token_hash = :th, runner_token_hash = :rh, token_issued_at = :ti"
		vals[":th"] = &types.AttributeValueMemberS{Value: t.Session}
		vals[":rh"] = &types.AttributeValueMemberS{Value: t.Runner}
		vals[":ti"] = &types.AttributeValueMemberS{Value: t.IssuedAt}
	}
	if b.Head.Reserved != 0 || b.Head.Spent != 0 {
		update += " ADD budget_reserved :r, budget_spent :s, budget_available :a"
		vals[":r"] = num(b.Head.Reserved)
		vals[":s"] = num(b.Head.Spent)
		vals[":a"] = num(-(b.Head.Reserved + b.Head.Spent))
	}
	if b.Head.Pending != 0 {
		if strings.Contains(update, " ADD ") {
			update += ", pending_approvals :p"
		} else {
			update += " ADD pending_approvals :p"
		}
		vals[":p"] = num(b.Head.Pending)
	}
	if b.Head.MinAvailable != nil {
		cond += " AND budget_available >= :min"
		vals[":min"] = num(*b.Head.MinAvailable)
	}
	headUpdate := &types.Update{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk, "HEAD"),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(names) > 0 {
		headUpdate.ExpressionAttributeNames = names
	}
	items := []types.TransactWriteItem{{Update: headUpdate}}
	for i, ev := range b.Events {
		av, err := eventItem(seen.RunID, seen.LastSeq+int64(i)+1, ev, at)
		if err != nil {
			return Head{}, err
		}
		items = append(items, putNew(s.table, av))
	}
	for _, op := range b.Ops {
		items = append(items, op.item)
	}

	err := s.transactWrite(ctx, items)
	if err == nil {
		h := seen
		h.LastSeq = next
		if b.Head.Status != "" {
			h.Status = b.Head.Status
		}
		h.BudgetReserved += b.Head.Reserved
		h.BudgetSpent += b.Head.Spent
		h.BudgetAvailable -= b.Head.Reserved + b.Head.Spent
		h.PendingApprovals += b.Head.Pending
		if t := b.Head.Tokens; t != nil {
			h.TokenHash, h.RunnerTokenHash, h.TokenIssuedAt = t.Session, t.Runner, t.IssuedAt
		}
		return h, nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return Head{}, translate("append to "+seen.RunID, err)
	}
	reasons := tce.CancellationReasons
	if len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
		if reasons[0].Item == nil {
			return Head{}, fmt.Errorf("store: append to %s: %w", seen.RunID, ErrNotFound)
		}
		var cur Head
		if err := attributevalue.UnmarshalMap(reasons[0].Item, &cur); err != nil {
			return Head{}, fmt.Errorf("store: decode head of %s: %w", seen.RunID, err)
		}
		if cur.LastSeq != seen.LastSeq {
			return Head{}, &SeqConflictError{Current: cur}
		}
		return cur, fmt.Errorf("store: append to %s: head: %w", seen.RunID, ErrConditionFailed)
	}
	first := 1 + len(b.Events)
	for i, r := range reasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		if i >= first && i-first < len(b.Ops) {
			return Head{}, fmt.Errorf("store: append to %s: %w", seen.RunID, b.Ops[i-first].failed)
		}
		// An event slot already taken means the counter lied; treat it as
		// a conflict the caller resolves by re-reading.
		return Head{}, fmt.Errorf("store: append to %s: event slot taken: %w", seen.RunID, ErrConditionFailed)
	}
	return Head{}, translate("append to "+seen.RunID, err)
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Event is a stored ledger entry, as read back. It is a plain value: the
// ledger's read path cannot be used to construct an envelope.
type Event struct {
	Seq  int64  `dynamodbav:"seq"`
	Type string `dynamodbav:"type"`
	At   string `dynamodbav:"at"`
	Data string `dynamodbav:"data"`
}

func eventSK(seq int64) string { return fmt.Sprintf("EV#%020d", seq) }

func eventItem(runID string, seq int64, ev redact.Envelope, at string) (map[string]types.AttributeValue, error) {
	if !ev.Valid() {
		return nil, fmt.Errorf("store: run %s seq %d: refusing an envelope not built by redact", runID, seq)
	}
	return item(runPK(runID), eventSK(seq), Event{Seq: seq, Type: string(ev.Type()), At: at, Data: string(ev.Data())})
}

// Events returns up to limit events of a run with seq > after, in order.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":   &types.AttributeValueMemberS{Value: runPK(runID)},
			":from": &types.AttributeValueMemberS{Value: eventSK(after + 1)},
			":to":   &types.AttributeValueMemberS{Value: "EV#~"},
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, translate("events of "+runID, err)
	}
	events := make([]Event, 0, len(out.Items))
	for _, av := range out.Items {
		var e Event
		if err := attributevalue.UnmarshalMap(av, &e); err != nil {
			return nil, fmt.Errorf("store: decode event of %s: %w", runID, err)
		}
		events = append(events, e)
	}
	return events, nil
}
