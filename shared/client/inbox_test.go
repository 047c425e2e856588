package client_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// smallPages makes every GET /v1/approvals ask the real server for pages
// of two, so a handful of approvals spans several pages with real cursors;
// it counts the pages read. With replay set it also drops every cursor
// after the first, as a broken server that never moves on would.
func smallPages(pages *atomic.Int64, replay bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/approvals" {
				n := pages.Add(1)
				q := r.URL.Query()
				q.Set("limit", "2")
				if replay && n > 2 {
					q.Del("cursor")
				}
				r.URL.RawQuery = q.Encode()
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestApprovalsFollowsCursors: Approvals reads the whole inbox, page after
// page, oldest first, each approval once.
func TestApprovalsFollowsCursors(t *testing.T) {
	t.Parallel()
	var pages atomic.Int64
	s := newStack(t, smallPages(&pages, false))
	ses, runner := s.run(t)
	ctx := context.Background()
	var want []string
	for i := range 5 {
		ans, err := runner.Permission(ctx, ses, bash(fmt.Sprintf("c%d", i), fmt.Sprintf("rm f%d", i)), 0)
		if err != nil || ans.ApprovalID == "" {
			t.Fatalf("ask %d = %+v, %v; want pending", i, ans, err)
		}
		want = append(want, ans.ApprovalID)
	}
	list, err := s.admin.Approvals(ctx)
	if err != nil {
		t.Fatalf("Approvals: %v", err)
	}
	var got []string
	for _, a := range list {
		got = append(got, a.ID)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Approvals = %v, want %v", got, want)
	}
	if n := pages.Load(); n < 3 {
		t.Errorf("Approvals read %d pages of two for five approvals, want at least 3", n)
	}
}

// TestApprovalsRefusesARepeatedCursor: a server that hands back a cursor it
// gave before makes Approvals fail instead of reading forever.
func TestApprovalsRefusesARepeatedCursor(t *testing.T) {
	t.Parallel()
	var pages atomic.Int64
	s := newStack(t, smallPages(&pages, true))
	ses, runner := s.run(t)
	ctx := context.Background()
	for i := range 5 {
		if _, err := runner.Permission(ctx, ses, bash(fmt.Sprintf("c%d", i), fmt.Sprintf("rm f%d", i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := s.admin.Approvals(ctx); err == nil || !strings.Contains(err.Error(), "repeated a cursor") {
		t.Fatalf("Approvals against a server that repeats itself = %d approvals, %v; want a repeated-cursor error", len(list), err)
	}
	if n := pages.Load(); n > 10 {
		t.Errorf("Approvals read %d pages before giving up", n)
	}
}
