package call_test

import (
	"errors"
	"slices"
	"strings"
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

// TestFrom: From lists exactly the states the table moves from, which the
// store conditions each move's write on.
func TestFrom(t *testing.T) {
	t.Parallel()
	for _, tr := range call.Transitions {
		from := call.From(tr.To, tr.By)
		if !slices.Contains(from, tr.From) {
			t.Errorf("From(%s, %s) = %v, misses %s", tr.To, tr.By, from, tr.From)
		}
		for _, f := range from {
			if err := call.Move(f, tr.To, tr.By); err != nil {
				t.Errorf("From(%s, %s) lists %s: %v", tr.To, tr.By, f, err)
			}
		}
	}
	if from := call.From(call.Executing, call.Broker); strings.Join(states(from), " ") != "allow approved_once approved_session" {
		t.Errorf("From(executing, broker) = %v", from)
	}
	if from := call.From(call.Expired, call.Decider); len(from) != 0 {
		t.Errorf("From(expired, decider) = %v, want none: a person never expires a call", from)
	}
}

func states(ss []call.State) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
