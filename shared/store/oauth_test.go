package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// TestRefreshLease: one holder at a time, across any number of
// contenders; a released or run-out lease can be taken again.
func TestRefreshLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	if err := st.AcquireRefreshLease(ctx, "con_a", "h1", 1000, 2000); err != nil {
		t.Fatal(err)
	}
	if err := st.AcquireRefreshLease(ctx, "con_a", "h2", 1500, 2500); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("second holder while held: %v, want ErrLeaseHeld", err)
	}
	if err := st.ReleaseRefreshLease(ctx, "con_a", "h2"); err != nil {
		t.Fatal(err)
	}
	if err := st.AcquireRefreshLease(ctx, "con_a", "h2", 1500, 2500); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("a non-holder's release freed the lease: %v", err)
	}
	if err := st.ReleaseRefreshLease(ctx, "con_a", "h1"); err != nil {
		t.Fatal(err)
	}
	if err := st.AcquireRefreshLease(ctx, "con_a", "h2", 1500, 2500); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := st.AcquireRefreshLease(ctx, "con_a", "h3", 2501, 3000); err != nil {
		t.Fatalf("after the holder's time ran out: %v", err)
	}

	won := wins(t, 24, store.ErrLeaseHeld, func(i int) error {
		return st.AcquireRefreshLease(ctx, "con_b", string(rune('a'+i)), 1000, 2000)
	})
	if won != 1 {
		t.Fatalf("%d holders at once, want 1", won)
	}
}

// TestOAuthStateSingleUse: a state is consumed once; concurrent consumers
// get it exactly once.
func TestOAuthStateSingleUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	if err := st.PutOAuthState(ctx, store.OAuthState{Digest: "d1", ConnectionID: "con_a", Subject: "alice", Generation: 1, Verifier: []byte{1}, ExpiresAt: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutOAuthState(ctx, store.OAuthState{Digest: "d1", ConnectionID: "con_b"}); err == nil {
		t.Fatal("a state digest was stored twice")
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := st.ConsumeOAuthState(ctx, "d1", "now")
			switch {
			case err == nil:
				if s.ConnectionID != "con_a" || s.Subject != "alice" {
					t.Errorf("consumed %+v", s)
				}
				got.Add(1)
			case !errors.Is(err, store.ErrNotFound):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got.Load() != 1 {
		t.Fatalf("consumed %d times, want 1", got.Load())
	}
	if _, err := st.ConsumeOAuthState(ctx, "never", "now"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown state: %v", err)
	}
}

// TestSetOAuthClientRevoked: a registration that lands after the
// connection was revoked (at the generation it read) stores nothing, so no
// client secret comes back to a revoked connection.
func TestSetOAuthClientRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	must(t, st.PutConnection(ctx, store.Connection{ID: "con_r", Name: "r", Status: store.ConnectionActive, Generation: 1, CreatedAt: at(0)}))
	must(t, st.SetOAuthClient(ctx, "con_r", 1, "client-1", []byte{1, 2}, "client_secret_post", "https://as.example", "https://fluidbox.example/v1/oauth/callback/k", at(time.Minute)))
	if c, err := st.GetConnection(ctx, "con_r"); err != nil || c.OAuth.ClientID != "client-1" || c.OAuth.ClientIssuer != "https://as.example" {
		t.Fatalf("client recorded = %+v, %v; want client-1 of https://as.example", c.OAuth, err)
	}
	if _, err := st.RevokeConnection(ctx, "con_r", "admin", at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "client of a revoked connection", st.SetOAuthClient(ctx, "con_r", 1, "client-2", []byte{3, 4}, "client_secret_post", "https://as.example", "https://fluidbox.example/v1/oauth/callback/k", at(3*time.Minute)), store.ErrConnectionChanged)
	c, err := st.GetConnection(ctx, "con_r")
	if err != nil {
		t.Fatal(err)
	}
	if c.OAuth.ClientID == "client-2" || string(c.OAuth.ClientSecret) == "\x03\x04" {
		t.Fatalf("a revoked connection took a new client: %q", c.OAuth.ClientID)
	}
}

// TestRecordStepUpScope: a compare-and-swap on the step-up scopes read, of
// an active connection at its generation; the generation and status stay.
func TestRecordStepUpScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	c := store.Connection{ID: "con_s", Name: "s", URL: "https://x", Kind: store.ConnectionShared, Owner: "op",
		Status: store.ConnectionActive, Generation: 2, CredentialType: "oauth", Sealed: []byte{1}, CreatedAt: "t0"}
	if err := st.PutConnection(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordStepUpScope(ctx, c.ID, 1, "", "a", "t1"); !errors.Is(err, store.ErrConnectionChanged) {
		t.Fatalf("at another generation: %v, want ErrConnectionChanged", err)
	}
	if err := st.RecordStepUpScope(ctx, c.ID, 2, "", "a b", "t1"); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordStepUpScope(ctx, c.ID, 2, "", "a c", "t2"); !errors.Is(err, store.ErrConnectionChanged) {
		t.Fatalf("from a stale read: %v, want ErrConnectionChanged", err)
	}
	if err := st.RecordStepUpScope(ctx, c.ID, 2, "a b", "a b c", "t2"); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetConnection(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.StepUpScope != "a b c" || got.Generation != 2 || got.Status != store.ConnectionActive {
		t.Fatalf("after the step-ups: %q generation %d %s", got.StepUpScope, got.Generation, got.Status)
	}
	if _, err := st.RevokeConnection(ctx, c.ID, "op", "t3"); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordStepUpScope(ctx, c.ID, 2, "a b c", "a b c d", "t4"); !errors.Is(err, store.ErrConnectionChanged) {
		t.Fatalf("on a revoked connection: %v, want ErrConnectionChanged", err)
	}
}

// TestStartOAuthStateOnce: the authorize redirect records its nonce once,
// whichever of many concurrent openings wins; a consumed or unknown state
// does not start.
func TestStartOAuthStateOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, d := range []string{"s1", "s2"} {
		if err := st.PutOAuthState(ctx, store.OAuthState{Digest: d, ConnectionID: "con_a", Subject: "alice", Generation: 1, Verifier: []byte{1}, AuthorizeURL: "https://as.example/a?x=1", ExpiresAt: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	won := wins(t, 32, store.ErrNotFound, func(i int) error {
		_, err := st.StartOAuthState(ctx, "s1", string(rune('a'+i)), "t1")
		return err
	})
	if won != 1 {
		t.Fatalf("%d openings recorded a nonce, want 1", won)
	}
	got, err := st.ConsumeOAuthState(ctx, "s1", "t2")
	if err != nil || got.NonceDigest == "" || got.StartedAt != "t1" || got.AuthorizeURL != "https://as.example/a?x=1" {
		t.Fatalf("consumed %+v %v, want the winner's nonce", got, err)
	}
	if _, err := st.ConsumeOAuthState(ctx, "s2", "t2"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"s2", "never"} {
		if _, err := st.StartOAuthState(ctx, d, "n", "t3"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("start %s: %v, want ErrNotFound", d, err)
		}
	}
}
