package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestMemberFirstSeenInEachRole: a person's first request may reach any
// function that authenticates people; each must be able to record the
// member within its IAM role (template.yaml), where approvals and broker
// may put items only inside a transaction. Racing first requests record
// the member once.
func TestMemberFirstSeenInEachRole(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	for _, fn := range []string{"ApprovalsFunction", "BrokerFunction", "ControlFunction"} {
		ctx := roles.As(context.Background(), fn)
		sub := "sub-" + fn
		must(t, st.PutMember(ctx, store.Member{Sub: sub, Status: store.MemberActive, Roles: []string{"approver"}, FirstSeen: at(0), LastSeen: at(0)}))
		wantErr(t, fn+": second PutMember", st.PutMember(ctx, store.Member{Sub: sub, Status: store.MemberActive}), store.ErrMemberExists)
		must(t, st.TouchMember(ctx, sub, []string{"approver"}, "a@example.com", at(time.Minute)))
		if m, err := st.GetMember(ctx, sub); err != nil || m.Status != store.MemberActive || m.LastSeen != at(time.Minute) {
			t.Errorf("%s: member = %+v, %v", fn, m, err)
		}
	}

	ctx := roles.As(context.Background(), "ApprovalsFunction")
	won := wins(t, 32, store.ErrMemberExists, func(i int) error {
		return st.PutMember(ctx, store.Member{Sub: "racer", Status: store.MemberActive, FirstSeen: at(time.Duration(i)), LastSeen: at(0)})
	})
	if won != 1 {
		t.Errorf("%d first requests recorded the member, want 1", won)
	}
}
