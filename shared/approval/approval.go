// Package approval settles the calls the gate paused for a human.
//
// An approval moves once, from pending to approved_once, approved_session,
// denied or expired, by a compare-and-swap on its row (status = pending,
// and for a decision expires_at > now; for an expiry expires_at <= now).
// The swap is one transaction with everything it implies: the call's final
// answer, the session grant, the run's pending count and status, and the
// events approval.decided and tool.decision. Only the winner of a race
// writes or emits anything; everyone else is shown the settled row. If any
// part fails, nothing is settled: the approval stays pending (fail closed).
//
// Expiry is deny, and three paths race for it with the same swap: a timer
// per approval (Step Functions in AWS, in-process in dev), lazy expiry on
// every read of an overdue row, and a periodic sweep. Nothing that happens
// while nobody is watching can widen access.
package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Errors.
var (
	ErrNotFound  = errors.New("approval: not found")
	ErrForbidden = errors.New("approval: the caller may not decide this approval")
	ErrInvalid   = errors.New("approval: invalid decision")
)

// InvalidError is a decision the caller must fix. It matches ErrInvalid.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return "approval: invalid decision: " + e.Message }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// ExpiredBy is who settles an approval nobody decided in time.
var ExpiredBy = string(expiredBy)

var expiredBy = auth.System(auth.ExpiryRole)

// Observer is told of every approval transition after it is committed:
// before is the zero Approval for a new one. The dev server turns these
// into notifications; in AWS the table's stream does.
type Observer func(ctx context.Context, before, after store.Approval)

// Service reads and settles approvals.
type Service struct {
	led     *ledger.Ledger
	st      *store.Store
	now     func() time.Time
	observe Observer
	log     *slog.Logger
}

// Observe sets the observer of committed transitions.
func (s *Service) Observe(o Observer) { s.observe = o }

// Observed reports a committed transition to the observer, if any.
func (s *Service) Observed(ctx context.Context, before, after store.Approval) {
	if s.observe != nil {
		s.observe(ctx, before, after)
	}
}

// NewService returns an approval service. It logs to slog's default
// logger until SetLogger.
func NewService(led *ledger.Ledger, now func() time.Time) *Service {
	return &Service{led: led, st: led.Store(), now: now, log: slog.Default()}
}

// SetLogger sets where the service logs what it cannot do on the side of
// a read (a failed lazy expiry).
func (s *Service) SetLogger(l *slog.Logger) {
	if l != nil {
		s.log = l
	}
}

// Get reads an approval by id, expiring it first if it is overdue.
func (s *Service) Get(ctx context.Context, id string) (store.Approval, error) {
	a, err := s.st.GetApprovalByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Approval{}, ErrNotFound
	}
	if err != nil {
		return store.Approval{}, err
	}
	return s.Current(ctx, a), nil
}

// Current expires a pending approval read past its time (lazy expiry), and
// returns it as it now stands. A read never fails because this side write
// did: the failure is logged and the approval is returned as read, still
// pending and overdue, which nobody can approve (a decision needs it
// unexpired) and which the timer, the sweep or the next read expires.
func (s *Service) Current(ctx context.Context, a store.Approval) store.Approval {
	if a.Status != vocab.ApprovalPending || !s.overdue(a) {
		return a
	}
	settled, _, err := s.settle(ctx, a, expiredBy, vocab.ApprovalExpired, "")
	if err != nil {
		s.log.WarnContext(ctx, "lazy expiry failed; the approval stays pending past its time and can no longer be approved", "approval", a.ID, "run", a.RunID, "err", err)
		return a
	}
	return settled
}

func (s *Service) overdue(a store.Approval) bool {
	return a.ExpiresAt <= store.FormatTime(s.now())
}

// Page is one page of a pending list.
type Page struct {
	Approvals []store.Approval
	// Next is the position to list after for the next page; "" when this
	// page ends the list.
	Next string
}

// ForRun lists all of a run's approvals, any status.
func (s *Service) ForRun(ctx context.Context, runID string) ([]store.Approval, error) {
	rows, err := s.st.RunApprovals(ctx, runID)
	if err != nil {
		return nil, err
	}
	for i, a := range rows {
		rows[i] = s.Current(ctx, a)
	}
	return rows, nil
}

// MaxReason bounds a decider's note, in characters.
const MaxReason = 500

// Decide settles an approval by a human's decision. It reports whether
// this call was the one that settled it; if not, the approval is returned
// as it was settled (by someone else, or by expiry).
func (s *Service) Decide(ctx context.Context, who auth.Principal, id string, decision vocab.Choice) (store.Approval, bool, error) {
	return s.DecideWithReason(ctx, who, id, decision, "")
}

// DecideWithReason is Decide with the decider's note (why a call was
// denied, say). The note is kept on the approval and, for a deny, given to
// the runner with the answer; the ledger records no free text, so it is
// not in approval.decided.
func (s *Service) DecideWithReason(ctx context.Context, who auth.Principal, id string, decision vocab.Choice, reason string) (store.Approval, bool, error) {
	if !utf8.ValidString(reason) || utf8.RuneCountInString(reason) > MaxReason {
		return store.Approval{}, false, &InvalidError{fmt.Sprintf("a reason is at most %d characters of valid UTF-8", MaxReason)}
	}
	reason = strings.TrimSpace(reason)
	a, err := s.st.GetApprovalByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Approval{}, false, ErrNotFound
	}
	if err != nil {
		return store.Approval{}, false, err
	}
	// The one extra read of a decision, and only on a personal call: who
	// invoked the run is on its head.
	ok, err := s.mayDecide(ctx, who, a, map[string]string{})
	if err != nil {
		return store.Approval{}, false, err
	}
	if !ok {
		return store.Approval{}, false, ErrForbidden
	}
	var to vocab.ApprovalStatus
	switch decision {
	case vocab.ChoiceApprovedOnce:
		to = vocab.ApprovedOnce
	case vocab.ChoiceApprovedSession:
		to = vocab.ApprovedSession
	case vocab.ChoiceDenied:
		to = vocab.ApprovalDenied
	case vocab.ChoiceApproved:
		to = vocab.ApprovedOnce
		if a.DefaultScope == string(policy.ScopeSession) {
			to = vocab.ApprovedSession
		}
	default:
		return store.Approval{}, false, &InvalidError{fmt.Sprintf("%q is not one of approved_once, approved_session, denied, approved", decision)}
	}
	if to == vocab.ApprovedSession && a.ScopeKey == "" {
		return store.Approval{}, false, &InvalidError{"this call has no scope a session grant could cover; approve it once"}
	}
	if a.Status != vocab.ApprovalPending {
		return a, false, nil
	}
	if s.overdue(a) {
		// Expire it (a decision is refused past the time); unlike a read,
		// a decision reports a failed write.
		settled, _, err := s.settle(ctx, a, expiredBy, vocab.ApprovalExpired, "")
		return settled, false, err
	}
	return s.settle(ctx, a, auth.Subject(who.Subject), to, reason)
}

// MayDecide reports whether who may settle a, where invoker is the sub of
// whoever invoked a's run (needed only when a is personal).
//
// A call riding a personal connection spends someone's own credential, so
// only that person decides it: whoever invoked the run (a personal
// connection attaches only to runs its owner creates), for approve and deny
// alike. No role overrides this, and neither does the operator's token —
// unless the operator is the one who invoked the run, as in single-admin
// mode, where the operator owns its personal connections. (SSO users can
// never carry the operator's subject; the API refuses it.) Every other
// approval may be decided by the operator and by SSO users with role admin
// or approver.
func MayDecide(who auth.Principal, a store.Approval, invoker string) bool {
	if personal(a) {
		person := who.Kind == auth.KindUser || who.Kind == auth.KindAdmin
		return person && invoker != "" && who.Subject == invoker
	}
	return who.IsAdmin() || who.HasRole(auth.RoleApprover)
}

// personal reports whether a rides a personal connection. A row marked
// personal counts as personal even without a connection id: a marking that
// cannot be explained narrows who decides, never widens it.
func personal(a store.Approval) bool {
	return a.Personal
}

// Expire settles an approval as expired if it is overdue and still pending.
// It reports whether this call expired it. It is what the timer, the sweep
// and lazy expiry all run.
func (s *Service) Expire(ctx context.Context, id string) (bool, error) {
	a, err := s.st.GetApprovalByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, err
	}
	if a.Status != vocab.ApprovalPending || !s.overdue(a) {
		return false, nil
	}
	_, applied, err := s.settle(ctx, a, expiredBy, vocab.ApprovalExpired, "")
	return applied, err
}

// Sweep settles, in one walk of the pending approvals, what no timer or
// read will: an overdue one is expired (the backstop when a timer was
// lost), and one of a run that allows no call any more (it ended, or
// spent its whole budget: RunRefuses) is denied for it, as an approval of
// it would be (RefuseForRun), so that no inbox or message keeps offering
// a decision that can no longer allow anything.
func (s *Service) Sweep(ctx context.Context) (Swept, error) {
	return Pending[store.Approval]{
		Each:    s.st.EachPendingApproval,
		Overdue: s.overdue,
		Expire:  func(ctx context.Context, a store.Approval) (bool, error) { return s.Expire(ctx, a.ID) },
		RunOf:   func(a store.Approval) string { return a.RunID },
		Head:    s.st.GetHead,
		Refuse:  s.refuseForRun,
		Gone:    ErrNotFound,
	}.Sweep(ctx)
}

// refuseForRun settles pending approval a as denied by d, its run's
// refusal, and reports whether this call settled it.
func (s *Service) refuseForRun(ctx context.Context, a store.Approval, d gate.Decision) (bool, error) {
	build, after, err := RefuseForRun(s.st, a, d, s.now())
	if err != nil {
		return false, err
	}
	switch _, err = s.led.Append(ctx, a.RunID, build); {
	case errors.Is(err, call.ErrSettled):
		return false, nil
	case err != nil:
		return false, err
	}
	s.Observed(ctx, a, after)
	return true, nil
}

// Swept is what a sweep of pending rows settled, and how many it left
// pending.
type Swept struct{ Expired, Refused, Left int }

// Pending is a sweep of pending rows, the approvals' and the input
// requests' (shared/elicitation): Each visits them; an Overdue one is
// expired (Expire), else one whose run (RunOf, its Head read once a run)
// allows no call any more (RunRefuses) is refused (Refuse). Expire and
// Refuse report whether they settled the row; one settled meanwhile is
// not, and their error Gone (the row is gone since it was listed) is
// passed over.
type Pending[T any] struct {
	Each    func(context.Context, func(T) error) error
	Overdue func(T) bool
	Expire  func(context.Context, T) (bool, error)
	RunOf   func(T) string
	Head    func(context.Context, string) (store.Head, error)
	Refuse  func(context.Context, T, gate.Decision) (bool, error)
	Gone    error
}

// Sweep walks the pending rows once and says what it did.
func (p Pending[T]) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	refusals := map[string]*gate.Decision{} // by run; nil: it allows calls
	err := p.Each(ctx, func(v T) error {
		if p.Overdue(v) {
			return p.count(&out.Expired, func() (bool, error) { return p.Expire(ctx, v) })
		}
		run := p.RunOf(v)
		d, read := refusals[run]
		if !read {
			h, err := p.Head(ctx, run)
			if err != nil {
				return fmt.Errorf("approval: sweep: run %s: %w", run, err)
			}
			if dec, refused := RunRefuses(h); refused {
				d = &dec
			}
			refusals[run] = d
		}
		if d == nil {
			out.Left++
			return nil
		}
		return p.count(&out.Refused, func() (bool, error) { return p.Refuse(ctx, v, *d) })
	})
	return out, err
}

// count runs a settlement and counts it in n if it settled the row.
func (p Pending[T]) count(n *int, settle func() (bool, error)) error {
	settled, err := settle()
	if err != nil && !errors.Is(err, p.Gone) {
		return err
	}
	if settled {
		*n++
	}
	return nil
}

// settle is the compare-and-swap (Settle). It returns the approval as
// settled and whether this call settled it.
func (s *Service) settle(ctx context.Context, a store.Approval, by auth.Subject, to vocab.ApprovalStatus, reason string) (store.Approval, bool, error) {
	build, after, err := Settle(s.st, a, to, by, reason, s.now())
	if err != nil {
		return store.Approval{}, false, err
	}
	_, err = s.led.Append(ctx, a.RunID, build)
	if refused, ok := errors.AsType[*RunRefusedError](err); ok {
		// The run ended or ran out while the call waited: the approval is
		// denied for it, and the decider's choice is not what applied.
		if build, after, err = RefuseForRun(s.st, a, refused.Decision, s.now()); err != nil {
			return store.Approval{}, false, err
		}
		if _, err = s.led.Append(ctx, a.RunID, build); err == nil {
			s.Observed(ctx, a, after)
			return after, false, nil
		}
	}
	if errors.Is(err, call.ErrSettled) {
		cur, err := s.st.GetApprovalByID(ctx, a.ID)
		if err != nil {
			return store.Approval{}, false, err
		}
		if cur.Status == vocab.ApprovalPending && to != vocab.ApprovalExpired && s.overdue(cur) {
			cur = s.Current(ctx, cur)
		}
		return cur, false, nil
	}
	if err != nil {
		return store.Approval{}, false, err
	}
	s.Observed(ctx, a, after)
	return after, true, nil
}

// RevokeGrant withdraws a run's session grants with scopeKey, under
// whichever rules hold one (a grant belongs to the rule that asked, and
// the API names grants by scope key); later calls they covered ask again.
// Revoking is recorded in the ledger (grant.revoked). It fails with
// call.ErrNoGrant when the run holds no such grant.
func (s *Service) RevokeGrant(ctx context.Context, who auth.Principal, runID, scopeKey string) error {
	_, err := s.led.Append(ctx, runID, func(store.Head) (store.Batch, error) {
		held, err := s.st.Grants(ctx, runID)
		if err != nil {
			return store.Batch{}, err
		}
		return Revoke(s.st, runID, scopeKey, held, auth.Subject(who.Subject))
	})
	return err
}

// Lazy is a Scheduler that arranges nothing: expiry then happens on the
// next read of the overdue approval or at the next sweep.
type Lazy struct{}

// Schedule does nothing.
func (Lazy) Schedule(context.Context, string, time.Time) error { return nil }
