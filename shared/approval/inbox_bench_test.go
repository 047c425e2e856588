package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
)

// BenchmarkInbox reads one page of 50 of an inbox over 200 pending shared
// approvals (10 runs of 20) on minidyn, through the validating layer: an
// approver's page (filled from the first 50 rows) beside a member's, who
// may decide none of them and so examines all 200 before the page ends
// empty (the bound, 20 rows per approval asked for, would stop it at
// 1,000).
func BenchmarkInbox(b *testing.B) {
	ctx := context.Background()
	st := testenv.Store(b)
	clock := calltest.NewClock()
	led := ledger.New(st, clock.Now)
	approvals := approval.NewService(led, clock.Now)
	perm := permission.NewService(led, approvals, approval.Lazy{}, nil, clock.Now)
	runs := run.NewService(led, clock.Now)
	in, _ := json.Marshal(map[string]string{"command": "git push origin main"})
	limit := 1.0
	pol := calltest.PutPolicy(b, st, policyText, clock.Now())
	for r := 0; r < 10; r++ {
		req := run.CreateRequest{PolicyID: pol, Capabilities: []string{"claude-code"}}
		req.Budget = &struct {
			LimitUSD *float64 `json:"limit_usd"`
		}{LimitUSD: &limit}
		v, err := runs.Create(ctx, operator, req)
		if err != nil {
			b.Fatal(err)
		}
		for c := 0; c < 20; c++ {
			clock.Advance(time.Millisecond) // distinct request times
			ans, err := perm.Decide(ctx, v.ID, permission.Request{ToolCallID: fmt.Sprintf("c%d", c), ToolName: "Bash", Input: in}, 0)
			if err != nil || ans.ApprovalID == "" {
				b.Fatalf("ask = %+v, %v; want pending", ans, err)
			}
		}
	}
	for _, c := range []struct {
		name string
		who  auth.Principal
		want int
	}{
		{"approver", auth.Principal{Kind: auth.KindUser, Subject: "april", Roles: []string{auth.RoleApprover}}, 50},
		{"member", auth.Principal{Kind: auth.KindUser, Subject: "mel", Roles: []string{auth.RoleMember}}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				page, err := approvals.Inbox(ctx, c.who, "", "", 50)
				if err != nil || len(page.Approvals) != c.want {
					b.Fatalf("Inbox = %d approvals, %v; want %d", len(page.Approvals), err, c.want)
				}
			}
		})
	}
}
