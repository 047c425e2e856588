package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/redact"
)

// Deciding apart from sequencing (docs/architecture.md, "Ledger"): a
// decision's transaction writes its events as unsequenced items and
// checks one fence shard; the sequencer, the only writer of a run's
// counter, numbers them later. The items:
//
//	RUN#<id> / Q#<gen>#<unix nanos>#<random>#<index>   an event not numbered yet
//	RUN#<id> / FENCE#<k>                              fence shard k: gen (absent = 0)

// FenceShards is how many fence shards a run has. A decision checks one
// at random: a check holds its item as a write does, so two decisions in
// flight on one shard conflict, and with 64 shards and 32 parallel
// callers most decisions meet none. A fence change writes all of them.
const FenceShards = 64

// MaxNumbered is the most events one Number numbers: its transaction has
// the head plus two actions an event, within DynamoDB's 100.
const MaxNumbered = 49

const (
	unsequencedPrefix = "Q#"
	fencePrefix       = "FENCE#"
)

func fenceSK(k int) string { return fencePrefix + strconv.Itoa(k) }

// lastNanos keeps unsequenced keys of one process increasing even when
// the wall clock steps back or two appends read the same instant.
var lastNanos atomic.Int64

func keyNanos() int64 {
	for {
		now := time.Now().UnixNano()
		last := lastNanos.Load()
		if now <= last {
			now = last + 1
		}
		if lastNanos.CompareAndSwap(last, now) {
			return now
		}
	}
}

// unsequencedItem is event i of a batch of runID as an unsequenced item
// of fence generation gen. Its key orders it: generation first (the
// sequencer numbers every item of one generation before the next), then
// the writer's clock, then a random tie-break, then its place in its
// batch.
func (s *Store) unsequencedItem(runID string, gen int64, batch string, i int, ev redact.Envelope, at string) (map[string]types.AttributeValue, error) {
	if !ev.Valid() {
		return nil, fmt.Errorf("store: run %s: refusing an envelope not built by redact", runID)
	}
	sk := fmt.Sprintf("%s%010d#%s#%02d", unsequencedPrefix, gen, batch, i)
	return item(runPK(runID), sk, Event{Type: string(ev.Type()), At: at, Data: string(ev.Data())})
}

// batchKey is the part of an unsequenced key one batch's events share:
// the writer's clock and a random tie-break, taken once per batch, so
// that its events sort together.
func batchKey() string { return fmt.Sprintf("%019d#%08x", keyNanos(), rand.Uint32()) }

// batchOf is the key of an unsequenced item without its index.
func batchOf(sk string) string { return sk[:strings.LastIndexByte(sk, '#')] }

// record is Append of a decision: the fence check, the unsequenced
// events and the ops, in one transaction that touches no item another
// decision writes. A cancellation for conflict on the fence shard (held
// by another decision's check) is retried at once on another shard; any
// other conflict or throttling after a backoff, as transactWrite does.
func (s *Store) record(ctx context.Context, seen Head, at string, b Batch) (Head, error) {
	gen := seen.FencedGen
	items := make([]types.TransactWriteItem, 0, 1+len(b.Events)+len(b.Ops))
	items = append(items, types.TransactWriteItem{})
	batch := batchKey()
	for i, ev := range b.Events {
		av, err := s.unsequencedItem(seen.RunID, gen, batch, i, ev, at)
		if err != nil {
			return Head{}, err
		}
		items = append(items, putNew(s.table, av))
	}
	for _, op := range b.Ops {
		items = append(items, op.item)
	}
	window := txBackoffMin
	shard := rand.IntN(FenceShards)
	for attempt := 1; ; attempt++ {
		items[0] = s.fenceCheck(seen.RunID, shard, gen)
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return seen, nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return Head{}, translate("record in "+seen.RunID, err)
		}
		reasons := tce.CancellationReasons
		if len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
			return Head{}, fmt.Errorf("store: record in %s: %w", seen.RunID, ErrFenced)
		}
		if err := opFailure(seen.RunID, reasons, 1+len(b.Events), b.Ops); err != nil {
			return Head{}, err
		}
		if !retryableCancel(tce) || attempt >= recordAttempts {
			return Head{}, translate("record in "+seen.RunID, err)
		}
		onlyFence, onlyConflict := conflictsOf(reasons)
		// Another shard is as good as this one: no need to wait for the
		// decision that holds it.
		shard = (shard + 1 + rand.IntN(FenceShards-1)) % FenceShards
		if onlyFence {
			continue
		}
		wait := rand.N(window) + time.Millisecond
		if onlyConflict {
			// The decision's other items are its own (its events, its
			// call record): what held one was a retry of the same call,
			// which has committed or given up by now. Waiting longer
			// would only add to the decision's time; throttling backs off.
			wait = rand.N(conflictJitter) + time.Millisecond
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return Head{}, translate("record in "+seen.RunID, err)
		}
		if !sleepCtx(ctx, wait) {
			return Head{}, translate("record in "+seen.RunID, err)
		}
		window = min(window*2, txBackoffMax)
	}
}

// conflictJitter is the most a decision waits before it retries a
// transaction cancelled only for TransactionConflict.
const conflictJitter = 2 * time.Millisecond

// conflictsOf reads a decision's cancellation: onlyFence when the fence
// check (item 0) alone met a held item, onlyConflict when every item that
// failed met one (no throttling, no condition).
func conflictsOf(reasons []types.CancellationReason) (onlyFence, onlyConflict bool) {
	onlyFence, onlyConflict = len(reasons) > 0, true
	for i, r := range reasons {
		switch aws.ToString(r.Code) {
		case "", "None":
			if i == 0 {
				onlyFence = false
			}
		case "TransactionConflict":
			if i > 0 {
				onlyFence = false
			}
		default:
			onlyFence, onlyConflict = false, false
		}
	}
	return onlyFence, onlyConflict
}

// recordAttempts bounds a decision's attempts. A conflict on a fence
// shard costs little (it is found before anything is written, and the
// retry picks another shard), so the bound is looser than txAttempts.
const recordAttempts = 32

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fenceCheck is the check that runID's fence shard k is at gen.
func (s *Store) fenceCheck(runID string, k int, gen int64) types.TransactWriteItem {
	c := &types.ConditionCheck{TableName: aws.String(s.table), Key: keyOf(runPK(runID), fenceSK(k))}
	if gen == 0 {
		c.ConditionExpression = aws.String("attribute_not_exists(gen)")
	} else {
		c.ConditionExpression = aws.String("gen = :g")
		c.ExpressionAttributeValues = map[string]types.AttributeValue{":g": num(gen)}
	}
	return types.TransactWriteItem{ConditionCheck: c}
}

// RaiseFence finishes a fence change of runID to generation gen: it
// raises every fence shard to gen, then records on the head that gen is
// fenced. Each write is conditioned on raising, never lowering, so anyone
// may run it for a change it finds unfinished, any number of times.
func (s *Store) RaiseFence(ctx context.Context, runID string, gen int64) error {
	var wg sync.WaitGroup
	errs := make([]error, FenceShards)
	// A bounded number at a time: a fence change is rare, and 64 writes
	// at once would meet more decisions in flight than they need to.
	sem := make(chan struct{}, 16)
	for k := range FenceShards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[k] = s.raise(ctx, "raise fence "+runID+"/"+fenceSK(k), Key{runPK(runID), fenceSK(k)}, "gen", gen)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.raise(ctx, "fenced "+runID, Key{runPK(runID), "HEAD"}, "fenced_gen", gen)
}

// raise sets attr of the item at k to gen unless it is there already or
// beyond. A TransactionConflictException (a decision's transaction holds
// the shard) is retried by the SDK and then here, within ctx.
func (s *Store) raise(ctx context.Context, op string, k Key, attr string, gen int64) error {
	for {
		err := s.updateItem(ctx, op, k, Update{
			Set:    map[string]any{attr: gen},
			Cond:   "attribute_not_exists(#a) OR #a < :g",
			Names:  map[string]string{"#a": attr},
			Values: map[string]any{":g": gen},
		}, nil)
		switch {
		case err == nil, errors.Is(err, ErrConditionFailed):
			return nil
		case ctx.Err() != nil:
			return err
		}
		if !sleepCtx(ctx, time.Duration(rand.IntN(20)+1)*time.Millisecond) {
			return err
		}
	}
}

// Unsequenced is an event written and not numbered yet.
type Unsequenced struct {
	sk  string
	Gen int64
	Event
}

// Unsequenced returns up to limit of runID's unsequenced events, in key
// order (generation, then the writer's clock), with a consistent read. It
// does not cut a batch's events apart (unless one batch alone has more
// than limit), so that they are numbered together and stay adjacent.
// more says that events are left after those returned.
func (s *Store) Unsequenced(ctx context.Context, runID string, limit int) (batch []Unsequenced, more bool, err error) {
	var out []Unsequenced
	_, err = s.queryPrefixUpTo(ctx, runPK(runID), unsequencedPrefix, limit+1, func(av map[string]types.AttributeValue) error {
		var u Unsequenced
		if err := attributevalue.UnmarshalMap(av, &u.Event); err != nil {
			return err
		}
		sk, _ := av[attrSK].(*types.AttributeValueMemberS)
		if sk == nil {
			return errors.New("no sort key")
		}
		gen, _, ok := strings.Cut(strings.TrimPrefix(sk.Value, unsequencedPrefix), "#")
		g, err := strconv.ParseInt(gen, 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("unsequenced key %q", sk.Value)
		}
		u.sk, u.Gen = sk.Value, g
		out = append(out, u)
		return nil
	})
	if err != nil || len(out) <= limit {
		return out, false, err
	}
	next := batchOf(out[limit].sk)
	n := limit
	for n > 0 && batchOf(out[n-1].sk) == next {
		n--
	}
	if n == 0 {
		n = limit
	}
	return out[:n], true, nil
}

// Number gives batch (at most MaxNumbered, from Unsequenced) the seqs
// after h.LastSeq, in order, in one transaction: the head's counter on
// last_seq = h.LastSeq, each event put at its seq, each unsequenced item
// deleted on its existing. So an event is numbered once, and seqs stay
// gapless, however many sequencers race. When another got there first it
// returns *SeqConflictError with the head as it is now.
func (s *Store) Number(ctx context.Context, h Head, batch []Unsequenced) (Head, error) {
	if len(batch) == 0 || len(batch) > MaxNumbered {
		return Head{}, fmt.Errorf("store: number %d events of %s: want 1 to %d", len(batch), h.RunID, MaxNumbered)
	}
	pk := runPK(h.RunID)
	next := h.LastSeq + int64(len(batch))
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(pk, "HEAD"),
		UpdateExpression:                    aws.String("SET last_seq = :next"),
		ConditionExpression:                 aws.String("last_seq = :seen"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":seen": num(h.LastSeq), ":next": num(next)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	for i, u := range batch {
		e := u.Event
		e.Seq = h.LastSeq + int64(i) + 1
		av, err := item(pk, eventSK(e.Seq), e)
		if err != nil {
			return Head{}, err
		}
		items = append(items, putNew(s.table, av), types.TransactWriteItem{Delete: &types.Delete{
			TableName:           aws.String(s.table),
			Key:                 keyOf(pk, u.sk),
			ConditionExpression: aws.String("attribute_exists(pk)"),
		}})
	}
	err := s.transactWriteN(ctx, items, hotAttempts)
	if err == nil {
		h.LastSeq = next
		return h, nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 {
		r := tce.CancellationReasons[0]
		if aws.ToString(r.Code) == "ConditionalCheckFailed" && r.Item != nil {
			var cur Head
			if derr := attributevalue.UnmarshalMap(r.Item, &cur); derr != nil {
				return Head{}, fmt.Errorf("store: decode head of %s: %w", h.RunID, derr)
			}
			return Head{}, &SeqConflictError{Current: cur}
		}
		if conditionFailed(err) {
			// An item already numbered, or its seq taken: another
			// sequencer committed in between.
			return Head{}, &SeqConflictError{Current: h}
		}
	}
	return Head{}, translate("number events of "+h.RunID, err)
}
