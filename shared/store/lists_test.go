package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// createListed creates run id at t0+d, started by trigger (github runs
// carry repo).
func createListed(t *testing.T, st *store.Store, id string, d time.Duration, trigger, repo string) store.Head {
	t.Helper()
	h := store.Head{RunID: id, Status: vocab.Running, Invoker: "admin", TrustTier: "trusted", Trigger: trigger, CreatedAt: at(d), BudgetLimit: 1, BudgetAvailable: 1}
	if repo != "" {
		h.GitHub = &store.GitHubTrigger{TriggerID: "trg_1", Repository: repo}
	}
	must(t, st.CreateRun(context.Background(), store.NewRun{
		Head:    h,
		Policy:  store.PolicySnapshot{PolicyID: "pol_1", Version: 1, Digest: "sha256:p", Document: `{}`},
		Created: envelope(t, redact.SessionCreated{SessionID: id, Trigger: trigger}),
	}))
	h, err := st.GetHead(context.Background(), id)
	must(t, err)
	return h
}

// allRuns follows next_cursor from f to the end and returns the run ids in
// order, failing on a page over its limit or a run seen twice.
func allRuns(t *testing.T, st *store.Store, f store.RunFilter) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatalf("listing %+v does not end: %v", f, got)
		}
		p, err := st.ListRuns(context.Background(), f)
		must(t, err)
		if len(p.Runs) > f.Limit {
			t.Fatalf("page of %d runs, limit %d", len(p.Runs), f.Limit)
		}
		for _, h := range p.Runs {
			if slices.Contains(got, h.RunID) {
				t.Fatalf("run %s listed twice", h.RunID)
			}
			got = append(got, h.RunID)
		}
		if p.Next == "" {
			return got
		}
		f.Cursor = p.Next
	}
}

func TestListRunsPagesAndFilters(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	var all []string
	for i := range 9 {
		id := fmt.Sprintf("ses_%02d", i)
		trigger, repo := "manual", ""
		if i%3 == 0 {
			trigger, repo = "github", "Octo/App"
		}
		if i == 6 {
			repo = "octo/other"
		}
		h := createListed(t, st, id, time.Duration(i)*time.Second, trigger, repo)
		if i%4 == 1 {
			_, err := append1(t, st, h, store.HeadChange{Status: vocab.Ended})
			must(t, err)
		}
		all = append([]string{id}, all...) // newest first
	}
	for _, limit := range []int{1, 2, 4, 100} {
		if got := allRuns(t, st, store.RunFilter{ListQuery: store.ListQuery{Limit: limit}}); !slices.Equal(got, all) {
			t.Errorf("limit %d: %v, want %v", limit, got, all)
		}
	}
	cases := []struct {
		name string
		f    store.RunFilter
		want []string
	}{
		{"trigger", store.RunFilter{Trigger: "github"}, []string{"ses_06", "ses_03", "ses_00"}},
		{"repository in any case", store.RunFilter{Repository: "octo/APP"}, []string{"ses_03", "ses_00"}},
		{"status from the head", store.RunFilter{Status: vocab.Ended}, []string{"ses_05", "ses_01"}},
		{"status and trigger", store.RunFilter{Status: vocab.Running, Trigger: "github"}, []string{"ses_06", "ses_03", "ses_00"}},
		{"created bounds, inclusive", store.RunFilter{ListQuery: store.ListQuery{CreatedAfter: t0.Add(2 * time.Second), CreatedBefore: t0.Add(4 * time.Second)}}, []string{"ses_04", "ses_03", "ses_02"}},
		{"nothing matches", store.RunFilter{Trigger: "slack"}, nil},
	}
	for _, c := range cases {
		for _, limit := range []int{1, 2, 50} {
			f := c.f
			f.Limit = limit
			if got := allRuns(t, st, f); !slices.Equal(got, c.want) {
				t.Errorf("%s, limit %d: %v, want %v", c.name, limit, got, c.want)
			}
		}
	}
	// A rare match ends a page short, with a cursor, rather than read on:
	// a page is at most a few Query calls however many runs there are.
	p, err := st.ListRuns(ctx, store.RunFilter{ListQuery: store.ListQuery{Limit: 1}, Trigger: "slack"})
	must(t, err)
	if len(p.Runs) != 0 || p.Next == "" {
		t.Errorf("short page = %+v, want no runs and a cursor", p)
	}
	if _, err := st.ListRuns(ctx, store.RunFilter{ListQuery: store.ListQuery{Limit: store.MaxPage + 1}}); err == nil {
		t.Error("a page over MaxPage was accepted")
	}
}

func TestListPoliciesShowsLatest(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	for i := range 3 {
		must(t, st.PutPolicyVersion(ctx, store.PolicyVersion{PolicyID: fmt.Sprintf("pol_%d", i), Version: 1, Name: "v1", Digest: "sha256:1", Document: "{}", CreatedAt: at(time.Duration(i) * time.Second)}))
	}
	must(t, st.PutPolicyVersion(ctx, store.PolicyVersion{PolicyID: "pol_0", Version: 2, Name: "v2", Digest: "sha256:2", Document: "{}", CreatedAt: at(time.Hour)}))
	var got []store.PolicySummary
	q := store.ListQuery{Limit: 2}
	for {
		p, err := st.ListPolicies(ctx, q)
		must(t, err)
		got = append(got, p.Policies...)
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	if len(got) != 3 || got[0].Latest.PolicyID != "pol_2" || got[2].Latest.PolicyID != "pol_0" {
		t.Fatalf("policies = %+v", got)
	}
	if l := got[2]; l.Latest.Version != 2 || l.Latest.Name != "v2" || l.CreatedAt != at(0) {
		t.Errorf("pol_0 = %+v, want version 2 created at %s", l, at(0))
	}
}

func TestUpdateAndDeleteTrigger(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	tr := store.Trigger{ID: "trg_a", Repository: "Octo/App", PolicyID: "pol_1", CreatedAt: at(0)}
	must(t, st.PutTrigger(ctx, tr))
	up := tr
	up.Revision, up.PolicyID = 1, "pol_2"
	must(t, st.UpdateTrigger(ctx, up))
	wantErr(t, "a second update from the same read", st.UpdateTrigger(ctx, up), store.ErrTriggerChanged)
	moved := up
	moved.Revision, moved.Repository = 2, "octo/else"
	wantErr(t, "an update moving the repository", st.UpdateTrigger(ctx, moved), store.ErrTriggerChanged)
	if got, err := st.GetTrigger(ctx, "trg_a"); err != nil || got.PolicyID != "pol_2" || got.Revision != 1 {
		t.Errorf("after update = %+v, %v", got, err)
	}
	if p, err := st.ListTriggerPage(ctx, store.ListQuery{Limit: 5}); err != nil || len(p.Triggers) != 1 || p.Triggers[0].PolicyID != "pol_2" {
		t.Errorf("listed after update = %+v, %v", p, err)
	}

	_, err := st.DeleteTrigger(ctx, "trg_a")
	must(t, err)
	_, err = st.DeleteTrigger(ctx, "trg_a")
	wantErr(t, "delete twice", err, store.ErrNotFound)
	_, err = st.TriggerForRepository(ctx, "octo/app")
	wantErr(t, "repository after delete", err, store.ErrNotFound)
	ghost := up
	ghost.Revision = 2
	wantErr(t, "update after delete", st.UpdateTrigger(ctx, ghost), store.ErrTriggerChanged)
	// The repository is free again.
	must(t, st.PutTrigger(ctx, store.Trigger{ID: "trg_b", Repository: "octo/app", CreatedAt: at(time.Second)}))
	if p, err := st.ListTriggerPage(ctx, store.ListQuery{Limit: 5}); err != nil || len(p.Triggers) != 1 || p.Triggers[0].ID != "trg_b" {
		t.Errorf("listed after delete = %+v, %v", p, err)
	}
}
