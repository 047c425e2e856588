// Package elicitation settles the requests for a person's input that an
// upstream MCP server makes in the middle of a brokered call (URL-mode
// elicitation: "open this link and finish there"). A brokered call cannot
// hold its HTTP request while a person does that (API Gateway cuts it at
// 29 s), so the broker files an input request, answers the runner pending,
// and the runner asks again with the same tool_call_id, as it does for an
// approval. This package is the request's life:
//
//	(none) ──broker──▶ pending ─decider─▶ completed  (the retried call runs)
//	                           ─decider─▶ declined   (the call is refused)
//	                           ─expiry──▶ expired    (the call is refused)
//
// What it guarantees:
//   - A request moves once. Each move is a compare-and-swap on its row
//     (status pending, and for a decision unexpired at now, for an expiry
//     overdue at now), in one ledger append with its event, input.settled:
//     of any number of racing deciders, expiries and sweeps exactly one
//     settles it, and only the winner writes an event.
//   - Who may answer is approval.MayDecide's rule for the call's approval:
//     a personal connection's call only by the run's invoker; any other by
//     the operator, admins and approvers. The inbox lists, row by row, what
//     that rule lets the caller answer.
//   - Expiry is refusal. A request nobody answers is expired by a lazy read
//     (every read of an overdue row), by the broker when the runner asks
//     again, or by the sweep; an overdue request is never completed.
//   - What is kept of the request is its mode, the link's scheme, host and
//     path (shared/broker drops the query, fragment and user info), and the
//     connection's own name: nothing the upstream wrote, no message, no
//     query, no name it gave itself.
//
// The request row is not the call's approval: it has its own key prefix,
// index partition and events, so a call's approval, decided before the call
// ran, is untouched by anything here.
package elicitation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
)

// State is where an input request stands. States are persisted and on the
// wire: never rename one.
type State string

// States of an input request.
const (
	Pending   State = "pending"
	Completed State = "completed"
	Declined  State = "declined"
	Expired   State = "expired"
)

// Actor is who may move an input request.
type Actor string

// Actors.
const (
	// Broker files a request when the upstream asks (shared/connection).
	Broker Actor = "broker"
	// Decider: a person MayDecide admits.
	Decider Actor = "decider"
	// Expiry: System(ExpiryRole), through a lazy read, the broker or the
	// sweep.
	Expiry Actor = "expiry"
)

// Transition is one row of the machine.
type Transition struct {
	From, To State
	By       Actor
	Writes   string
}

// Transitions is the machine: every move an input request can make.
var Transitions = []Transition{
	{"", Pending, Broker, "row, id pointer and pending index entry, in the append that releases the call's execution claim; tool.decision deny (input_required), input.requested"},
	{Pending, Completed, Decider, "row settled, out of the index; input.settled"},
	{Pending, Declined, Decider, "row settled, out of the index; input.settled"},
	{Pending, Expired, Expiry, "row settled, out of the index; input.settled"},
}

// ErrIllegal: a move that is not in the machine.
var ErrIllegal = errors.New("elicitation: no such transition")

// Move checks that by may move a request from from to to.
func Move(from, to State, by Actor) error {
	for _, t := range Transitions {
		if t.From == from && t.To == to && t.By == by {
			return nil
		}
	}
	return fmt.Errorf("%w: %s from %q to %s", ErrIllegal, by, from, to)
}

// Decisions a person may post. They are on the wire: never rename one.
const (
	DecisionDone    = "done"
	DecisionDecline = "decline"
)

// Errors.
var (
	ErrNotFound  = errors.New("elicitation: input request not found")
	ErrForbidden = errors.New("elicitation: the caller may not answer this input request")
	ErrInvalid   = errors.New("elicitation: invalid decision")
	// ErrSettled: the request is no longer pending, or a decision came
	// after its time. The Append's failure; callers re-read.
	ErrSettled = errors.New("elicitation: input request already settled")
)

// DefaultTTL is how long an input request waits for a person.
const DefaultTTL = 15 * time.Minute

// ExpiredBy is who settles a request nobody answered in time.
var ExpiredBy = auth.System(auth.ExpiryRole)

// Service files, reads and settles input requests.
type Service struct {
	led     *ledger.Ledger
	st      *store.Store
	now     func() time.Time
	log     *slog.Logger
	observe Observer
}

// Observer is told of every committed input request transition: before is
// the zero InputRequest for a new one. The dev server turns these into
// notifications and Slack messages; on AWS the table's stream does.
type Observer func(ctx context.Context, before, after store.InputRequest)

// Observe sets the observer of committed transitions.
func (s *Service) Observe(o Observer) { s.observe = o }

// Filed reports r, filed by the caller's committed append, to the
// observer, if any.
func (s *Service) Filed(ctx context.Context, r store.InputRequest) {
	if s.observe != nil {
		s.observe(ctx, store.InputRequest{}, r)
	}
}

// NewService returns an input request service; log may be nil.
func NewService(led *ledger.Ledger, now func() time.Time, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{led: led, st: led.Store(), now: now, log: log}
}

// File is (none) -> pending: the ops and the event that file r, for the
// broker's append that also releases the call's execution claim. r's
// status is set to pending.
func (s *Service) File(r *store.InputRequest) ([]store.Op, redact.Envelope, error) {
	if err := Move("", Pending, Broker); err != nil {
		return nil, redact.Envelope{}, err
	}
	r.Status = string(Pending)
	ops, err := s.st.NewInputRequestOps(*r, ErrSettled)
	if err != nil {
		return nil, redact.Envelope{}, err
	}
	ev, err := redact.New(redact.InputRequested{
		InputRequestID: r.ID, ToolCallID: r.ToolCallID, ToolName: r.ToolName, ConnectionID: r.ConnectionID,
		Server: r.Server, Mode: r.Mode, Link: r.Link, ExpiresAt: r.ExpiresAt,
	})
	return ops, ev, err
}

// Get reads a request by id, expiring it first if it is overdue.
func (s *Service) Get(ctx context.Context, id string) (store.InputRequest, error) {
	r, err := s.st.GetInputRequestByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.InputRequest{}, ErrNotFound
	}
	if err != nil {
		return store.InputRequest{}, err
	}
	return s.Current(ctx, r), nil
}

// ForCall lists a call's requests, oldest first, each as it now stands.
func (s *Service) ForCall(ctx context.Context, runID, toolCallID string) ([]store.InputRequest, error) {
	rs, err := s.st.CallInputRequests(ctx, runID, toolCallID)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		rs[i] = s.Current(ctx, r)
	}
	return rs, nil
}

// ForRun lists a run's requests, any status, each as it now stands.
func (s *Service) ForRun(ctx context.Context, runID string) ([]store.InputRequest, error) {
	rs, err := s.st.RunInputRequests(ctx, runID)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		rs[i] = s.Current(ctx, r)
	}
	return rs, nil
}

// Current expires a pending request read past its time (lazy expiry) and
// returns it as it now stands. A failed expiry is logged and the request
// returned as read: still pending and overdue, which nobody can complete.
func (s *Service) Current(ctx context.Context, r store.InputRequest) store.InputRequest {
	if State(r.Status) != Pending || !s.Overdue(r) {
		return r
	}
	settled, _, err := s.settle(ctx, r, ExpiredBy, Expired)
	if err != nil {
		s.log.WarnContext(ctx, "lazy expiry of an input request failed; it stays pending past its time and can no longer be completed", "input_request", r.ID, "run", r.RunID, "err", err)
		return r
	}
	return settled
}

// Overdue reports whether r's time has passed.
func (s *Service) Overdue(r store.InputRequest) bool {
	return r.ExpiresAt <= store.FormatTime(s.now())
}

// MayDecide reports whether who may answer r, where invoker is the sub of
// whoever invoked r's run: the rule of the call's approval
// (approval.MayDecide), since the request is part of the same call.
func MayDecide(who auth.Principal, r store.InputRequest, invoker string) bool {
	return approval.MayDecide(who, store.Approval{RunID: r.RunID, ConnectionID: r.ConnectionID, Personal: r.Personal}, invoker)
}

// Decide settles a request by a person's decision (DecisionDone or
// DecisionDecline). It reports whether this call settled it; if not, the
// request is returned as it was settled (by someone else, or by expiry).
func (s *Service) Decide(ctx context.Context, who auth.Principal, id, decision string) (store.InputRequest, bool, error) {
	var to State
	switch decision {
	case DecisionDone:
		to = Completed
	case DecisionDecline:
		to = Declined
	default:
		return store.InputRequest{}, false, fmt.Errorf("%w: %q is not one of done, decline", ErrInvalid, decision)
	}
	r, err := s.st.GetInputRequestByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.InputRequest{}, false, ErrNotFound
	}
	if err != nil {
		return store.InputRequest{}, false, err
	}
	ok, err := s.mayDecide(ctx, who, r, map[string]string{})
	if err != nil {
		return store.InputRequest{}, false, err
	}
	if !ok {
		return store.InputRequest{}, false, ErrForbidden
	}
	if State(r.Status) != Pending {
		return r, false, nil
	}
	if s.Overdue(r) {
		settled, _, err := s.settle(ctx, r, ExpiredBy, Expired)
		return settled, false, err
	}
	return s.settle(ctx, r, auth.Subject(who.Subject), to)
}

// Expire settles a request as expired if it is pending and overdue, and
// reports whether this call expired it.
func (s *Service) Expire(ctx context.Context, id string) (bool, error) {
	r, err := s.st.GetInputRequestByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, err
	}
	if State(r.Status) != Pending || !s.Overdue(r) {
		return false, nil
	}
	_, applied, err := s.settle(ctx, r, ExpiredBy, Expired)
	return applied, err
}

// Sweep settles, in one walk of the pending requests, what no read will:
// an overdue one is expired, and one of a run that allows no call any
// more (it ended, or spent its whole budget) is declined by the run's
// state (approval.RefusedBy), as the approvals' sweep denies its
// approvals.
func (s *Service) Sweep(ctx context.Context) (approval.Swept, error) {
	return approval.Pending[store.InputRequest]{
		Each:    s.st.EachPendingInputRequest,
		Overdue: s.Overdue,
		Expire:  func(ctx context.Context, r store.InputRequest) (bool, error) { return s.Expire(ctx, r.ID) },
		RunOf:   func(r store.InputRequest) string { return r.RunID },
		Head:    s.st.GetHead,
		Refuse: func(ctx context.Context, r store.InputRequest, d gate.Decision) (bool, error) {
			_, applied, err := s.settle(ctx, r, approval.RefusedBy(d), Declined)
			return applied, err
		},
		Gone: ErrNotFound,
	}.Sweep(ctx)
}

// settle is the compare-and-swap, with input.settled in the same append.
// It returns the request as settled and whether this call settled it.
func (s *Service) settle(ctx context.Context, r store.InputRequest, by auth.Subject, to State) (store.InputRequest, bool, error) {
	actor := Decider
	if to == Expired {
		actor = Expiry
	}
	if err := Move(State(r.Status), to, actor); err != nil {
		return store.InputRequest{}, false, err
	}
	at := store.FormatTime(s.now())
	op, err := s.st.SettleInputRequestOp(r, store.InputSettlement{From: string(Pending), To: string(to), By: string(by), At: at, Expiry: to == Expired}, ErrSettled)
	if err != nil {
		return store.InputRequest{}, false, err
	}
	ev, err := redact.New(redact.InputSettled{InputRequestID: r.ID, ToolCallID: r.ToolCallID, Status: string(to), DecidedBy: string(by)})
	if err != nil {
		return store.InputRequest{}, false, err
	}
	_, err = s.led.Append(ctx, r.RunID, func(h store.Head) (store.Batch, error) {
		if to == Completed {
			// Done resumes the call; a run that allows no call any more
			// (it ended, or spent its budget) has none to resume.
			if d, refused := approval.RunRefuses(h); refused {
				return store.Batch{}, &approval.RunRefusedError{Decision: d}
			}
		}
		b := store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{op}}
		if r.Counted {
			b.Head.Inputs, b.Head.Status = -1, store.WaitingStatus(h, 0, -1)
		}
		return b, nil
	})
	if refused, ok := errors.AsType[*approval.RunRefusedError](err); ok {
		// Declined for the run, as the sweep declines it; the person's
		// answer is not what applied.
		after, _, err := s.settle(ctx, r, approval.RefusedBy(refused.Decision), Declined)
		return after, false, err
	}
	if errors.Is(err, ErrSettled) {
		cur, err := s.st.GetInputRequestByID(ctx, r.ID)
		if err != nil {
			return store.InputRequest{}, false, err
		}
		if State(cur.Status) == Pending && to != Expired && s.Overdue(cur) {
			cur = s.Current(ctx, cur)
		}
		return cur, false, nil
	}
	if err != nil {
		return store.InputRequest{}, false, err
	}
	after := r
	after.Status, after.DecidedBy, after.DecidedAt = string(to), string(by), at
	if s.observe != nil {
		s.observe(ctx, r, after)
	}
	return after, true, nil
}

// mayDecide is MayDecide with the invoker of r's run read when r is
// personal, remembered in invokers for the rest of a listing. A run
// without a head has no invoker, so nobody may answer its personal calls.
func (s *Service) mayDecide(ctx context.Context, who auth.Principal, r store.InputRequest, invokers map[string]string) (bool, error) {
	if !r.Personal {
		return MayDecide(who, r, ""), nil
	}
	invoker, ok := invokers[r.RunID]
	if !ok {
		h, err := s.st.GetHead(ctx, r.RunID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		invoker = h.Invoker
		invokers[r.RunID] = invoker
	}
	return MayDecide(who, r, invoker), nil
}
