package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// fileApproval appends a pending approval of run h for call toolCallID,
// requested at t0+d, and returns the head after.
func fileApproval(t *testing.T, st *store.Store, h store.Head, id, toolCallID string, d time.Duration) store.Head {
	t.Helper()
	a := store.Approval{ID: id, RunID: h.RunID, ToolCallID: toolCallID, ToolName: "Bash", Status: vocab.ApprovalPending, RequestedAt: at(d), ExpiresAt: at(time.Hour)}
	row, err := st.PutNew(store.ApprovalKey(h.RunID, toolCallID), store.PendingApproval{Approval: a, GSI1PK: store.PendingIndex, GSI1SK: store.ApprovalPosition(a)}, store.ErrExists)
	must(t, err)
	ref, err := st.PutNew(store.ApprovalRefKey(id), store.ApprovalRef{RunID: h.RunID, ToolCallID: toolCallID}, store.ErrExists)
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{Pending: 1}, row, ref)
	must(t, err)
	return h
}

// settle replaces a pending approval's row with its settled form, which
// is not in the pending index.
func settle(t *testing.T, st *store.Store, h store.Head, a store.Approval, status vocab.ApprovalStatus) store.Head {
	t.Helper()
	a.Status, a.DecidedBy, a.DecidedAt = status, "admin", at(time.Minute)
	row, err := st.Put(store.ApprovalKey(a.RunID, a.ToolCallID), a)
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{Pending: -1}, row)
	must(t, err)
	return h
}

func ids(as []store.Approval) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// TestPendingApprovals covers the reads of approvals: one by its call,
// the pending index in request order (visited, and listed after a
// position, both across pages), and one run's pending ones, consistently.
func TestPendingApprovals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	runs := map[string]store.Head{"ses_a": newRun(t, st, "ses_a", 0), "ses_b": newRun(t, st, "ses_b", 0)}
	// Request order interleaves the runs and is not the order of the call
	// ids, which is the order of a run's partition.
	order := []struct{ run, id, call string }{
		{"ses_a", "apr_1", "z1"}, {"ses_b", "apr_2", "c2"}, {"ses_a", "apr_3", "a3"},
		{"ses_b", "apr_4", "b4"}, {"ses_a", "apr_5", "m5"}, {"ses_a", "apr_6", "b6"},
	}
	for i, o := range order {
		runs[o.run] = fileApproval(t, st, runs[o.run], o.id, o.call, time.Duration(i)*time.Second)
	}

	a := checkGetApproval(t, st)
	t.Run("walk", func(t *testing.T) { walkPendingApprovals(t, st, runs) })
	t.Run("after a position", func(t *testing.T) { checkPendingAfter(t, st) })
	t.Run("one run's", func(t *testing.T) { checkRunPending(t, st, a) })
	// A run's list reads its partition consistently: an approval filed a
	// moment ago is in it.
	runs["ses_b"] = fileApproval(t, st, runs["ses_b"], "apr_7", "a7", 10*time.Second)
	if got, _ := st.RunPendingApprovals(ctx, "ses_b", "", 0); !slices.Equal(ids(got), []string{"apr_4", "apr_7"}) {
		t.Errorf("ses_b after a new approval = %v", ids(got))
	}
	// Many settled approvals between pending ones: a filter that keeps
	// few still reads the whole partition.
	h := newRun(t, st, "ses_c", 0)
	for i := range 7 {
		h = fileApproval(t, st, h, fmt.Sprintf("apr_c%d", i), fmt.Sprintf("c%d", i), time.Duration(20+i)*time.Second)
		if i != 6 {
			a, err := st.GetApproval(ctx, "ses_c", fmt.Sprintf("c%d", i))
			must(t, err)
			h = settle(t, st, h, a, "denied")
		}
	}
	if got, _ := st.RunPendingApprovals(ctx, "ses_c", "", 0); !slices.Equal(ids(got), []string{"apr_c6"}) {
		t.Errorf("ses_c = %v, want only the last, behind six settled", ids(got))
	}
}

// checkGetApproval reads an approval by its call, and none by another
// run's call or a missing run; it returns apr_3.
func checkGetApproval(t *testing.T, st *store.Store) store.Approval {
	t.Helper()
	ctx := context.Background()
	a, err := st.GetApproval(ctx, "ses_a", "a3")
	if err != nil || a.ID != "apr_3" || a.Status != vocab.ApprovalPending || a.RequestedAt != at(2*time.Second) {
		t.Errorf("get = %+v, %v", a, err)
	}
	_, err = st.GetApproval(ctx, "ses_a", "c2") // ses_b's call
	wantErr(t, "another run's call", err, store.ErrNotFound)
	_, err = st.GetApproval(ctx, "ses_none", "a3")
	wantErr(t, "a missing run", err, store.ErrNotFound)
	return a
}

// walkPendingApprovals: every pending approval is visited, oldest first,
// across index pages of two; visit's error stops the walk; a visit may
// settle what it is given (apr_2, of ses_b in runs).
func walkPendingApprovals(t *testing.T, st *store.Store, runs map[string]store.Head) {
	ctx := context.Background()
	// Every pending approval, oldest first, across index pages of two.
	var seen []string
	must(t, st.EachPendingApproval(ctx, func(a store.Approval) error { seen = append(seen, a.ID); return nil }))
	if want := []string{"apr_1", "apr_2", "apr_3", "apr_4", "apr_5", "apr_6"}; !slices.Equal(seen, want) {
		t.Errorf("visited %v, want %v", seen, want)
	}
	// visit's error stops the walk and comes back as is.
	errStop := errors.New("stop")
	seen = nil
	err := st.EachPendingApproval(ctx, func(a store.Approval) error {
		seen = append(seen, a.ID)
		if len(seen) == 3 {
			return errStop
		}
		return nil
	})
	if err != errStop || len(seen) != 3 {
		t.Errorf("stopped walk = %v after %v, want the visit's own error after 3", err, seen)
	}
	// visit may settle what it is given; the walk goes on past it.
	seen = nil
	must(t, st.EachPendingApproval(ctx, func(a store.Approval) error {
		seen = append(seen, a.ID)
		if a.ID == "apr_2" {
			runs["ses_b"] = settle(t, st, runs["ses_b"], a, "expired")
		}
		return nil
	}))
	if len(seen) != 6 {
		t.Errorf("a walk that settled apr_2 visited %v", seen)
	}
	if pend, _ := st.PendingApprovals(ctx, 0); slices.Contains(ids(pend), "apr_2") {
		t.Errorf("a settled approval is still pending: %v", ids(pend))
	}
}

// checkPendingAfter: the pending index listed after a position, with and
// without a limit, and followed position by position.
func checkPendingAfter(t *testing.T, st *store.Store) {
	ctx := context.Background()
	cases := []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, []string{"apr_1", "apr_3", "apr_4", "apr_5", "apr_6"}},
		{"", 2, []string{"apr_1", "apr_3"}},
		{at(2*time.Second) + "#apr_3", 0, []string{"apr_4", "apr_5", "apr_6"}},
		{at(2*time.Second) + "#apr_3", 2, []string{"apr_4", "apr_5"}},
		{at(5*time.Second) + "#apr_6", 0, []string{}},
	}
	for _, c := range cases {
		got, err := st.PendingApprovalsAfter(ctx, c.after, c.limit)
		if err != nil || !slices.Equal(ids(got), c.want) {
			t.Errorf("after %q, limit %d = %v, %v; want %v", c.after, c.limit, ids(got), err, c.want)
		}
	}
	// Following positions page by page sees each once.
	var paged []string
	for after := ""; ; {
		page, err := st.PendingApprovalsAfter(ctx, after, 2)
		must(t, err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, ids(page)...)
		after = store.ApprovalPosition(page[len(page)-1])
	}
	if want := []string{"apr_1", "apr_3", "apr_4", "apr_5", "apr_6"}; !slices.Equal(paged, want) {
		t.Errorf("paged = %v, want %v", paged, want)
	}
}

// checkRunPending: one run's pending approvals, after a (apr_3) or not.
func checkRunPending(t *testing.T, st *store.Store, a store.Approval) {
	ctx := context.Background()
	runCases := []struct {
		run, after string
		limit      int
		want       []string
	}{
		{"ses_a", "", 0, []string{"apr_1", "apr_3", "apr_5", "apr_6"}},
		{"ses_a", "", 3, []string{"apr_1", "apr_3", "apr_5"}},
		{"ses_a", store.ApprovalPosition(a), 0, []string{"apr_5", "apr_6"}},
		{"ses_a", store.ApprovalPosition(a), 1, []string{"apr_5"}},
		{"ses_b", "", 0, []string{"apr_4"}}, // apr_2 is settled
		{"ses_none", "", 0, []string{}},
	}
	for _, c := range runCases {
		got, err := st.RunPendingApprovals(ctx, c.run, c.after, c.limit)
		if err != nil || !slices.Equal(ids(got), c.want) {
			t.Errorf("%s after %q, limit %d = %v, %v; want %v", c.run, c.after, c.limit, ids(got), err, c.want)
		}
	}
}
