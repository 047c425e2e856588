package run

import (
	"context"

	"github.com/fluidbox/fluidbox/shared/store"
)

// Page is one page of runs, newest first.
type Page struct {
	Runs []View
	// Next continues the listing; "" on the last page.
	Next string
}

// List returns one page of runs matching f. A page may hold fewer runs
// than f.Limit and still have a Next (a filter that matched few of the
// runs one page looked at).
func (s *Service) List(ctx context.Context, f store.RunFilter) (Page, error) {
	p, err := s.st.ListRuns(ctx, f)
	if err != nil {
		return Page{}, err
	}
	out := Page{Runs: make([]View, len(p.Runs)), Next: p.Next}
	for i, h := range p.Runs {
		v := view(h)
		v.LastSeq = &h.LastSeq
		out.Runs[i] = v
	}
	return out, nil
}
