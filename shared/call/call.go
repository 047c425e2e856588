// Package call is the life of one tool call as a state machine: what a call
// can become, who may move it, and what each move writes. It is the whole
// machine and nothing else: shared/store writes each move under the
// condition this table gives it (store.ClaimCall, store.SettleApprovalOp,
// ...: the item stands at one of the states From lists), and the packages
// that make the moves build their events (permission records the gate's
// answer, approval settles, connection executes a brokered call).
//
//	requested ──gate──▶ allow ─────────────┐
//	          ──gate──▶ deny               │
//	          ──gate──▶ pending ─decider─▶ approved_once ──┤
//	                            ─decider─▶ approved_session┤ (+ session grant)
//	                            ─decider─▶ denied          │
//	                            ─expiry──▶ expired         │
//	                                                       ▼
//	              (brokered calls only)  executing ◀─broker─ allow | approved_*
//	                                     executing ─broker─▶ executed
//	                       allow | approved_* ─broker─▶ refused (not stored)
//	                                     executing ─broker─▶ refused (claim released)
//
// What it guarantees:
//   - A move happens only if it is a row of the table below: the store's
//     write asks Move with the state its caller read, and is conditioned on
//     the item standing at a state the table moves from (From), so a wrong
//     transition is refused by the table and by the condition.
//   - Every move that changes the run is one ledger append: the move's
//     items and its events together, or nothing. The two moves that are
//     single-item writes (claiming the execution, recording its outcome)
//     are conditioned on the state before them, and the event that
//     follows them (tool.brokered) can always be appended later from what
//     they stored.
//   - Fail closed: a move that is not in the table, a condition that does
//     not hold or a write that fails leaves the call where it was, and
//     where it was never allows more than the move would have.
//   - Nothing from a tool's input reaches a key or an event: inputs are
//     digested, grant keys are hashed, and the approval row keeps the
//     input (bounded for display, with the digest of all of it) for the
//     human who decides.
package call

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fluidbox/fluidbox/shared/vocab"
)

// State is where a call stands: a node of the machine. The states that are
// stored are spelled by their stored type (package vocab): a call record's
// vocab.Decision, an approval's vocab.ApprovalStatus. The others are the
// machine's own and never stored.
type State string

// States of a call.
const (
	// Requested: asked, nothing recorded yet. Not stored.
	Requested State = "requested"
	// Allowed, Denied and Pending are the gate's answers, stored as the
	// call record's decision.
	Allowed = State(vocab.Allow)
	Denied  = State(vocab.Deny)
	Pending = State(vocab.Pending)
	// The settlements of a pending call, stored as its approval's status.
	// A settled approval leaves its call record allow (approved_*) or deny
	// (denied, expired).
	ApprovedOnce    = State(vocab.ApprovedOnce)
	ApprovedSession = State(vocab.ApprovedSession)
	Rejected        = State(vocab.ApprovalDenied)
	Expired         = State(vocab.ApprovalExpired)
	// Executing and Executed are a brokered call's execution, stored on
	// its call record (executed_at, then the outcome).
	Executing State = "executing"
	Executed  State = "executed"
	// Refused: an allowed brokered call that re-verification stopped
	// before it ran, or whose claimed execution the upstream refused at
	// its door (insufficient_scope: the tool did not run). Recorded as an
	// event, the claim released; the call stays allowed and a retry
	// re-verifies.
	Refused State = "refused"
)

// Actor is who may move a call.
type Actor string

// Actors.
const (
	// Gate: the permission service or the broker, recording the gate's
	// decision (shared/permission).
	Gate Actor = "gate"
	// Decider: a person approval.MayDecide admits for this approval (the
	// operator, an admin or approver, or for a personal connection only
	// the run's invoker).
	Decider Actor = "decider"
	// Expiry: System(ExpiryRole), through the timer, the sweep or a lazy
	// read of an overdue approval.
	Expiry Actor = "expiry"
	// Broker: the broker executing an allowed brokered call
	// (shared/connection).
	Broker Actor = "broker"
)

// Transition is one row of the machine.
type Transition struct {
	From, To State
	By       Actor
	// Writes says what the move records, for the reader of this table.
	Writes string
}

// Transitions is the machine: every move a call can make. Nothing else
// moves a call.
var Transitions = []Transition{
	{Requested, Allowed, Gate, "call record; tool.requested, tool.decision"},
	{Requested, Denied, Gate, "call record; tool.requested, tool.decision"},
	{Requested, Pending, Gate, "call record, approval row; tool.requested, approval.requested; run awaiting_approval"},

	{Pending, ApprovedOnce, Decider, "approval settled, call allow; approval.decided, tool.decision"},
	{Pending, ApprovedSession, Decider, "approval settled, call allow, session grant; approval.decided, tool.decision"},
	{Pending, Rejected, Decider, "approval settled, call deny (source approval); approval.decided, tool.decision"},
	{Pending, Expired, Expiry, "approval settled, call deny (source approval_expired); approval.decided, tool.decision"},

	{Allowed, Executing, Broker, "execution claim on the call record, once (in the decision's own write when the broker runs the call at once)"},
	{ApprovedOnce, Executing, Broker, "execution claim on the call record, once"},
	{ApprovedSession, Executing, Broker, "execution claim on the call record, once"},
	{Executing, Executed, Broker, "outcome on the call record and tool.brokered, in one append (a lapsed claim: a failed outcome)"},

	{Allowed, Refused, Broker, "tool.decision deny; the call record stays allow"},
	{ApprovedOnce, Refused, Broker, "tool.decision deny; the call record stays allow"},
	{ApprovedSession, Refused, Broker, "tool.decision deny; the call record stays allow"},
	{Executing, Refused, Broker, "tool.decision deny and the claim released, together: the upstream refused before the tool ran"},
}

// ErrIllegal: a move that is not in the machine.
var ErrIllegal = errors.New("call: no such transition")

// From lists the states by may move a call to to from, in the table's
// order: the states the store conditions that move's write on.
func From(to State, by Actor) []State {
	var out []State
	for _, t := range Transitions {
		if t.To == to && t.By == by && !slices.Contains(out, t.From) {
			out = append(out, t.From)
		}
	}
	return out
}

// Move checks that by may move a call from from to to.
func Move(from, to State, by Actor) error {
	for _, t := range Transitions {
		if t.From == from && t.To == to && t.By == by {
			return nil
		}
	}
	return fmt.Errorf("%w: %s from %s to %s", ErrIllegal, by, from, to)
}

// Sentinels: one per fact. Callers test them with errors.Is.
var (
	// ErrRecorded: the call already has a recorded answer (a retry).
	ErrRecorded = errors.New("call: already recorded")
	// ErrSettled: the approval is no longer pending, or a decision came
	// after its expiry.
	ErrSettled = errors.New("call: approval already settled")
	// ErrNoGrant: the run has no session grant with that scope key.
	ErrNoGrant = errors.New("call: no such grant")
	// ErrExecuted: the call's one execution was claimed already; the tool
	// is never run again.
	ErrExecuted = errors.New("call: already executed")
	// ErrNotAllowed: the call's recorded answer is not allow, so it
	// cannot be executed.
	ErrNotAllowed = errors.New("call: not allowed")
	// ErrNotRecorded: the call has no record to move.
	ErrNotRecorded = errors.New("call: no such call")
	// ErrNotExecuting: an outcome for a call that is not executing (never
	// claimed, or its outcome is stored already).
	ErrNotExecuting = errors.New("call: not executing")
	// ErrSourceFull: the call's trigger source already has as many
	// approvals pending across its runs as it may, so none was filed.
	ErrSourceFull = errors.New("call: the trigger source has as many approvals pending as it may")
	// ErrGrantRevoked: the session grant that answered the call was
	// revoked before the decision was recorded; decide again.
	ErrGrantRevoked = errors.New("call: the session grant was revoked")
	// ErrBrokeredRecorded: tool.brokered is in the ledger already.
	ErrBrokeredRecorded = errors.New("call: brokered call recorded already")
)
