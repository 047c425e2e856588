package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// The conformance suite of the writes that move a call, driven by
// shared/call's transition table (the model is River's driver suite: a
// subtest per method and per starting state). For every write method and
// every state its item can stand at:
//   - table: the method is asked to move from that state, as a caller that
//     read it would ask; it succeeds exactly when the table has the move;
//   - condition: the method is asked to move from a state the table allows,
//     while the item stands at this one (a caller that read a stale or
//     wrong state); it succeeds exactly when this state is one the table
//     lets the move start from;
//   - race: for every state the move may start from, dozens of goroutines
//     make it on one item at once: exactly one wins.
//
// All of it runs through ddbchaos with its timing model (latency, a
// transaction's hold) and conflicts injected, so a write that only holds
// when writes are serial fails here.

// moveChaos is the chaos every subtest runs under.
var moveChaos = ddbchaos.Chaos{Conflict: 0.1, ItemConflict: 0.05, Latency: 4 * time.Millisecond, Hold: 3 * time.Millisecond, Seed: 26}

// item is which item a method writes.
type item int

const (
	callRecord item = iota
	approvalRow
)

// standing lists the states an item can stand at: every state the
// machine reaches, as that item stores it. An approval row stands only at
// the approval's states (absent before the gate files one).
func standing(it item) []call.State {
	all := []call.State{call.Requested, call.Allowed, call.Denied, call.Pending, call.ApprovedOnce,
		call.ApprovedSession, call.Rejected, call.Expired, call.Executing, call.Executed}
	if it == callRecord {
		return all
	}
	return slices.DeleteFunc(all, func(s call.State) bool {
		return s != call.Requested && !vocab.ApprovalStatus(s).Valid()
	})
}

// method is one write that moves a call: to, by whom, on which item, and
// how to make it from a believed state on the fixture.
type method struct {
	name  string
	to    call.State
	by    call.Actor
	item  item
	lost  []error // what a refused move fails with
	apply func(ctx context.Context, f *moveFixture, from call.State) error
	// starts, when set, narrows the table's states to the one this
	// method's write starts from (of the moves to refused, only the one
	// from executing writes).
	starts []call.State
}

// from is the states m starts from: the table's, narrowed by m.starts.
func (m method) from() []call.State {
	legal := call.From(m.to, m.by)
	if m.starts != nil {
		legal = slices.DeleteFunc(legal, func(s call.State) bool { return !slices.Contains(m.starts, s) })
	}
	return legal
}

// moveFixture is one call of one run, standing at a state.
type moveFixture struct {
	st      *store.Store
	run, id string
	// a is the call's approval as filed (zero when it has none).
	a store.Approval
	// claimedAt is the claim's time when the call is executing.
	claimedAt string
}

// nowAt is the instant every move is judged at: the fixture's approvals
// expire an hour after it for a decision, an hour before it for an expiry.
var nowAt = at(time.Minute)

func methods() []method {
	var out []method
	for _, to := range []vocab.Decision{vocab.Allow, vocab.Deny, vocab.Pending} {
		out = append(out, method{
			name: "RecordCall/" + string(to), to: call.State(to), by: call.Gate, item: callRecord,
			lost: []error{call.ErrRecorded, call.ErrIllegal},
			apply: func(ctx context.Context, f *moveFixture, from call.State) error {
				op, err := f.st.RecordCallOp(f.run, from, store.Call{ToolCallID: f.id, ToolName: "Bash", InputDigest: "sha256:i", Decision: to, DecidedAt: nowAt})
				if err != nil {
					return err
				}
				return f.st.WriteOps(ctx, op)
			},
		})
	}
	out = append(out, method{
		name: "RecordClaimedCall", to: call.Allowed, by: call.Gate, item: callRecord,
		lost: []error{call.ErrRecorded, call.ErrIllegal},
		apply: func(ctx context.Context, f *moveFixture, from call.State) error {
			op, err := f.st.RecordClaimedCallOp(f.run, from, store.Call{ToolCallID: f.id, ToolName: "mcp__team__search", InputDigest: "sha256:i", Decision: vocab.Allow, DecidedAt: nowAt}, nowAt)
			if err != nil {
				return err
			}
			return f.st.WriteOps(ctx, op)
		},
	}, method{
		name: "FileApproval", to: call.Pending, by: call.Gate, item: approvalRow,
		lost: []error{call.ErrRecorded, call.ErrIllegal},
		apply: func(ctx context.Context, f *moveFixture, from call.State) error {
			a := approvalOf(f.run, f.id)
			ops, err := f.st.FileApprovalOps(from, a)
			if err != nil {
				return err
			}
			return f.st.WriteOps(ctx, ops...)
		},
	})
	for _, to := range []vocab.ApprovalStatus{vocab.ApprovedOnce, vocab.ApprovedSession, vocab.ApprovalDenied, vocab.ApprovalExpired} {
		by := call.Decider
		if to == vocab.ApprovalExpired {
			by = call.Expiry
		}
		settle := func(f *moveFixture, from call.State) (store.Approval, store.Settlement) {
			a := f.a
			if a.ID == "" {
				a = approvalOf(f.run, f.id)
			}
			a.Status = vocab.ApprovalStatus(from)
			set := store.Settlement{To: to, By: "carol", At: nowAt}
			return a, set
		}
		out = append(out, method{
			name: "SettleApproval/" + string(to), to: call.State(to), by: by, item: approvalRow,
			lost: []error{call.ErrSettled, call.ErrIllegal},
			apply: func(ctx context.Context, f *moveFixture, from call.State) error {
				a, set := settle(f, from)
				op, err := f.st.SettleApprovalOp(a, set)
				if err != nil {
					return err
				}
				return f.st.WriteOps(ctx, op)
			},
		}, method{
			name: "SettleCall/" + string(to), to: call.State(to), by: by, item: callRecord,
			lost: []error{call.ErrSettled, call.ErrIllegal},
			apply: func(ctx context.Context, f *moveFixture, from call.State) error {
				a, set := settle(f, from)
				op, err := f.st.SettleCallOp(a, set, "approval", "settled")
				if err != nil {
					return err
				}
				return f.st.WriteOps(ctx, op)
			},
		})
	}
	out = append(out, method{
		name: "ClaimCall", to: call.Executing, by: call.Broker, item: callRecord,
		lost: []error{call.ErrExecuted, call.ErrNotAllowed, call.ErrNotRecorded, call.ErrIllegal},
		apply: func(ctx context.Context, f *moveFixture, from call.State) error {
			_, err := f.st.ClaimCall(ctx, f.run, f.id, from, nowAt)
			return err
		},
	}, method{
		name: "Executed", to: call.Executed, by: call.Broker, item: callRecord,
		lost: []error{call.ErrNotExecuting, call.ErrIllegal},
		apply: func(ctx context.Context, f *moveFixture, from call.State) error {
			op, err := f.st.ExecutedOp(f.run, f.id, from, store.Outcome{ResultDigest: "sha256:r", LatencyMS: 3})
			if err != nil {
				return err
			}
			return f.st.WriteOps(ctx, op)
		},
	}, method{
		name: "ReleaseClaim", to: call.Refused, by: call.Broker, item: callRecord, starts: []call.State{call.Executing},
		lost: []error{call.ErrNotExecuting, call.ErrIllegal},
		apply: func(ctx context.Context, f *moveFixture, from call.State) error {
			claimed := f.claimedAt
			if claimed == "" {
				claimed = nowAt
			}
			op, err := f.st.ReleaseClaimOp(f.run, f.id, from, claimed)
			if err != nil {
				return err
			}
			return f.st.WriteOps(ctx, op)
		},
	})
	return out
}

func approvalOf(run, id string) store.Approval {
	return store.Approval{ID: "apr_" + run + "_" + id, RunID: run, ToolCallID: id, ToolName: "Bash", Input: `{"command":"ls"}`,
		InputDigest: "sha256:i", ScopeKey: "Bash:ls", DefaultScope: "once", Status: vocab.ApprovalPending,
		RequestedAt: at(0), ExpiresAt: at(time.Hour)}
}

// stand makes the fixture's call stand at s, by the moves the machine
// takes to get there (the store's own methods, serially).
func stand(t *testing.T, f *moveFixture, s call.State, overdue bool) {
	t.Helper()
	ctx := context.Background()
	record := func(d vocab.Decision) {
		op, err := f.st.RecordCallOp(f.run, call.Requested, store.Call{ToolCallID: f.id, ToolName: "Bash", InputDigest: "sha256:i", Decision: d, DecidedAt: at(0)})
		must(t, err)
		ops := []store.Op{op}
		if d == vocab.Pending {
			f.a = approvalOf(f.run, f.id)
			if overdue && s == call.Pending || s == call.Expired {
				f.a.ExpiresAt = at(0) // overdue at nowAt
			}
			filed, err := f.st.FileApprovalOps(call.Requested, f.a)
			must(t, err)
			ops = append(ops, filed...)
		}
		must(t, f.st.WriteOps(ctx, ops...))
	}
	settle := func(to vocab.ApprovalStatus) {
		set := store.Settlement{To: to, By: "dave", At: nowAt}
		row, err := f.st.SettleApprovalOp(f.a, set)
		must(t, err)
		rec, err := f.st.SettleCallOp(f.a, set, "approval", "settled")
		must(t, err)
		must(t, f.st.WriteOps(ctx, row, rec))
		f.a.Status = to
	}
	switch s {
	case call.Requested:
	case call.Allowed, call.Denied, call.Pending:
		record(vocab.Decision(s))
	case call.ApprovedOnce, call.ApprovedSession, call.Rejected, call.Expired:
		record(vocab.Pending)
		settle(vocab.ApprovalStatus(s))
	case call.Executing, call.Executed:
		record(vocab.Allow)
		f.claimedAt = at(30 * time.Second)
		_, err := f.st.ClaimCall(ctx, f.run, f.id, call.Allowed, f.claimedAt)
		must(t, err)
		if s == call.Executed {
			op, err := f.st.ExecutedOp(f.run, f.id, call.Executing, store.Outcome{ResultDigest: "sha256:r"})
			must(t, err)
			must(t, f.st.WriteOps(ctx, op))
		}
	default:
		t.Fatalf("no fixture stands at %s", s)
	}
}

func newMoveStore(t *testing.T) *store.Store {
	t.Helper()
	st, db := testenv.StoreOn(t)
	db.Layer.SetChaos(moveChaos)
	return st
}

// TestMoves is the suite: every method, every starting state, table and
// condition, and a race from every state a method starts from.
func TestMoves(t *testing.T) {
	t.Parallel()
	st := newMoveStore(t)
	ctx := context.Background()
	n := 0
	for _, m := range methods() {
		fixture := func(t *testing.T, s call.State) *moveFixture {
			n++
			f := &moveFixture{st: st, run: fmt.Sprintf("ses_%d", n), id: "c1"}
			stand(t, f, s, m.to == call.Expired)
			return f
		}
		legal := m.from()
		if len(legal) == 0 {
			t.Fatalf("%s: the table has no move to %s by %s", m.name, m.to, m.by)
		}
		t.Run(m.name, func(t *testing.T) {
			for _, s := range standing(m.item) {
				t.Run(string(s), func(t *testing.T) {
					t.Run("table", func(t *testing.T) {
						f := fixture(t, s)
						err := m.apply(ctx, f, s)
						want := slices.Contains(legal, s)
						check(t, m, err, want)
						if !want && !errors.Is(err, call.ErrIllegal) {
							t.Errorf("%s from %s = %v, want the table's call.ErrIllegal", m.name, s, err)
						}
					})
					t.Run("condition", func(t *testing.T) {
						f := fixture(t, s)
						err := m.apply(ctx, f, legal[0])
						check(t, m, err, slices.Contains(legal, s))
					})
				})
			}
		})
	}
}

// check says whether err is what a move that should (or should not) hold
// answers.
func check(t *testing.T, m method, err error, want bool) {
	t.Helper()
	switch {
	case want && err != nil:
		t.Errorf("%s = %v, want it made", m.name, err)
	case !want && err == nil:
		t.Errorf("%s was made, want it refused", m.name)
	case !want && !slices.ContainsFunc(m.lost, func(e error) bool { return errors.Is(err, e) }):
		t.Errorf("%s = %v, want one of %v", m.name, err, m.lost)
	}
}

// TestMovesRace: dozens of goroutines make each move on one item from
// every state the table lets it start from; exactly one makes it, every
// other is refused (or gives up on contention), never both made.
func TestMovesRace(t *testing.T) {
	t.Parallel()
	st := newMoveStore(t)
	ctx := context.Background()
	const racers = 24
	n := 0
	for _, m := range methods() {
		for _, s := range m.from() {
			n++
			f := &moveFixture{st: st, run: fmt.Sprintf("ses_r%d", n), id: "c1"}
			t.Run(m.name+"/"+string(s), func(t *testing.T) {
				stand(t, f, s, m.to == call.Expired)
				won := 0
				errs := make(chan error, racers)
				for range racers {
					go func() { errs <- m.apply(ctx, f, s) }()
				}
				for range racers {
					err := <-errs
					switch {
					case err == nil:
						won++
					case errors.Is(err, store.ErrUnavailable):
						// Gave up on contention: nothing written.
					case !slices.ContainsFunc(m.lost, func(e error) bool { return errors.Is(err, e) }):
						t.Errorf("%s: %v", m.name, err)
					}
				}
				if won != 1 {
					t.Errorf("%s from %s: %d of %d racers made it, want exactly 1", m.name, s, won, racers)
				}
			})
		}
	}
}

// TestBrokeredAndGrants: the writes that go with the moves. tool.brokered
// is marked once and only on an executed call (its outcome stored, as
// brokers before ExecutedOp stored it, without the mark); a session grant
// is put and revoked, a second revoke refused.
func TestBrokeredAndGrants(t *testing.T) {
	t.Parallel()
	st := newMoveStore(t)
	ctx := context.Background()
	// An outcome stored by ExecutedOp is marked already.
	for _, s := range []call.State{call.Requested, call.Allowed, call.Executing, call.Executed} {
		f := &moveFixture{st: st, run: "ses_b" + string(s), id: "c1"}
		stand(t, f, s, false)
		op, err := st.BrokeredOp(f.run, f.id)
		must(t, err)
		wantErr(t, "BrokeredOp at "+string(s), st.WriteOps(ctx, op), call.ErrBrokeredRecorded)
	}
	f := &moveFixture{st: st, run: "ses_bexecuted", id: "c1"}
	stored, err := st.Put(store.CallKey(f.run, f.id), store.Call{ToolCallID: f.id, ToolName: "mcp__team__search", InputDigest: "sha256:i",
		Decision: vocab.Allow, DecidedAt: at(0), ExecutedAt: at(time.Second), ResultDigest: "sha256:r"})
	must(t, err)
	must(t, st.WriteOps(ctx, stored))
	op, err := st.BrokeredOp(f.run, f.id)
	must(t, err)
	must(t, st.WriteOps(ctx, op))
	wantErr(t, "second BrokeredOp", st.WriteOps(ctx, op), call.ErrBrokeredRecorded)
	if c, err := st.GetCall(ctx, f.run, f.id); err != nil || !c.Brokered {
		t.Errorf("record = %+v, %v; want brokered", c, err)
	}

	g := store.Grant{RuleID: "r1", ScopeKey: "Bash:git push", ApprovalID: "apr_1", GrantedBy: "carol", GrantedAt: nowAt}
	put, err := st.GrantOp("ses_g", g)
	must(t, err)
	must(t, st.WriteOps(ctx, put))
	if held, err := st.Grants(ctx, "ses_g"); err != nil || len(held) != 1 || held[0] != g {
		t.Fatalf("grants = %+v, %v", held, err)
	}
	must(t, st.WriteOps(ctx, st.RevokeGrantOp("ses_g", g)))
	wantErr(t, "second revoke", st.WriteOps(ctx, st.RevokeGrantOp("ses_g", g)), call.ErrNoGrant)
	if held, _ := st.Grants(ctx, "ses_g"); len(held) != 0 {
		t.Errorf("grants after the revoke = %+v", held)
	}
}

// TestRecordClaimedCallOnlyAllowed: only an allowed call is recorded
// claimed, and only at an instant.
func TestRecordClaimedCallOnlyAllowed(t *testing.T) {
	t.Parallel()
	st := newMoveStore(t)
	for _, d := range []vocab.Decision{vocab.Deny, vocab.Pending} {
		_, err := st.RecordClaimedCallOp("ses_1", call.Requested, store.Call{ToolCallID: "c1", ToolName: "mcp__team__search", Decision: d, DecidedAt: nowAt}, nowAt)
		wantErr(t, "RecordClaimedCallOp of "+string(d), err, call.ErrIllegal)
	}
	_, err := st.RecordClaimedCallOp("ses_1", call.Requested, store.Call{ToolCallID: "c1", ToolName: "mcp__team__search", Decision: vocab.Allow, DecidedAt: nowAt}, "")
	wantErr(t, "RecordClaimedCallOp without an instant", err, call.ErrIllegal)
}
