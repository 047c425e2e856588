package call_test

import (
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/call"
)

func TestMoveFollowsTheTable(t *testing.T) {
	t.Parallel()
	for _, tr := range call.Transitions {
		if err := call.Move(tr.From, tr.To, tr.By); err != nil {
			t.Errorf("a row of the table is refused: %v", err)
		}
	}
	illegal := []struct {
		from, to call.State
		by       call.Actor
	}{
		{call.Denied, call.Executing, call.Broker},
		{call.Pending, call.Executing, call.Broker},
		{call.Rejected, call.Executing, call.Broker},
		{call.Expired, call.Executing, call.Broker},
		{call.Executing, call.Executing, call.Broker},
		{call.Executed, call.Executing, call.Broker},
		{call.Expired, call.ApprovedOnce, call.Decider},
		{call.Rejected, call.ApprovedSession, call.Decider},
		{call.ApprovedOnce, call.Rejected, call.Decider},
		{call.Pending, call.ApprovedOnce, call.Expiry}, // expiry only expires
		{call.Pending, call.Expired, call.Decider},     // a person never expires a call
		{call.Pending, call.ApprovedOnce, call.Gate},   // the gate never approves
		{call.Requested, call.Allowed, call.Broker},
		{call.Requested, call.Executing, call.Gate},
		{call.Denied, call.Refused, call.Broker},
		{call.Allowed, call.Denied, call.Gate},
		{"bogus", call.Allowed, call.Gate},
	}
	for _, c := range illegal {
		if err := call.Move(c.from, c.to, c.by); !errors.Is(err, call.ErrIllegal) {
			t.Errorf("Move(%s, %s, %s) = %v, want ErrIllegal", c.from, c.to, c.by, err)
		}
	}
}

func TestEveryStateIsReachable(t *testing.T) {
	t.Parallel()
	reached := map[call.State]bool{call.Requested: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range call.Transitions {
			if reached[tr.From] && !reached[tr.To] {
				reached[tr.To], changed = true, true
			}
		}
	}
	for _, s := range []call.State{call.Allowed, call.Denied, call.Pending, call.ApprovedOnce, call.ApprovedSession,
		call.Rejected, call.Expired, call.Executing, call.Executed, call.Refused} {
		if !reached[s] {
			t.Errorf("state %s cannot be reached from requested", s)
		}
	}
}

func TestSubjects(t *testing.T) {
	t.Parallel()
	for _, s := range []call.Subject{call.Operator, call.Dev, call.System(call.ExpiryRole), call.System("sweep"), call.Trigger("trg_1"), call.Trigger("")} {
		if !call.Reserved(string(s)) {
			t.Errorf("%q is built by fluidbox but not reserved", s)
		}
	}
	if call.System(call.ExpiryRole) != "system:expiry" || call.Trigger("trg_1") != "trigger:trg_1" || call.Operator != "admin" {
		t.Errorf("persisted subjects changed: %q %q %q", call.System(call.ExpiryRole), call.Trigger("trg_1"), call.Operator)
	}
	for _, sub := range []string{"alice", "administrator", "admin2", "system", "trigger", "Admin", "developer", "x:system:y"} {
		if call.Reserved(sub) {
			t.Errorf("%q is reserved; an identity provider may mint it", sub)
		}
	}
}
