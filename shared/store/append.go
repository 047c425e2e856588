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
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// SeqConflictError says that a run's head moved since the one the caller
// saw (another write changed it: its version, or for a numbered append
// its counter). Current is the head as it is now (DynamoDB returns it with
// the cancellation), so a retry needs no extra read.
type SeqConflictError struct {
	Current Head
}

func (e *SeqConflictError) Error() string {
	return fmt.Sprintf("store: run %s moved to version %d, seq %d", e.Current.RunID, e.Current.Ver, e.Current.LastSeq)
}

// ErrFenced: a decision's fence shard has moved past the generation the
// decision was made on (the run ended, its budget crossed zero or a grant
// was revoked since); it must be made again on a fresh head.
var ErrFenced = errors.New("store: the run's decisions were fenced")

// Batch is what one Append writes atomically: the run's events, changes to
// its head, and the domain items the events describe.
type Batch struct {
	Events []redact.Envelope
	Head   HeadChange
	Ops    []Op
}

// HeadChange is a change to a run's head. Zero fields change nothing.
type HeadChange struct {
	Status vocab.RunStatus
	// Reserved and Spent are added to the budget; Available moves by
	// -(Reserved+Spent).
	Reserved, Spent int64
	// MinAvailable, when set, conditions the write on available >= it.
	MinAvailable *int64
	// WantStatus, when set, conditions the write on the current status.
	WantStatus vocab.RunStatus
	// Pending is added to the run's count of pending approvals, Inputs to
	// its count of pending input requests.
	Pending int64
	Inputs  int64
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
	// numbered: the op refers to the seq its batch's events get, so the
	// batch is numbered in its own transaction.
	numbered bool
}

// fences says whether b, written on seen, changes what a decision made on
// seen would answer in a way no decision's own transaction checks: the
// run's end, the budget crossing zero either way (the budget stage's
// answer flips), or a session grant deleted.
func (b Batch) fences(seen Head) bool {
	if b.Head.Status == vocab.Ended && seen.Status != vocab.Ended {
		return true
	}
	after := seen.BudgetAvailable - b.Head.Reserved - b.Head.Spent
	if (seen.BudgetAvailable > 0) != (after > 0) {
		return true
	}
	for _, op := range b.Ops {
		if d := op.item.Delete; d != nil {
			if sk, ok := d.Key[attrSK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, grantPrefix) {
				return true
			}
		}
	}
	return false
}

// Numbered says whether b is numbered as it is written: an op of it
// refers to its events' seq (see Append).
func (b Batch) Numbered() bool {
	for _, op := range b.Ops {
		if op.numbered {
			return true
		}
	}
	return false
}

// Append writes b to a run whose head the caller saw as seen, in one
// TransactWriteItems, in one of three ways:
//
//   - A decision (no head change, nothing fenced): a ConditionCheck that
//     one of the run's fence shards is still at seen.FencedGen, the events
//     as unsequenced items, and the ops. It writes nothing another
//     decision writes, so a run's decisions do not queue on one item. When
//     the fence moved it fails with ErrFenced.
//   - A change to the head: the head updated on its version (seen.Ver)
//     and b's head conditions, the events as unsequenced items, the ops.
//     A change that fences decisions (see fences) also raises the head's
//     fence_gen, and its events take the new generation; the caller then
//     finishes the fence with RaiseFence.
//   - A batch whose ops refer to its events' seq (a shadow difference's
//     first_seq): numbered at once, on the head's version and counter, as
//     the sequencer numbers; the caller sequences what is pending first.
//
// On a moved head it returns *SeqConflictError with the current head; on
// an op's condition, that op's error. It retries what DynamoDB cancelled
// for conflict or throttling (on another fence shard for a decision),
// never a failed condition: that is the caller's to resolve. An
// unsequenced event is numbered later by Number.
func (s *Store) Append(ctx context.Context, seen Head, at string, b Batch) (Head, error) {
	if len(b.Events) == 0 {
		return Head{}, errors.New("store: append without events")
	}
	fences := b.fences(seen)
	switch {
	case b.Numbered() && fences:
		return Head{}, fmt.Errorf("store: append to %s: a numbered batch cannot fence", seen.RunID)
	case b.Numbered():
		return s.appendHead(ctx, seen, at, b, false, true)
	case b.Head == (HeadChange{}) && !fences:
		return s.record(ctx, seen, at, b)
	}
	return s.appendHead(ctx, seen, at, b, fences, false)
}

// appendHead is Append of a batch that writes the head: the head's update
// under its version (and last_seq when the batch is numbered), the events
// and the ops, in one transaction.
func (s *Store) appendHead(ctx context.Context, seen Head, at string, b Batch, fences, numbered bool) (Head, error) {
	gen := seen.FenceGen
	if fences {
		gen++
	}
	next := seen.LastSeq
	if numbered {
		next += int64(len(b.Events))
	}
	items := []types.TransactWriteItem{{Update: s.headUpdate(seen, b.Head, fences, gen, numbered, next)}}
	batch := batchKey()
	for i, ev := range b.Events {
		var av map[string]types.AttributeValue
		var err error
		if numbered {
			av, err = eventItem(seen.RunID, seen.LastSeq+int64(i)+1, ev, at)
		} else {
			av, err = s.unsequencedItem(seen.RunID, gen, batch, i, ev, at)
		}
		if err != nil {
			return Head{}, err
		}
		items = append(items, putNew(s.table, av))
	}
	for _, op := range b.Ops {
		items = append(items, op.item)
	}
	if err := s.transactWriteN(ctx, items, hotAttempts); err != nil {
		return appendFailure(seen, b, numbered, err)
	}
	return advanced(seen, b.Head, gen, next), nil
}

// headUpdate is the head's half of appendHead: the version moves by one
// under the version seen, and last_seq to next under the one seen when
// the batch is numbered; the change's status, tokens, budget and pending
// count are written, under its wanted status and minimum budget.
func (s *Store) headUpdate(seen Head, c HeadChange, fences bool, gen int64, numbered bool, next int64) *types.Update {
	update := "SET ver = :nver"
	cond := "ver = :ver"
	if seen.Ver == 0 {
		// A head written before heads had a version; never a run that
		// does not exist.
		cond = "attribute_exists(pk) AND (attribute_not_exists(ver) OR ver = :ver)"
	}
	vals := map[string]types.AttributeValue{
		":ver":  num(seen.Ver),
		":nver": num(seen.Ver + 1),
	}
	if fences {
		update += ", fence_gen = :fg"
		vals[":fg"] = num(gen)
	}
	if numbered {
		update += ", last_seq = :next"
		cond += " AND last_seq = :seen"
		vals[":seen"] = num(seen.LastSeq)
		vals[":next"] = num(next)
	}
	names := map[string]string{}
	if c.Status != "" {
		update += ", #status = :status"
		names["#status"] = "status"
		vals[":status"] = &types.AttributeValueMemberS{Value: string(c.Status)}
	}
	if c.WantStatus != "" {
		cond += " AND #status = :want"
		names["#status"] = "status"
		vals[":want"] = &types.AttributeValueMemberS{Value: string(c.WantStatus)}
	}
	if t := c.Tokens; t != nil {
		update += ", token_hash = :th, runner_token_hash = :rh, token_issued_at = :ti"
		vals[":th"] = &types.AttributeValueMemberS{Value: t.Session}
		vals[":rh"] = &types.AttributeValueMemberS{Value: t.Runner}
		vals[":ti"] = &types.AttributeValueMemberS{Value: t.IssuedAt}
	}
	update += headCounters(c, vals)
	if c.MinAvailable != nil {
		cond += " AND budget_available >= :min"
		vals[":min"] = num(*c.MinAvailable)
	}
	u := &types.Update{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(runPK(seen.RunID), "HEAD"),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(names) > 0 {
		u.ExpressionAttributeNames = names
	}
	return u
}

// headCounters is the ADD clause of a head change's budget and pending
// counts ("" when it moves none), its values put in vals.
func headCounters(c HeadChange, vals map[string]types.AttributeValue) string {
	var adds []string
	if c.Reserved != 0 || c.Spent != 0 {
		adds = append(adds, "budget_reserved :r", "budget_spent :s", "budget_available :a")
		vals[":r"] = num(c.Reserved)
		vals[":s"] = num(c.Spent)
		vals[":a"] = num(-(c.Reserved + c.Spent))
	}
	if c.Pending != 0 {
		adds = append(adds, "pending_approvals :p")
		vals[":p"] = num(c.Pending)
	}
	if c.Inputs != 0 {
		adds = append(adds, "pending_inputs :i")
		vals[":i"] = num(c.Inputs)
	}
	if len(adds) == 0 {
		return ""
	}
	return " ADD " + strings.Join(adds, ", ")
}

// advanced is the head seen after appendHead wrote change c to it.
func advanced(seen Head, c HeadChange, gen, next int64) Head {
	h := seen
	h.Ver++
	h.LastSeq = next
	h.FenceGen = gen
	if c.Status != "" {
		h.Status = c.Status
	}
	h.BudgetReserved += c.Reserved
	h.BudgetSpent += c.Spent
	h.BudgetAvailable -= c.Reserved + c.Spent
	h.PendingApprovals += c.Pending
	h.PendingInputs += c.Inputs
	if t := c.Tokens; t != nil {
		h.TokenHash, h.RunnerTokenHash, h.TokenIssuedAt = t.Session, t.Runner, t.IssuedAt
	}
	return h
}

// appendFailure is appendHead's answer to a transaction that failed: a
// head that moved is a *SeqConflictError carrying it; a head that stood
// but refused the change (status, budget) is ErrConditionFailed with the
// head as it is; a head that is not there is ErrNotFound; an op's refused
// condition is that op's error.
func appendFailure(seen Head, b Batch, numbered bool, err error) (Head, error) {
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
		if cur.Ver != seen.Ver || numbered && cur.LastSeq != seen.LastSeq {
			return Head{}, &SeqConflictError{Current: cur}
		}
		return cur, fmt.Errorf("store: append to %s: head: %w", seen.RunID, ErrConditionFailed)
	}
	if err := opFailure(seen.RunID, reasons, 1+len(b.Events), b.Ops); err != nil {
		return Head{}, err
	}
	return Head{}, translate("append to "+seen.RunID, err)
}

// opFailure is the error of a transaction whose items from first on are
// ops, when one of its conditions failed; nil when none did.
func opFailure(runID string, reasons []types.CancellationReason, first int, ops []Op) error {
	for i, r := range reasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		if i >= first && i-first < len(ops) {
			err := fmt.Errorf("store: append to %s: %w", runID, ops[i-first].failed)
			if r.Item != nil {
				return &existingError{err: err, item: r.Item}
			}
			return err
		}
		// An event slot already taken: two writers raced on one key;
		// the caller resolves it by re-reading.
		return fmt.Errorf("store: append to %s: event slot taken: %w", runID, ErrConditionFailed)
	}
	return nil
}

// existingError is an op's failure that carries the item its condition
// was evaluated on (see PutNew).
type existingError struct {
	err  error
	item map[string]types.AttributeValue
}

func (e *existingError) Error() string { return e.err.Error() }
func (e *existingError) Unwrap() error { return e.err }

// Existing decodes into v the item at k that refused a PutNew with err,
// and reports whether err carried that item (not another op's). It never
// reads the table: false means the caller must read the item itself.
func Existing(err error, k Key, v any) bool {
	var e *existingError
	if !errors.As(err, &e) {
		return false
	}
	pk, _ := e.item[attrPK].(*types.AttributeValueMemberS)
	sk, _ := e.item[attrSK].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil || pk.Value != k.PK || sk.Value != k.SK {
		return false
	}
	return attributevalue.UnmarshalMap(e.item, v) == nil
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
