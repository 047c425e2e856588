// Package elicitationtest files input requests (shared/elicitation) the way the
// broker does, for the tests of what shows and answers them (the Slack
// bot, the CLI, the approvals page).
package elicitationtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
)

// File files a pending URL-mode input request on r.RunID in one ledger
// append (elicitation.File), as the broker does, and returns it. Fields r
// leaves empty get the broker's: a fresh id, tool mcp__docs__connect on
// connection con_docs, the link as url without its query, requested now
// and expiring after elicitation.DefaultTTL.
func File(t testing.TB, led *ledger.Ledger, r store.InputRequest) store.InputRequest {
	t.Helper()
	now := time.Now()
	if r.ID == "" {
		r.ID = ids.New("inp_")
	}
	if r.ToolName == "" {
		r.ToolName = "mcp__docs__connect"
	}
	if r.ConnectionID == "" {
		r.ConnectionID = "con_docs"
	}
	if r.Link == "" {
		r.Link, _, _ = strings.Cut(r.URL, "?")
	}
	if r.RequestedAt == "" {
		r.RequestedAt = store.FormatTime(now)
	}
	if r.ExpiresAt == "" {
		r.ExpiresAt = store.FormatTime(now.Add(elicitation.DefaultTTL))
	}
	r.Mode = "url"
	ops, ev, err := elicitation.NewService(led, time.Now, nil).File(&r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.Append(context.Background(), r.RunID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: ops}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return r
}
