package connection

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func TestExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := calltest.NewFixture(t)
	if _, err := f.Record(t, f.Asked(t, "ok", map[string]any{}), calltest.Allow, permission.Pin{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Record(t, f.Asked(t, "no", map[string]any{}), gate.Decision{Outcome: policy.VerdictDeny, Source: gate.SourcePolicy}, permission.Pin{}); err != nil {
		t.Fatal(err)
	}
	claimID := func(id string) (store.Call, error) {
		return claim(ctx, f.St, f.Run, id, vocab.Allow, calltest.T0, time.Second)
	}
	out := outcome{ResultDigest: redact.DigestBytes([]byte(`{"content":[]}`)), LatencyMS: 42}
	record := func(build func(*store.Store, string, redact.ToolBrokered) (store.Batch, error)) error {
		b, err := build(f.St, f.Run, redact.ToolBrokered{ToolCallID: "ok", ToolName: "Bash", ConnectionID: "con_1", LatencyMS: out.LatencyMS, ResultDigest: out.ResultDigest})
		if err != nil {
			return err
		}
		_, err = f.Led.Append(ctx, f.Run, func(store.Head) (store.Batch, error) { return b, nil })
		return err
	}

	if _, err := claimID("no"); !errors.Is(err, call.ErrNotAllowed) {
		t.Errorf("claim a denied call = %v, want ErrNotAllowed", err)
	}
	if _, err := claimID("missing"); !errors.Is(err, call.ErrNotRecorded) {
		t.Errorf("claim an unrecorded call = %v, want ErrNotRecorded", err)
	}
	if err := record(executed); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("outcome before the claim = %v, want ErrNotExecuting", err)
	}

	// Too little time left: nothing is claimed.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := claim(short, f.St, f.Run, "ok", vocab.Allow, calltest.T0, time.Second); !errors.Is(err, ErrNoTime) {
		t.Errorf("claim without time = %v, want ErrNoTime", err)
	}
	if c, _ := f.St.GetCall(ctx, f.Run, "ok"); c.ExecutedAt != "" {
		t.Errorf("claimed without time: %+v", c)
	}

	// Dozens of concurrent claims: exactly one runs the tool.
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev, err := claimID("ok")
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, call.ErrExecuted):
				if prev.ExecutedAt == "" {
					t.Errorf("ErrExecuted without the claim's record: %+v", prev)
				}
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d claims won, want 1", won.Load())
	}

	// The outcome and tool.brokered, in one append, once.
	if err := record(executed); err != nil {
		t.Fatal(err)
	}
	if err := record(executed); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("second outcome = %v, want ErrNotExecuting", err)
	}
	prev, err := claimID("ok")
	if got, known := outcomeOf(prev); !errors.Is(err, call.ErrExecuted) || !known || got != out {
		t.Errorf("claim after the outcome = %v, outcome %+v %v, want ErrExecuted with %+v", err, got, known, out)
	}
	// A completion of the record (for an outcome stored on its own) finds
	// tool.brokered there.
	if err := record(brokered); !errors.Is(err, call.ErrBrokeredRecorded) {
		t.Errorf("tool.brokered after the outcome's = %v, want ErrBrokeredRecorded", err)
	}
	if c, _ := f.St.GetCall(ctx, f.Run, "ok"); !c.Brokered || c.ResultDigest != out.ResultDigest.String() || c.LatencyMS != 42 {
		t.Errorf("record = %+v", c)
	}
	if n := strings.Count(strings.Join(f.Events(t), " "), "tool.brokered"); n != 1 {
		t.Errorf("%d tool.brokered events, want 1", n)
	}
}

// TestUnclaim: a claimed execution the upstream refused at its door is
// released with its tool.decision deny, in one append; only that claim is
// released and only while no outcome is stored, and a released call is
// claimed again by exactly one of many.
func TestUnclaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := calltest.NewFixture(t)
	if _, err := f.Record(t, f.Asked(t, "up", map[string]any{}), calltest.Allow, permission.Pin{}); err != nil {
		t.Fatal(err)
	}
	t1 := calltest.T0.Add(time.Second)
	release := func(at time.Time) error {
		b, err := unclaim(f.St, f.Run, "up", "Bash", gate.SourceBinding, at)
		if err != nil {
			return err
		}
		_, err = f.Led.Append(ctx, f.Run, func(store.Head) (store.Batch, error) { return b, nil })
		return err
	}
	if err := release(calltest.T0); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("release before any claim = %v, want ErrNotExecuting", err)
	}
	if _, err := claim(ctx, f.St, f.Run, "up", vocab.Allow, calltest.T0, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := release(t1); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("release of another claim = %v, want ErrNotExecuting", err)
	}
	before := len(f.Events(t))
	if err := release(calltest.T0); err != nil {
		t.Fatal(err)
	}
	if evs := f.Events(t); len(evs) != before+1 || evs[len(evs)-1] != "tool.decision" {
		t.Errorf("events after the release = %v, want one more tool.decision", evs)
	}
	out := func() error {
		b, err := executed(f.St, f.Run, redact.ToolBrokered{ToolCallID: "up", ToolName: "Bash", ConnectionID: "con_1", ResultDigest: redact.DigestBytes([]byte(`{}`))})
		if err != nil {
			return err
		}
		_, err = f.Led.Append(ctx, f.Run, func(store.Head) (store.Batch, error) { return b, nil })
		return err
	}
	if err := out(); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("outcome of a released claim = %v, want ErrNotExecuting", err)
	}

	var won atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			_, err := claim(ctx, f.St, f.Run, "up", vocab.Allow, t1, time.Second)
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, call.ErrExecuted):
				t.Errorf("claim after the release: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d claims won after the release, want 1", won.Load())
	}
	if err := out(); err != nil {
		t.Fatal(err)
	}
	if err := release(t1); !errors.Is(err, call.ErrNotExecuting) {
		t.Errorf("release after the outcome = %v, want ErrNotExecuting", err)
	}
}

// TestClaimable: the decision claims the call in its own write only when
// the upstream was looked at, the checks before execution pass on what was
// read, and the deadline leaves the call its time; otherwise the call is
// claimed (or refused) after the decision, as before.
func TestClaimable(t *testing.T) {
	t.Parallel()
	const name = "mcp__team__search"
	b := &Broker{svc: &Service{opts: Options{CallTimeout: time.Second}}}
	frozen := &gate.Run{
		Tools:    map[string]*gate.Tool{name: {Name: name, ConnectionID: "con_1"}},
		Bindings: map[string]gate.Binding{"con_1": {ConnectionID: "con_1", Generation: 1, ToolSetDigest: "set1"}},
	}
	live := gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 1, ToolSetDigest: "set1", OwnerActive: true}
	fresh := func() *brokeredCall {
		return &brokeredCall{
			req: permission.Request{ToolCallID: "c1", ToolName: name},
			bt: permission.BrokeredTool{Name: name, UpstreamName: "search", ConnectionID: "con_1", ToolDigest: "t1",
				Binding: frozen.Bindings["con_1"], Frozen: frozen},
			live: live,
			up:   &upstream{looked: true, digest: "set1", tools: map[string]string{"search": "t1"}},
		}
	}
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cases := []struct {
		name   string
		ctx    context.Context
		change func(c *brokeredCall)
		want   bool
	}{
		{"checks pass", context.Background(), func(*brokeredCall) {}, true},
		{"not looked at", context.Background(), func(c *brokeredCall) { c.up.looked = false }, false},
		{"tool changed upstream", context.Background(), func(c *brokeredCall) { c.up.tools["search"] = "t2" }, false},
		{"tool set changed upstream", context.Background(), func(c *brokeredCall) { c.up.digest = "set2" }, false},
		{"binding stale", context.Background(), func(c *brokeredCall) { c.live.Generation = 2 }, false},
		{"no time for the call", short, func(*brokeredCall) {}, false},
	}
	for _, tc := range cases {
		c := fresh()
		tc.change(c)
		if got := b.claimable(tc.ctx, c); got != tc.want {
			t.Errorf("claimable, %s = %v, want %v", tc.name, got, tc.want)
		}
	}
}
