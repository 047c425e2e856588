// The store's conformance suite: every method of Store against minidyn's
// DynamoDB server through the real SDK, for its conditions, its sentinels,
// its paging and its chunking. Every test has its own table (and server).
package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) string { return store.FormatTime(t0.Add(d)) }

// pageSize is the page every Query of a smallPages store is cut to, so
// that every listing crosses page boundaries (DynamoDB cuts at 1 MB, which
// a test table would otherwise never reach).
const pageSize = 2

// smallPages sets Limit on every Query the store sends without one; the
// store must then follow LastEvaluatedKey to see everything.
func smallPages(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("smallPages",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if q, ok := in.Parameters.(*dynamodb.QueryInput); ok && q.Limit == nil {
					q.Limit = aws.Int32(pageSize)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return testenv.Store(t, smallPages)
}

func envelope(t *testing.T, ev redact.Event) redact.Envelope {
	t.Helper()
	e, err := redact.New(ev)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// newRun creates run id with n sandbox tools and returns its head.
func newRun(t *testing.T, st *store.Store, id string, n int) store.Head {
	t.Helper()
	r := store.NewRun{
		Head:    store.Head{RunID: id, Status: vocab.Running, Invoker: "admin", TrustTier: "trusted", CreatedAt: at(0), BudgetLimit: 1000, BudgetAvailable: 1000},
		Policy:  store.PolicySnapshot{PolicyID: "pol_1", Version: 1, Digest: "sha256:p", Document: `{"name":"p"}`},
		Created: envelope(t, redact.SessionCreated{SessionID: id, TrustTier: "trusted", Trigger: "api", Invoker: "admin"}),
	}
	for i := range n {
		r.Tools = append(r.Tools, store.Tool{Name: fmt.Sprintf("tool_%04d", i), Class: "read", Schema: "{}", Callable: true})
	}
	if err := st.CreateRun(context.Background(), r); err != nil {
		t.Fatalf("create run %s: %v", id, err)
	}
	h, err := st.GetHead(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// append1 appends one event (and ops) to a run on the head seen.
func append1(t *testing.T, st *store.Store, seen store.Head, change store.HeadChange, ops ...store.Op) (store.Head, error) {
	t.Helper()
	return st.Append(context.Background(), seen, at(time.Second), store.Batch{
		Events: []redact.Envelope{envelope(t, redact.SessionEnded{EndedBy: "admin"})},
		Head:   change,
		Ops:    ops,
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s = %v, want %v", what, err, want)
	}
}

// wins runs try(0..n-1) from n goroutines at once and returns how many
// succeeded; a failure other than lost (the compare-and-swap's sentinel)
// fails the test.
func wins(t *testing.T, n int, lost error, try func(i int) error) int {
	t.Helper()
	var won atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			switch err := try(i); {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, lost):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return int(won.Load())
}
