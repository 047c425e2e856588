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
	page := Page{Approvals: []store.Approval{}}
	invokers := map[string]string{}
	examined, scan := 0, scanPerItem*max(limit, 1)
	for {
		chunk := min(inboxChunk, scan-examined)
		var rows []store.Approval
		var err error
		if runID != "" {
			rows, err = s.st.RunPendingApprovals(ctx, runID, after, chunk)
		} else {
			rows, err = s.st.PendingApprovalsAfter(ctx, after, chunk)
		}
		if err != nil {
			return Page{}, err
		}
		for i, a := range rows {
			ok, err := s.mayDecide(ctx, who, a, invokers)
			if err != nil {
				return Page{}, err
			}
			if !ok {
				continue
			}
			// An overdue one whose expiry could not be written is left
			// out too: it can no longer be approved.
			if a = s.Current(ctx, a); a.Status != vocab.ApprovalPending || s.overdue(a) {
				continue
			}
			page.Approvals = append(page.Approvals, a)
			if len(page.Approvals) == limit {
				if i < len(rows)-1 || len(rows) == chunk {
					page.Next = store.ApprovalPosition(a)
				}
				return page, nil
			}
		}
		examined += len(rows)
		if len(rows) < chunk {
			return page, nil
		}
		after = store.ApprovalPosition(rows[len(rows)-1])
		if examined >= scan {
			page.Next = after
			return page, nil
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
