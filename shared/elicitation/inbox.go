package elicitation

import (
	"context"

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

// inboxChunk is how many rows of the pending list one read takes, and
// scanPerItem bounds the rows one page examines per request it may hold
// (as for approvals' inbox: a caller who may answer little pays in
// proportion to the page, not to the whole list).
const (
	inboxChunk  = 100
	scanPerItem = 20
)

// Inbox lists, in request order after position after ("" from the start),
// at most limit pending requests that who may answer (MayDecide, row by
// row, as the decision asks it). Overdue ones are expired on the way and
// left out. A page may hold fewer than limit and still have a Next.
func (s *Service) Inbox(ctx context.Context, who auth.Principal, after string, limit int) (Page, error) {
	page := Page{InputRequests: []store.InputRequest{}}
	invokers := map[string]string{}
	examined, scan := 0, scanPerItem*max(limit, 1)
	for {
		chunk := min(inboxChunk, scan-examined)
		rows, err := s.st.PendingInputRequestsAfter(ctx, after, chunk)
		if err != nil {
			return Page{}, err
		}
		for i, r := range rows {
			ok, err := s.mayDecide(ctx, who, r, invokers)
			if err != nil {
				return Page{}, err
			}
			if !ok {
				continue
			}
			// The index lags: re-read the row before showing it.
			cur, err := s.st.GetInputRequestByID(ctx, r.ID)
			if err != nil {
				return Page{}, err
			}
			if cur = s.Current(ctx, cur); State(cur.Status) != Pending || s.Overdue(cur) {
				continue
			}
			page.InputRequests = append(page.InputRequests, cur)
			if len(page.InputRequests) == limit {
				if i < len(rows)-1 || len(rows) == chunk {
					page.Next = store.InputRequestPosition(cur)
				}
				return page, nil
			}
		}
		examined += len(rows)
		if len(rows) < chunk {
			return page, nil
		}
		after = store.InputRequestPosition(rows[len(rows)-1])
		if examined >= scan {
			page.Next = after
			return page, nil
		}
	}
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
