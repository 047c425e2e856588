package control

import (
	"errors"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

// policyShadow serves GET /v1/policies/{id}/shadow: where the policy, run
// as a shadow, would have differed from what its runs enforced, over one
// page of the runs created with it as their shadow (newest first, the
// listing parameters of GET /v1/sessions). It reads the page's listing and
// each run's difference counts, never a ledger; the client follows
// next_cursor and merges pages (client.ShadowSummary.Merge).
func (s *Server) policyShadow(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id := r.PathValue("id")
	if !ids.Valid("pol_", id) {
		return notFound("policy " + id)
	}
	q, err := route.ParseList(r)
	if err != nil {
		return err
	}
	if _, err := s.st.GetPolicy(r.Context(), id, 0); errors.Is(err, store.ErrNotFound) {
		return notFound("policy " + id)
	} else if err != nil {
		return err
	}
	page, err := s.st.ListShadowRuns(r.Context(), id, q)
	if err != nil {
		return err
	}
	sum := client.ShadowSummary{PolicyID: id, ByDifference: []client.ShadowGroup{}, NextCursor: route.Cursor(page.Next)}
	for _, run := range page.Runs {
		sum.Runs++
		if len(run.Differences) > 0 {
			sum.RunsDiffering++
		}
		if run.Cut {
			sum.RunsCut++
		}
		for _, d := range run.Differences {
			sum.Add(client.ShadowGroup{
				ToolName: d.ToolName, Verdict: d.Verdict, RuleID: d.RuleID,
				ShadowVerdict: d.ShadowVerdict, ShadowRuleID: d.ShadowRuleID, ShadowError: d.ShadowError,
				Count: d.Count, Runs: 1,
				Samples: []client.ShadowSample{{SessionID: run.RunID, ToolCallID: d.FirstToolCallID, Seq: d.FirstSeq}},
			})
		}
	}
	sum.Sort()
	writeJSON(w, http.StatusOK, sum)
	return nil
}
