package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func newRun(t testing.TB, st *store.Store, id string) {
	t.Helper()
	created, err := redact.New(redact.SessionCreated{SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	err = st.CreateRun(context.Background(), store.NewRun{
		Head:    store.Head{RunID: id, Status: vocab.Running, CreatedAt: time.Now().UTC().Format(time.RFC3339)},
		Policy:  store.PolicySnapshot{PolicyID: "pol_x", Version: 1, Document: "{}"},
		Created: created,
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
}

func requested(t testing.TB, id string) redact.Envelope {
	t.Helper()
	env, err := redact.New(redact.ToolRequested{ToolCallID: id, ToolName: "Bash"})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestConcurrentAppendsAreGapless: 64 writers x 10 events on one run give
// seqs exactly 1..641 (event 1 is session.created), each event once; and
// so do writers spread over four ledgers that only DynamoDB arbitrates.
func TestConcurrentAppendsAreGapless(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ instances, writers int }{{1, 64}, {4, 16}} {
		t.Run(fmt.Sprintf("instances=%d", c.instances), func(t *testing.T) {
			t.Parallel()
			testGapless(t, c.instances, c.writers)
		})
	}
}

// testGapless spreads the writers over several Ledgers, as over separate
// Lambda instances: between them only DynamoDB's condition decides.
func testGapless(t *testing.T, instances, writers int) {
	st := testenv.Store(t)
	newRun(t, st, "ses_gapless")
	ledgers := make([]*ledger.Ledger, instances)
	for i := range ledgers {
		ledgers[i] = ledger.New(st, time.Now)
	}
	const each = 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := ledgers[w%instances]
			for i := range each {
				env := requested(t, fmt.Sprintf("w%02d-%02d", w, i))
				_, err := l.Append(context.Background(), "ses_gapless", func(store.Head) (store.Batch, error) {
					return store.Batch{Events: []redact.Envelope{env}}, nil
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Append: %v", err)
	}

	l := ledger.New(st, time.Now)
	events, last, err := l.Read(context.Background(), "ses_gapless", 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(writers*each + 1)
	if last != total || int64(len(events)) != total {
		t.Fatalf("last_seq = %d, events = %d, want %d", last, len(events), total)
	}
	seen := map[string]bool{}
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("events[%d].Seq = %d, want %d", i, e.Seq, i+1)
		}
		if i == 0 {
			continue
		}
		var d struct {
			ToolCallID string `json:"tool_call_id"`
		}
		if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
			t.Fatal(err)
		}
		if seen[d.ToolCallID] {
			t.Fatalf("event %s appended twice", d.ToolCallID)
		}
		seen[d.ToolCallID] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("distinct events = %d, want %d", len(seen), writers*each)
	}

	// after=N returns exactly the tail.
	for _, after := range []int64{0, 1, 100, total - 2, total - 1, total, total + 50} {
		tail, _, err := l.Read(context.Background(), "ses_gapless", after, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := max(0, total-after)
		if int64(len(tail)) != want || (want > 0 && tail[0].Seq != after+1) {
			t.Errorf("Read(after=%d) = %d events, want %d starting at %d", after, len(tail), want, after+1)
		}
	}
}

func TestReadWaitsForNextEvent(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	newRun(t, st, "ses_wait")
	l := ledger.New(st, time.Now)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = l.Append(context.Background(), "ses_wait", func(store.Head) (store.Batch, error) {
			return store.Batch{Events: []redact.Envelope{requested(t, "late")}}, nil
		})
	}()
	events, last, err := l.Read(context.Background(), "ses_wait", 1, 10, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Seq != 2 || last != 2 {
		t.Fatalf("Read(after=1, wait) = %+v, last %d; want the one event at seq 2", events, last)
	}
}

func TestAppendRefusesInvalidEnvelope(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	newRun(t, st, "ses_zero")
	l := ledger.New(st, time.Now)
	_, err := l.Append(context.Background(), "ses_zero", func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{{}}}, nil
	})
	if err == nil {
		t.Fatal("Append(zero envelope) succeeded, want refusal")
	}
	events, _, _ := l.Read(context.Background(), "ses_zero", 0, 10, 0)
	if len(events) != 1 {
		t.Fatalf("events after refused append = %d, want 1", len(events))
	}
}
