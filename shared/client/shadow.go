package client

import (
	"cmp"
	"slices"
)

// ShadowSummary is one page of GET /v1/policies/{id}/shadow: where a
// policy, run as a shadow, would have decided differently from the policy
// its runs enforced, across the runs created with it as their shadow that
// the page covers. The counts are of those runs only; NextCursor continues
// with older runs, and Merge adds a page's counts to another's.
type ShadowSummary struct {
	PolicyID string `json:"policy_id"`
	// Runs is how many runs the page covers; RunsDiffering how many of
	// them had at least one difference; Differences how many calls
	// differed.
	Runs          int   `json:"runs"`
	RunsDiffering int   `json:"runs_differing"`
	Differences   int64 `json:"differences"`
	// RunsCut is how many of the runs had more kinds of difference than
	// the server reads of one run (1,000): their counts are partial.
	RunsCut      int           `json:"runs_cut,omitempty"`
	ByDifference []ShadowGroup `json:"by_difference"`
	NextCursor   string        `json:"next_cursor,omitempty"`

	// index finds a difference's group in ByDifference.
	index map[[6]string]int
}

// ShadowGroup is one kind of difference: a tool, what the enforced policy
// decided (verdict and rule) and what the shadow would have (or that it
// could not decide), with how many calls and runs showed it and a few of
// those calls. Verdicts are as compared: an autonomous run's
// require_approval is the verdict its policy's fallback gives.
type ShadowGroup struct {
	ToolName      string         `json:"tool_name"`
	Verdict       string         `json:"verdict"`
	RuleID        string         `json:"rule_id,omitempty"`
	ShadowVerdict string         `json:"shadow_verdict,omitempty"`
	ShadowRuleID  string         `json:"shadow_rule_id,omitempty"`
	ShadowError   bool           `json:"shadow_error,omitempty"`
	Count         int64          `json:"count"`
	Runs          int            `json:"runs"`
	Samples       []ShadowSample `json:"samples"`
}

// ShadowSample is a call that showed a difference: its run, its
// tool_call_id and the seq of the event that recorded it (GET
// /v1/sessions/{id}/events?after=seq-1&limit=1 shows it).
type ShadowSample struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Seq        int64  `json:"seq"`
}

// MaxShadowSamples bounds the samples of one group.
const MaxShadowSamples = 3

func (g ShadowGroup) key() [6]string {
	e := ""
	if g.ShadowError {
		e = "error"
	}
	return [6]string{g.ToolName, g.Verdict, g.RuleID, g.ShadowVerdict, g.ShadowRuleID, e}
}

// Add counts g into s (Differences included), merging it with the group
// of the same difference. Call Sort once the groups are all added.
func (s *ShadowSummary) Add(g ShadowGroup) {
	s.Differences += g.Count
	if s.index == nil {
		s.index = make(map[[6]string]int, len(s.ByDifference))
		for i, h := range s.ByDifference {
			s.index[h.key()] = i
		}
	}
	i, ok := s.index[g.key()]
	if !ok {
		g.Samples = append([]ShadowSample{}, g.Samples[:min(len(g.Samples), MaxShadowSamples)]...)
		s.index[g.key()] = len(s.ByDifference)
		s.ByDifference = append(s.ByDifference, g)
		return
	}
	h := &s.ByDifference[i]
	h.Count += g.Count
	h.Runs += g.Runs
	for _, x := range g.Samples {
		if len(h.Samples) < MaxShadowSamples {
			h.Samples = append(h.Samples, x)
		}
	}
}

// Sort orders the groups: most calls first, then by difference.
func (s *ShadowSummary) Sort() {
	slices.SortStableFunc(s.ByDifference, func(a, b ShadowGroup) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		k, l := a.key(), b.key()
		return slices.Compare(k[:], l[:])
	})
	s.index = nil
}

// Merge adds page's runs and groups to s, in order (its cursor is not
// taken).
func (s *ShadowSummary) Merge(page ShadowSummary) {
	s.Runs += page.Runs
	s.RunsDiffering += page.RunsDiffering
	s.RunsCut += page.RunsCut
	for _, g := range page.ByDifference {
		s.Add(g)
	}
	s.Sort()
}
