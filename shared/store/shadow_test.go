package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// newShadowRun creates run id, created at t0+d, with shadow policy
// shadowID frozen beside the enforced one.
func newShadowRun(t *testing.T, st *store.Store, id, shadowID string, d time.Duration) store.Head {
	t.Helper()
	r := store.NewRun{
		Head:    store.Head{RunID: id, Status: vocab.Running, Invoker: "admin", TrustTier: "trusted", CreatedAt: at(d), BudgetLimit: 1, BudgetAvailable: 1, ShadowPolicyID: shadowID},
		Policy:  store.PolicySnapshot{PolicyID: "pol_1", Version: 1, Digest: "sha256:p", Document: `{"name":"p"}`},
		Shadow:  &store.PolicySnapshot{PolicyID: shadowID, Version: 2, Digest: "sha256:s", Document: `{"name":"s"}`},
		Created: envelope(t, redact.SessionCreated{SessionID: id}),
	}
	must(t, st.CreateRun(context.Background(), r))
	h, err := st.GetHead(context.Background(), id)
	must(t, err)
	return h
}

func shadowOp(t *testing.T, st *store.Store, run string, k store.ShadowKey, call string, seq int64, d time.Duration) store.Op {
	t.Helper()
	op, err := st.ShadowDifferenceOp(run, k, call, seq, at(d))
	must(t, err)
	return op
}

// TestShadowDifferences: ShadowDifferenceOp counts one kind of difference
// per item, keeping the first call that showed it; ListShadowRuns pages
// through the runs a shadow policy was frozen into, newest first, each with
// its differences, and bounds what it reads of one run.
func TestShadowDifferences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	var newest []string
	heads := map[string]store.Head{}
	for i := range 5 {
		id := fmt.Sprintf("ses_%d", i)
		heads[id] = newShadowRun(t, st, id, "pol_s", time.Duration(i)*time.Second)
		newest = append([]string{id}, newest...)
	}
	newRun(t, st, "ses_plain", 0)                             // no shadow: not listed
	heads["ses_o"] = newShadowRun(t, st, "ses_o", "pol_o", 0) // another shadow policy

	deny := store.ShadowKey{ToolName: "Bash", Verdict: "allow", RuleID: "git", ShadowVerdict: "deny", ShadowRuleID: "no-git"}
	broken := store.ShadowKey{ToolName: "Bash", Verdict: "allow", ShadowError: true}
	h := heads["ses_1"]
	var err error
	h, err = append1(t, st, h, store.HeadChange{}, shadowOp(t, st, "ses_1", deny, "call_1", 2, time.Minute))
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, shadowOp(t, st, "ses_1", deny, "call_2", 3, 2*time.Minute), shadowOp(t, st, "ses_1", broken, "call_2", 3, 2*time.Minute))
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, shadowOp(t, st, "ses_1", deny, "call_3", 4, 3*time.Minute))
	must(t, err)
	_, err = append1(t, st, heads["ses_o"], store.HeadChange{}, shadowOp(t, st, "ses_o", deny, "call_o", 2, time.Minute))
	must(t, err)

	listed, runs := listAllShadowRuns(t, st, "pol_s")
	if !slices.Equal(listed, newest) {
		t.Errorf("listed %v, want %v (newest first, only pol_s's)", listed, newest)
	}
	checkShadowRunDifferences(t, runs["ses_1"], deny, broken)
	if len(runs["ses_0"].Differences) != 0 {
		t.Errorf("ses_0 has differences %+v", runs["ses_0"].Differences)
	}
	if page, err := st.ListShadowRuns(ctx, "pol_o", store.ListQuery{Limit: 10}); err != nil || len(page.Runs) != 1 || page.Runs[0].Differences[0].FirstToolCallID != "call_o" {
		t.Errorf("pol_o = %+v, %v", page, err)
	}
	if page, err := st.ListShadowRuns(ctx, "pol_none", store.ListQuery{Limit: 10}); err != nil || len(page.Runs) != 0 || page.Next != "" {
		t.Errorf("a policy no run shadows = %+v, %v", page, err)
	}
	bounded := store.ListQuery{Limit: 10, CreatedAfter: t0.Add(time.Second), CreatedBefore: t0.Add(3 * time.Second)}
	if page, _ := st.ListShadowRuns(ctx, "pol_s", bounded); fmt.Sprint(shadowIDs(page.Runs)) != "[ses_3 ses_2 ses_1]" {
		t.Errorf("created within [1s, 3s] = %v", shadowIDs(page.Runs))
	}
	if _, err := st.ListShadowRuns(ctx, "pol_s", store.ListQuery{Limit: store.MaxPage + 1}); err == nil {
		t.Error("a page over MaxPage was accepted")
	}
}

// listAllShadowRuns pages through pol's shadow runs two at a time, and
// returns their ids in order and the runs by id.
func listAllShadowRuns(t *testing.T, st *store.Store, pol string) ([]string, map[string]store.ShadowRun) {
	t.Helper()
	ctx := context.Background()
	var listed []string
	runs := map[string]store.ShadowRun{}
	q := store.ListQuery{Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("the listing does not end: %v", listed)
		}
		page, err := st.ListShadowRuns(ctx, pol, q)
		must(t, err)
		if len(page.Runs) > q.Limit {
			t.Fatalf("page of %d, limit %d", len(page.Runs), q.Limit)
		}
		for _, r := range page.Runs {
			listed = append(listed, r.RunID)
			runs[r.RunID] = r
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return listed, runs
}

// checkShadowRunDifferences: r holds the deny difference, counted three
// times from call_1 on, and the shadow's error once.
func checkShadowRunDifferences(t *testing.T, r store.ShadowRun, deny, broken store.ShadowKey) {
	t.Helper()
	if len(r.Differences) != 2 || r.Cut {
		t.Fatalf("ses_1 differences = %+v (cut %v), want 2", r.Differences, r.Cut)
	}
	var d, e store.ShadowDifference
	for _, x := range r.Differences {
		if x.ShadowError {
			e = x
		} else {
			d = x
		}
	}
	if d.ShadowKey != deny || d.Count != 3 || d.FirstToolCallID != "call_1" || d.FirstSeq != 2 || d.FirstAt != at(time.Minute) || d.LatestAt != at(3*time.Minute) {
		t.Errorf("the deny difference = %+v; want 3, first call_1 at seq 2, latest at 3 min", d)
	}
	if e.ShadowKey != broken || e.Count != 1 || e.FirstToolCallID != "call_2" || e.RuleID != "" || e.ShadowVerdict != "" {
		t.Errorf("the error difference = %+v", e)
	}
}

func shadowIDs(rs []store.ShadowRun) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.RunID)
	}
	return out
}

// TestShadowDifferencesCut: a run with more kinds of difference than
// MaxShadowDifferences is read up to that many and marked Cut.
func TestShadowDifferencesCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testenv.Store(t) // pages of DynamoDB's own size: 1001 items in pages of 2 would be slow
	h := newShadowRun(t, st, "ses_many", "pol_s", 0)
	n := store.MaxShadowDifferences + 1
	for i := 0; i < n; {
		var ops []store.Op
		for ; i < n && len(ops) < 90; i++ {
			ops = append(ops, shadowOp(t, st, "ses_many", store.ShadowKey{ToolName: "t" + strconv.Itoa(i), Verdict: "allow", ShadowVerdict: "deny"}, "c", 2, 0))
		}
		var err error
		h, err = append1(t, st, h, store.HeadChange{}, ops...)
		must(t, err)
	}
	page, err := st.ListShadowRuns(ctx, "pol_s", store.ListQuery{Limit: 1})
	must(t, err)
	if len(page.Runs) != 1 || !page.Runs[0].Cut || len(page.Runs[0].Differences) != store.MaxShadowDifferences {
		t.Fatalf("run = %d differences, cut %v; want %d, cut", len(page.Runs[0].Differences), page.Runs[0].Cut, store.MaxShadowDifferences)
	}
}

// TestGetRunPolicy reads only the enforced policy a run froze.
func TestGetRunPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	newShadowRun(t, st, "ses_1", "pol_s", 0)
	p, err := st.GetRunPolicy(ctx, "ses_1")
	if err != nil || p.PolicyID != "pol_1" || p.Digest != "sha256:p" || p.Document != `{"name":"p"}` {
		t.Errorf("policy = %+v, %v; want the enforced one, not the shadow", p, err)
	}
	_, err = st.GetRunPolicy(ctx, "ses_none")
	wantErr(t, "a missing run", err, store.ErrNotFound)
}

// TestEachOpenReservation visits every open reservation created before the
// bound, across shards and pages, and stops at visit's error.
func TestEachOpenReservation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	var want []string
	for i := range 6 {
		id := fmt.Sprintf("ses_%d", i)
		h := newRun(t, st, id, 0)
		for j := range 2 {
			d := time.Duration(i*2+j) * time.Second
			op, err := st.PutReservation(store.Reservation{ID: fmt.Sprintf("res_%d_%d", i, j), RunID: id, RequestID: fmt.Sprintf("req%d", j), Amount: 10, CreatedAt: at(d)})
			must(t, err)
			h, err = append1(t, st, h, store.HeadChange{Reserved: 10}, op)
			must(t, err)
			if d < 9*time.Second {
				want = append(want, fmt.Sprintf("res_%d_%d", i, j))
			}
		}
	}
	var seen []string
	must(t, st.EachOpenReservation(ctx, at(9*time.Second), func(r store.Reservation) error {
		seen = append(seen, r.ID)
		if r.Status != store.ReservationOpen {
			t.Errorf("visited %s in status %s", r.ID, r.Status)
		}
		return nil
	}))
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Errorf("visited %v, want %v (open, created before 9 s)", seen, want)
	}
	seen = nil
	must(t, st.EachOpenReservation(ctx, "", func(r store.Reservation) error { seen = append(seen, r.ID); return nil }))
	if len(seen) != 0 {
		t.Errorf("before \"\" visited %v, want none", seen)
	}
	errStop := errors.New("stop")
	n := 0
	err := st.EachOpenReservation(ctx, at(time.Hour), func(store.Reservation) error {
		n++
		if n == 3 {
			return errStop
		}
		return nil
	})
	if err != errStop || n != 3 {
		t.Errorf("stopped walk = %v after %d, want the visit's own error after 3", err, n)
	}
	// visit may close what it is given; a closed reservation is not open.
	closed := map[string]bool{}
	must(t, st.EachOpenReservation(ctx, at(time.Hour), func(r store.Reservation) error {
		if r.RunID != "ses_0" {
			return nil
		}
		h, err := st.GetHead(ctx, "ses_0")
		if err != nil {
			return err
		}
		_, err = append1(t, st, h, store.HeadChange{Reserved: -10}, st.CloseReservation("ses_0", r.RequestID, store.ReservationSwept, 10, "swept", at(time.Hour)))
		closed[r.ID] = err == nil
		return err
	}))
	if len(closed) != 2 {
		t.Errorf("closed %v, want ses_0's two", closed)
	}
	for id := range closed {
		r, _ := st.GetReservation(ctx, "ses_0", "req"+id[len(id)-1:])
		if r.Status != store.ReservationSwept {
			t.Errorf("%s = %s after the walk closed it", id, r.Status)
		}
	}
}
