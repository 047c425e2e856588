package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// The writes that move a call (shared/call's machine): one named method
// per move, each conditioned on the states the machine lets that move
// start from. A method first asks the machine whether its caller's
// from-state may make the move (call.Move), and then writes only while the
// stored item is in one of the states call.From lists for it: a wrong
// transition is refused by the table and, whatever the caller believed,
// by the condition. Nothing else in fluidbox writes a call record, an
// approval row or a session grant.

// released is executed_at once a claim is released: the execution was
// claimed, the upstream refused it at its door, and the call may be
// claimed again.
const released = ""

// holds is a condition over one item: an expression with its names and
// values.
type holds struct {
	expr   string
	names  map[string]string
	values map[string]any
}

// callHolds is the condition that a call record stands at s; ok is false
// for a state the record never stores (Refused).
func callHolds(s call.State) (holds, bool) {
	decision := func(d vocab.Decision) holds {
		return holds{"#d = " + placeholder(d), map[string]string{"#d": "decision"}, map[string]any{placeholder(d): d}}
	}
	switch s {
	case call.Requested:
		return holds{expr: "attribute_not_exists(pk)"}, true
	case call.Allowed, call.ApprovedOnce, call.ApprovedSession:
		// Allowed and not executing: never claimed, or its claim released.
		h := decision(vocab.Allow)
		h.expr += " AND (attribute_not_exists(executed_at) OR executed_at = :released)"
		h.values[":released"] = released
		return h, true
	case call.Denied, call.Rejected, call.Expired:
		return decision(vocab.Deny), true
	case call.Pending:
		return decision(vocab.Pending), true
	case call.Executing:
		return holds{expr: "attribute_exists(executed_at) AND executed_at <> :released AND attribute_not_exists(result_digest)",
			values: map[string]any{":released": released}}, true
	case call.Executed:
		return holds{expr: "attribute_exists(result_digest)"}, true
	}
	return holds{}, false
}

// approvalHolds is the condition that an approval row stands at s: absent
// before the gate files it, its status after.
func approvalHolds(s call.State) (holds, bool) {
	if s == call.Requested {
		return holds{expr: "attribute_not_exists(pk)"}, true
	}
	st := vocab.ApprovalStatus(s)
	if !st.Valid() {
		return holds{}, false
	}
	return holds{"#s = " + placeholder(st), map[string]string{"#s": "status"}, map[string]any{placeholder(st): st}}, true
}

// placeholder is the value placeholder of a state's spelling.
func placeholder[T ~string](v T) string { return ":" + strings.ReplaceAll(string(v), "_", "") }

// moveHolds is the condition a move to to by by writes under: the item
// stands at one of the states the machine lets it start from. It fails
// when some such state is not one the item stores, which would leave the
// move unguarded.
func moveHolds(to call.State, by call.Actor, at func(call.State) (holds, bool)) (holds, error) {
	out := holds{names: map[string]string{}, values: map[string]any{}}
	var exprs []string
	for _, from := range call.From(to, by) {
		h, ok := at(from)
		if !ok {
			return holds{}, fmt.Errorf("store: %s moves a call from %s to %s, which this item does not store", by, from, to)
		}
		if !slices.Contains(exprs, h.expr) {
			exprs = append(exprs, h.expr)
		}
		maps.Copy(out.names, h.names)
		maps.Copy(out.values, h.values)
	}
	if len(exprs) == 0 {
		return holds{}, fmt.Errorf("store: %s never moves a call to %s", by, to)
	}
	out.expr = "(" + strings.Join(exprs, ") OR (") + ")"
	return out, nil
}

// and is h with one more condition on the same item.
func (h holds) and(expr string, values map[string]any) holds {
	h.expr += " AND " + expr
	h.values = maps.Clone(h.values)
	maps.Copy(h.values, values)
	return h
}

// update is u conditioned on h.
func (h holds) update(u Update) Update {
	u.Cond, u.Names, u.Values = h.expr, h.names, h.values
	return u
}

// move checks the machine for the caller's move from from, and returns
// the condition the item's write holds under.
func move(from, to call.State, by call.Actor, at func(call.State) (holds, bool)) (holds, error) {
	if err := call.Move(from, to, by); err != nil {
		return holds{}, err
	}
	return moveHolds(to, by, at)
}

// RecordCallOp is requested -> allow | deny | pending by the gate: the op
// that puts c, the call's record, as new (from is call.Requested: the gate
// asks before anything is recorded). When a record is there already
// (a retry) the Append fails with call.ErrRecorded, carrying that record
// (RecordedCall).
func (s *Store) RecordCallOp(runID string, from call.State, c Call) (Op, error) {
	h, err := move(from, call.State(c.Decision), call.Gate, callHolds)
	if err != nil {
		return Op{}, err
	}
	av, err := item(runPK(runID), callSK(c.ToolCallID), c)
	if err != nil {
		return Op{}, err
	}
	return s.conditionalPut(av, h, call.ErrRecorded)
}

// RecordClaimedCallOp is requested -> allow by the gate and allow ->
// executing by the broker in one write: the op that puts c, an allowed
// brokered call's record, as new and already claimed at at, for a broker
// that executes the call right after the gate allowed it (one write
// instead of the record's and then ClaimCall's). The record is never seen
// allowed and unclaimed, so a concurrent duplicate finds the claim (its
// own record's put fails with call.ErrRecorded, and its ClaimCall with
// call.ErrExecuted). from is call.Requested, as for RecordCallOp.
func (s *Store) RecordClaimedCallOp(runID string, from call.State, c Call, at string) (Op, error) {
	if c.Decision != vocab.Allow || at == released {
		return Op{}, fmt.Errorf("%w: %s claims only an allowed call, at an instant", call.ErrIllegal, call.Broker)
	}
	if err := call.Move(call.Allowed, call.Executing, call.Broker); err != nil {
		return Op{}, err
	}
	c.ExecutedAt = at
	return s.RecordCallOp(runID, from, c)
}

// FileApprovalOps is requested -> pending by the gate: the ops that put a,
// a pending approval, as new, in the pending index, with the pointer from
// its id. When either is there already the Append fails with
// call.ErrRecorded.
func (s *Store) FileApprovalOps(from call.State, a Approval) ([]Op, error) {
	h, err := move(from, call.State(a.Status), call.Gate, approvalHolds)
	if err != nil {
		return nil, err
	}
	row, err := item(runPK(a.RunID), approvalSK(a.ToolCallID), PendingApproval{Approval: a, GSI1PK: PendingIndex, GSI1SK: ApprovalPosition(a)})
	if err != nil {
		return nil, err
	}
	rowOp, err := s.conditionalPut(row, h, call.ErrRecorded)
	if err != nil {
		return nil, err
	}
	ref, err := s.PutNew(ApprovalRefKey(a.ID), ApprovalRef{RunID: a.RunID, ToolCallID: a.ToolCallID}, call.ErrRecorded)
	if err != nil {
		return nil, err
	}
	return []Op{rowOp, ref}, nil
}

// Settlement is how a pending approval is settled.
type Settlement struct {
	To vocab.ApprovalStatus
	// By is who settled it; At, when (and the instant the approval's
	// expiry is judged at).
	By, At string
	// Note is the decider's own words ("" for none).
	Note string
}

// settler is the actor that may settle an approval as to.
func settler(to vocab.ApprovalStatus) call.Actor {
	if to == vocab.ApprovalExpired {
		return call.Expiry
	}
	return call.Decider
}

// SettleApprovalOp is pending -> approved_once | approved_session | denied
// (a decider) or expired (the expiry): the op that settles a, read at
// a.Status, taking it out of the pending index. A decision holds only
// while the approval is unexpired at set.At, an expiry only once it is
// overdue; otherwise, or when it is not pending any more, the Append
// fails with call.ErrSettled.
func (s *Store) SettleApprovalOp(a Approval, set Settlement) (Op, error) {
	h, err := move(call.State(a.Status), call.State(set.To), settler(set.To), approvalHolds)
	if err != nil {
		return Op{}, err
	}
	if set.To == vocab.ApprovalExpired {
		h = h.and("expires_at <= :now", map[string]any{":now": set.At})
	} else {
		h = h.and("expires_at > :now", map[string]any{":now": set.At})
	}
	values := map[string]any{"status": set.To, "decided_by": set.By, "decided_at": set.At}
	if set.Note != "" {
		values["reason"] = set.Note
	}
	return s.updateOp(ApprovalKey(a.RunID, a.ToolCallID), h.update(Update{Set: values, Remove: []string{"gsi1pk", "gsi1sk"}}), call.ErrSettled)
}

// SettleCallOp is the call record's half of settling a (read at a.Status):
// its pending answer becomes the settlement's (allow when approved, deny
// otherwise) with source and reason, while it is pending; otherwise the
// Append fails with call.ErrSettled.
func (s *Store) SettleCallOp(a Approval, set Settlement, source, reason string) (Op, error) {
	h, err := move(call.State(a.Status), call.State(set.To), settler(set.To), callHolds)
	if err != nil {
		return Op{}, err
	}
	values := map[string]any{"decision": set.To.Answer(), "source": source, "reason": reason, "decided_at": set.At}
	return s.updateOp(CallKey(a.RunID, a.ToolCallID), h.update(Update{Set: values}), call.ErrSettled)
}

// ClaimCall is allow | approved_* -> executing by the broker: it marks the
// call's one execution on its record at at, before the upstream is
// called, so a retry, a concurrent duplicate or another process finds the
// claim and never runs the tool again. from is the call's state as the
// caller read it. When the record is not claimable the error says why
// (call.ErrExecuted, with the record as it is; call.ErrNotRecorded;
// call.ErrNotAllowed).
func (s *Store) ClaimCall(ctx context.Context, runID, toolCallID string, from call.State, at string) (Call, error) {
	h, err := move(from, call.Executing, call.Broker, callHolds)
	if err != nil {
		return Call{}, err
	}
	var old Call
	op := "claim " + runID + "/" + toolCallID
	err = s.updateItem(ctx, op, CallKey(runID, toolCallID), h.update(Update{Set: map[string]any{"executed_at": at}}), &old)
	if errors.Is(err, ErrConditionFailed) {
		switch {
		case old.ExecutedAt != "":
			return old, fmt.Errorf("store: %s: %w", op, call.ErrExecuted)
		case old.ToolCallID == "":
			return old, fmt.Errorf("store: %s: %w", op, call.ErrNotRecorded)
		}
		return old, fmt.Errorf("store: %s: %w", op, call.ErrNotAllowed)
	}
	return Call{}, err
}

// Outcome is what an executed call's record keeps: digests and numbers,
// never the result.
type Outcome struct {
	ResultDigest string
	LatencyMS    int64
	IsError      bool
}

// ExecutedOp is executing -> executed: the op that stores the outcome o on
// the call record, right after the upstream answered, and marks the record
// as recorded in the ledger (brokered): the Append that carries it carries
// tool.brokered, so the outcome and its event land together or not at
// all. It holds only on a claimed call without an outcome (otherwise the
// Append fails with call.ErrNotExecuting).
func (s *Store) ExecutedOp(runID, toolCallID string, from call.State, o Outcome) (Op, error) {
	if o.ResultDigest == "" {
		return Op{}, fmt.Errorf("store: the outcome of %s/%s has no result digest", runID, toolCallID)
	}
	h, err := move(from, call.Executed, call.Broker, callHolds)
	if err != nil {
		return Op{}, err
	}
	set := map[string]any{"result_digest": o.ResultDigest, "latency_ms": o.LatencyMS, "is_error": o.IsError, "brokered": true}
	return s.updateOp(CallKey(runID, toolCallID), h.update(Update{Set: set}), call.ErrNotExecuting)
}

// BrokeredOp completes executing -> executed for a record whose outcome
// was stored on its own, before tool.brokered (as brokers before
// ExecutedOp stored it): the op that marks the record of an executed call
// as recorded in the ledger (tool.brokered), once; a second Append fails
// with call.ErrBrokeredRecorded.
func (s *Store) BrokeredOp(runID, toolCallID string) (Op, error) {
	h, err := callAt(call.Executed)
	if err != nil {
		return Op{}, err
	}
	h = h.and("attribute_not_exists(brokered)", nil)
	return s.updateOp(CallKey(runID, toolCallID), h.update(Update{Set: map[string]any{"brokered": true}}), call.ErrBrokeredRecorded)
}

// callAt is callHolds for a state the record must store.
func callAt(st call.State) (holds, error) {
	h, ok := callHolds(st)
	if !ok {
		return holds{}, fmt.Errorf("store: a call record never stands at %s", st)
	}
	return h, nil
}

// ReleaseClaimOp is executing -> refused by the broker (from is the
// call's state as the broker knows it, having claimed it): the upstream
// refused the claimed call before the tool ran, so the op releases the
// claim made at claimedAt (and only that claim, while no outcome is
// stored; otherwise the Append fails with call.ErrNotExecuting). A retry
// may then claim the call again.
func (s *Store) ReleaseClaimOp(runID, toolCallID string, from call.State, claimedAt string) (Op, error) {
	// Of the moves to refused, only the one from executing writes: the
	// others leave the record allow. Its condition is that state's.
	if from != call.Executing {
		return Op{}, fmt.Errorf("%w: %s refusing a call at %s writes nothing", call.ErrIllegal, call.Broker, from)
	}
	if err := call.Move(from, call.Refused, call.Broker); err != nil {
		return Op{}, err
	}
	h, err := callAt(from)
	if err != nil {
		return Op{}, err
	}
	h = h.and("executed_at = :claimed", map[string]any{":claimed": claimedAt})
	return s.updateOp(CallKey(runID, toolCallID), h.update(Update{Set: map[string]any{"executed_at": released}}), call.ErrNotExecuting)
}

// ParkTask keeps the upstream task of the call claimed at claimedAt on its
// record: the call stays executing (no move), and only that claim, with no
// outcome stored, takes it.
func (s *Store) ParkTask(ctx context.Context, runID, toolCallID, claimedAt string, t Task) error {
	h, err := callAt(call.Executing)
	if err != nil {
		return err
	}
	h = h.and("executed_at = :claimed", map[string]any{":claimed": claimedAt})
	op := "park task of " + runID + "/" + toolCallID
	err = s.updateItem(ctx, op, CallKey(runID, toolCallID), h.update(Update{Set: map[string]any{"task": t}}), nil)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("store: %s: %w", op, call.ErrNotExecuting)
	}
	return err
}

// GrantOp is the op that puts the session grant g of a run, which an
// approved_session settlement carries.
func (s *Store) GrantOp(runID string, g Grant) (Op, error) {
	return s.Put(GrantKey(runID, g.RuleID, g.ScopeKey), g)
}

// RevokeGrantOp is the op that deletes a run's session grant; when it is
// gone already the Append fails with call.ErrNoGrant.
func (s *Store) RevokeGrantOp(runID string, g Grant) Op {
	return s.DeleteExisting(GrantKey(runID, g.RuleID, g.ScopeKey), call.ErrNoGrant)
}

// conditionalPut is the op that puts av while h holds on the item there;
// otherwise the Append fails with failed.
func (s *Store) conditionalPut(av map[string]types.AttributeValue, h holds, failed error) (Op, error) {
	// The refusal carries the item that was there (read it with Existing).
	put := &types.Put{TableName: aws.String(s.table), Item: av, ConditionExpression: aws.String(h.expr),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	if len(h.names) > 0 {
		put.ExpressionAttributeNames = h.names
	}
	if len(h.values) > 0 {
		vals := make(map[string]types.AttributeValue, len(h.values))
		for k, v := range h.values {
			av, err := attributevalue.Marshal(v)
			if err != nil {
				return Op{}, fmt.Errorf("store: marshal %s: %w", k, err)
			}
			vals[k] = av
		}
		put.ExpressionAttributeValues = vals
	}
	return Op{item: types.TransactWriteItem{Put: put}, failed: failed}, nil
}
