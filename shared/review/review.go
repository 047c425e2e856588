// Package review gathers what a human needs beside a call to decide it
// quickly: the rule that asked (its frozen definition and the gate's
// reason) and the run (trigger, repository, pull request, trust tier). The
// API's approval views and the Slack messages show the same facts.
//
// Everything comes from the run's frozen records and the call's recorded
// answer, never from the sandbox's word. Free text in it (the rule, the
// repository name) is for a renderer to escape; Facts holds it raw.
package review

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Facts is what a reviewer sees beside the call.
type Facts struct {
	// Rule is the frozen definition of the rule that asked, absent when the
	// policy's default verdict asked.
	Rule json.RawMessage `json:"rule,omitempty"`
	// DefaultVerdict is set when no rule matched and the default asked.
	DefaultVerdict string `json:"default_verdict,omitempty"`
	// Reason is the gate's reason for pausing the call.
	Reason      string `json:"reason,omitempty"`
	Policy      string `json:"policy"`
	TrustTier   string `json:"trust_tier"`
	Autonomous  bool   `json:"autonomous,omitempty"`
	Trigger     string `json:"trigger,omitempty"`
	Invoker     string `json:"invoker,omitempty"`
	Repository  string `json:"repository,omitempty"`
	PullRequest int    `json:"pull_request,omitempty"`
	// HeadRepository and Fork are the pull request's head, when it has one.
	HeadRepository string `json:"head_repository,omitempty"`
	Fork           bool   `json:"fork,omitempty"`
	HeadSHA        string `json:"head_sha,omitempty"`
	// Danger names what in a Bash line deserves a second look before an
	// approval: "opaque: ...", "destructive: ...".
	Danger []string `json:"danger,omitempty"`
	// Matched is the part of a compound Bash line the rule asked about.
	Matched *Part `json:"matched,omitempty"`
	// GrantCovers says what approving for the run lets through later, when
	// that reaches further than the reviewer may think (force pushes).
	GrantCovers string `json:"grant_covers,omitempty"`
}

// Reader is the part of the store Load reads.
type Reader interface {
	GetHead(ctx context.Context, runID string) (store.Head, error)
	GetRunPolicy(ctx context.Context, runID string) (store.PolicySnapshot, error)
	GetCall(ctx context.Context, runID, toolCallID string) (store.Call, error)
}

var _ Reader = (*store.Store)(nil)

// Load gathers the facts of approval a.
func Load(ctx context.Context, st Reader, a store.Approval) (Facts, error) {
	h, err := st.GetHead(ctx, a.RunID)
	if err != nil {
		return Facts{}, fmt.Errorf("review: run %s: %w", a.RunID, err)
	}
	p, err := st.GetRunPolicy(ctx, a.RunID)
	if err != nil {
		return Facts{}, fmt.Errorf("review: policy of %s: %w", a.RunID, err)
	}
	c, err := st.GetCall(ctx, a.RunID, a.ToolCallID)
	if err != nil {
		return Facts{}, fmt.Errorf("review: call %s: %w", a.ToolCallID, err)
	}
	f := Facts{
		Policy:     fmt.Sprintf("%s v%d", h.PolicyID, h.PolicyVersion),
		TrustTier:  h.TrustTier,
		Autonomous: h.Autonomous,
		Trigger:    h.Trigger,
		Invoker:    h.Invoker,
		Reason:     c.Reason,
	}
	if a.Status != vocab.ApprovalPending {
		// The call's reason is now the decision's; the gate's is gone.
		f.Reason = ""
	}
	if g := h.GitHub; g != nil {
		f.Repository, f.PullRequest, f.HeadRepository, f.Fork, f.HeadSHA = g.Repository, g.PullRequest, g.HeadRepository, g.Fork, g.HeadSHA
	}
	pol, _, err := policy.Parse([]byte(p.Document))
	if err != nil {
		return Facts{}, fmt.Errorf("review: policy of %s: %w", a.RunID, err)
	}
	doc := pol.Document()
	if doc.Name != "" {
		f.Policy = fmt.Sprintf("%s (%s v%d)", doc.Name, h.PolicyID, h.PolicyVersion)
	}
	for _, r := range doc.Rules {
		if a.RuleID != "" && r.ID == a.RuleID {
			if f.Rule, err = json.Marshal(r); err != nil {
				return Facts{}, err
			}
		}
	}
	if f.Rule == nil {
		f.DefaultVerdict = string(doc.DefaultVerdict)
	}
	if a.ToolName == "Bash" {
		var in any
		if json.Unmarshal([]byte(a.Input), &in) == nil {
			t := policy.TraceBash(in)
			f.Danger = bashDanger(t)
			f.Matched = matchedPart(pol, policy.Env{Workspace: h.Workspace}, t, a.RuleID)
		}
		f.GrantCovers = grantCovers(f.Rule)
	}
	return f, nil
}
