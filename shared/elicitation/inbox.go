package elicitation

import (
	"context"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Page is one page of an inbox.
type Page struct {
	InputRequests []store.InputRequest
	// Next is the position to list after for the next page; "" when this
	// page ends the list.
	Next string
}

// Inbox lists, in request order after position after ("" from the start),
// at most limit pending requests that who may answer (MayDecide, row by
// row, as the decision asks it). Overdue ones are expired on the way and
// left out. A page may hold fewer than limit and still have a Next. It
// pages as the approvals' inbox does (approval.ScanInbox): a caller who
// may answer little pays in proportion to the page, not to the whole
// list.
func (s *Service) Inbox(ctx context.Context, who auth.Principal, after string, limit int) (Page, error) {
	invokers := map[string]string{}
	list, next, err := approval.ScanInbox(ctx, after, limit, s.st.PendingInputRequestsAfter, func(r store.InputRequest) (store.InputRequest, bool, error) {
		ok, err := s.mayDecide(ctx, who, r, invokers)
		if err != nil || !ok {
			return r, false, err
		}
		// The index lags: re-read the row before showing it.
		cur, err := s.st.GetInputRequestByID(ctx, r.ID)
		if err != nil {
			return r, false, err
		}
		cur = s.Current(ctx, cur)
		return cur, State(cur.Status) == Pending && !s.Overdue(cur), nil
	}, store.InputRequestPosition)
	if err != nil {
		return Page{}, err
	}
	return Page{InputRequests: list, Next: next}, nil
}

// View reads a request by id for who: whoever may answer it, and admins.
func (s *Service) View(ctx context.Context, who auth.Principal, id string) (store.InputRequest, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return store.InputRequest{}, err
	}
	if who.IsAdmin() {
		return r, nil
	}
	ok, err := s.mayDecide(ctx, who, r, map[string]string{})
	if err != nil {
		return store.InputRequest{}, err
	}
	if !ok {
		return store.InputRequest{}, ErrForbidden
	}
	return r, nil
}
