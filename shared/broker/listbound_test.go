package broker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// TestToolListBoundedAcrossPages: every page of a tools/list is under the
// bound on one response, but together they are over the bound on a whole
// list: the listing fails instead of holding all of it (a hundred pages of
// 8 MiB would be 800 MiB, several times a function's memory).
func TestToolListBoundedAcrossPages(t *testing.T) {
	t.Parallel()
	page := broker.MaxResponseBytes * 3 / 4
	n := broker.MaxToolListBytes/page + 1
	u := newUpstream(t, upstreamOpts{pageSize: 1, tools: func(s *mcp.Server) {
		for i := range n {
			rawTool(s, fmt.Sprintf("t%d", i), strings.Repeat("x", page), `{"type":"object"}`)
		}
	}})
	_, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred)
	if !errors.Is(err, broker.ErrInvalidResponse) {
		t.Fatalf("ListTools over %d pages of %d bytes = %v, want ErrInvalidResponse", n, page, err)
	}
	if got := u.listCalls.Load(); got > int64(n) {
		t.Errorf("tools/list requests = %d, want at most %d", got, n)
	}
	// A list under the bound, in the same pages, is read whole.
	small := newUpstream(t, upstreamOpts{pageSize: 1, tools: func(s *mcp.Server) {
		for i := range n {
			rawTool(s, fmt.Sprintf("t%d", i), strings.Repeat("x", 1<<10), `{"type":"object"}`)
		}
	}})
	if photo, err := broker.ListTools(t.Context(), loopback, small.srv.URL, goodCred); err != nil || len(photo.Tools) != n {
		t.Errorf("ListTools of %d small pages = %d tools, %v", n, len(photo.Tools), err)
	}
}

// TestResponseOverBoundIsInvalid: one response over MaxResponseBytes fails
// as an invalid response (the upstream's fault), not as a transport
// failure worth retrying; the SDK flattens the body's read error, so the
// broker notes the cut itself.
func TestResponseOverBoundIsInvalid(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{tools: func(s *mcp.Server) {
		rawTool(s, "huge", strings.Repeat("x", broker.MaxResponseBytes+1), `{"type":"object"}`)
	}})
	_, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred)
	if !errors.Is(err, broker.ErrInvalidResponse) {
		t.Fatalf("ListTools of a response over the bound = %v, want ErrInvalidResponse", err)
	}
}
