package approval

import (
	"context"
	"errors"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// An inbox is the pending approvals one caller may decide: MayDecide's
// answer for each row, so the list and the decision can never disagree. A
// personal connection's call is in its owner's inbox alone; an approver's
// or admin's inbox leaves out the personal calls of others, which they may
// not decide, instead of showing them without a button: they would crowd
// the page the caller acts on (a flood of them would push decidable ones
// past it) and would show one person's call on their own credential to
// people who have no say in it. An admin still reads every approval of a
// run (GET /v1/sessions/{id}/approvals) and any one by id (View).

// inboxChunk is how many rows of the pending list one read takes.
const inboxChunk = 100

// scanPerItem bounds how many pending rows one inbox page examines, per
// approval the page may hold. A page that reaches the bound before it is
// full ends early with a Next to continue from, so a caller who may decide
// little (a member, in a list full of others' approvals) costs a read in
// proportion to the page asked for, not to the whole list.
const scanPerItem = 20

// Inbox lists, in request order after position after ("" from the
// start), at most limit pending approvals that who may decide: all runs'
// or (runID set) one run's. Overdue ones are expired on the way and left
// out. A page may hold fewer than limit and still have a Next: the list is
// done only when Next is "".
func (s *Service) Inbox(ctx context.Context, who auth.Principal, runID, after string, limit int) (Page, error) {
	invokers := map[string]string{}
	read := func(ctx context.Context, after string, n int) ([]store.Approval, error) {
		if runID != "" {
			return s.st.RunPendingApprovals(ctx, runID, after, n)
		}
		return s.st.PendingApprovalsAfter(ctx, after, n)
	}
	list, next, err := ScanInbox(ctx, after, limit, read, func(a store.Approval) (store.Approval, bool, error) {
		ok, err := s.mayDecide(ctx, who, a, invokers)
		if err != nil || !ok {
			return a, false, err
		}
		// An overdue one whose expiry could not be written is left out
		// too: it can no longer be approved.
		a = s.Current(ctx, a)
		return a, a.Status == vocab.ApprovalPending && !s.overdue(a), nil
	}, store.ApprovalPosition)
	if err != nil {
		return Page{}, err
	}
	return Page{Approvals: list, Next: next}, nil
}

// ScanInbox is one page of an inbox over a pending list read in order by
// read (at most n rows after a position): the first limit rows that
// admit keeps, as admit returns them, and the position to list after for
// the next page ("" when the list is done). It examines at most
// scanPerItem rows per row the page may hold, read inboxChunk at a time,
// and ends early with a next position past the bound. The approvals'
// inbox and the input requests' (shared/elicitation) both page this way.
func ScanInbox[T any](ctx context.Context, after string, limit int, read func(ctx context.Context, after string, n int) ([]T, error),
	admit func(T) (T, bool, error), position func(T) string) ([]T, string, error) {
	out := []T{}
	examined, scan := 0, scanPerItem*max(limit, 1)
	for {
		chunk := min(inboxChunk, scan-examined)
		rows, err := read(ctx, after, chunk)
		if err != nil {
			return nil, "", err
		}
		for i, r := range rows {
			cur, ok, err := admit(r)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				continue
			}
			out = append(out, cur)
			if len(out) == limit {
				next := ""
				if i < len(rows)-1 || len(rows) == chunk {
					next = position(cur)
				}
				return out, next, nil
			}
		}
		examined += len(rows)
		if len(rows) < chunk {
			return out, "", nil
		}
		after = position(rows[len(rows)-1])
		if examined >= scan {
			return out, after, nil
		}
	}
}

// View reads an approval by id for who: whoever may decide it, and admins
// (who read every approval of a run anyway). Anyone else is refused with
// ErrForbidden, so another's personal call stays with its owner.
func (s *Service) View(ctx context.Context, who auth.Principal, id string) (store.Approval, error) {
	a, err := s.Get(ctx, id)
	if err != nil {
		return store.Approval{}, err
	}
	if who.IsAdmin() {
		return a, nil
	}
	ok, err := s.mayDecide(ctx, who, a, map[string]string{})
	if err != nil {
		return store.Approval{}, err
	}
	if !ok {
		return store.Approval{}, ErrForbidden
	}
	return a, nil
}

// mayDecide is MayDecide with the invoker of a's run read when a is
// personal, remembered in invokers for the rest of a listing. A run
// without a head has no invoker, so nobody may decide its personal calls.
func (s *Service) mayDecide(ctx context.Context, who auth.Principal, a store.Approval, invokers map[string]string) (bool, error) {
	if !personal(a) {
		return MayDecide(who, a, ""), nil
	}
	invoker, ok := invokers[a.RunID]
	if !ok {
		h, err := s.st.GetHead(ctx, a.RunID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
		invoker = h.Invoker
		invokers[a.RunID] = invoker
	}
	return MayDecide(who, a, invoker), nil
}
