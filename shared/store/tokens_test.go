package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// oauthConnection stores an OAuth connection in status at generation gen,
// holding the sealed tokens sealed.
func oauthConnection(t *testing.T, st *store.Store, id, status string, gen int, sealed []byte) {
	t.Helper()
	must(t, st.PutConnection(context.Background(), store.Connection{ID: id, Name: "n-" + id, URL: "https://mcp.example.test", Kind: store.ConnectionShared,
		Status: status, Generation: gen, Sealed: sealed, CredentialType: "oauth", CreatedAt: at(0)}))
}

// TestAuthorizeConnection: a compare-and-swap on the generation, from
// active or authorization_required, never from revoked; it moves the
// generation, the tokens, the discovery and the expiry together.
func TestAuthorizeConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	oauthConnection(t, st, "con_req", store.ConnectionAuthorizationRequired, 1, nil)
	c, err := st.AuthorizeConnection(ctx, "con_req", 1, []byte{7}, `{"issuer":"i"}`, at(time.Hour), at(time.Minute))
	if err != nil || c.Generation != 2 || c.Status != store.ConnectionActive || string(c.Sealed) != "\x07" ||
		c.OAuth.Discovery != `{"issuer":"i"}` || c.OAuth.TokenExpiresAt != at(time.Hour) || c.UpdatedAt != at(time.Minute) {
		t.Fatalf("authorize from authorization_required = %+v, %v", c, err)
	}
	if got, _ := st.GetConnection(ctx, "con_req"); got.Generation != 2 || got.Status != store.ConnectionActive {
		t.Errorf("stored after authorize = generation %d %s", got.Generation, got.Status)
	}
	// From active, at the generation now stored.
	c, err = st.AuthorizeConnection(ctx, "con_req", 2, []byte{8}, "{}", at(2*time.Hour), at(2*time.Minute))
	if err != nil || c.Generation != 3 || string(c.Sealed) != "\x08" {
		t.Errorf("re-authorize from active = %+v, %v", c, err)
	}
	_, err = st.AuthorizeConnection(ctx, "con_req", 2, []byte{9}, "{}", at(0), at(0))
	wantErr(t, "authorize on a stale generation", err, store.ErrConnectionChanged)
	if got, _ := st.GetConnection(ctx, "con_req"); got.Generation != 3 || string(got.Sealed) != "\x08" {
		t.Errorf("a stale authorize changed the connection: generation %d, sealed %v", got.Generation, got.Sealed)
	}

	oauthConnection(t, st, "con_rev", store.ConnectionActive, 1, []byte{1})
	if _, err := st.RevokeConnection(ctx, "con_rev", "admin", at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, err = st.AuthorizeConnection(ctx, "con_rev", 1, []byte{2}, "{}", at(0), at(0))
	wantErr(t, "authorize a revoked connection", err, store.ErrConnectionChanged)
	if got, _ := st.GetConnection(ctx, "con_rev"); got.Status != store.ConnectionRevoked || got.Generation != 1 {
		t.Errorf("a revoked connection was authorized: %s, generation %d", got.Status, got.Generation)
	}
	_, err = st.AuthorizeConnection(ctx, "con_none", 0, []byte{2}, "{}", at(0), at(0))
	wantErr(t, "authorize a missing connection", err, store.ErrConnectionChanged)
	if _, err := st.GetConnection(ctx, "con_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("authorizing a missing connection created it: %v", err)
	}

	// Concurrent callbacks of one generation: exactly one lands.
	oauthConnection(t, st, "con_race", store.ConnectionAuthorizationRequired, 5, nil)
	won := wins(t, 32, store.ErrConnectionChanged, func(i int) error {
		_, err := st.AuthorizeConnection(ctx, "con_race", 5, []byte{byte(i)}, "{}", at(time.Hour), at(time.Minute))
		return err
	})
	if got, _ := st.GetConnection(ctx, "con_race"); won != 1 || got.Generation != 6 {
		t.Errorf("%d authorizations of generation 5 landed (generation now %d), want 1 (6)", won, got.Generation)
	}
}

// TestStoreRefreshedTokens: a compare-and-swap on the sealed tokens the
// refresh started from, at the generation, on an active connection; the
// generation stays.
func TestStoreRefreshedTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	oauthConnection(t, st, "con_a", store.ConnectionActive, 2, []byte("old"))
	must(t, st.StoreRefreshedTokens(ctx, "con_a", 2, []byte("old"), []byte("new"), at(time.Hour), at(time.Minute)))
	c, err := st.GetConnection(ctx, "con_a")
	if err != nil || string(c.Sealed) != "new" || c.Generation != 2 || c.OAuth.TokenExpiresAt != at(time.Hour) || c.UpdatedAt != at(time.Minute) {
		t.Fatalf("after refresh = %+v, %v", c, err)
	}
	wantErr(t, "refresh from tokens replaced since", st.StoreRefreshedTokens(ctx, "con_a", 2, []byte("old"), []byte("other"), at(0), at(0)), store.ErrConnectionChanged)
	wantErr(t, "refresh at another generation", st.StoreRefreshedTokens(ctx, "con_a", 1, []byte("new"), []byte("other"), at(0), at(0)), store.ErrConnectionChanged)
	wantErr(t, "refresh of a missing connection", st.StoreRefreshedTokens(ctx, "con_none", 1, []byte("x"), []byte("y"), at(0), at(0)), store.ErrConnectionChanged)
	if c, _ := st.GetConnection(ctx, "con_a"); string(c.Sealed) != "new" {
		t.Errorf("a refused refresh stored %q", c.Sealed)
	}
	oauthConnection(t, st, "con_req", store.ConnectionAuthorizationRequired, 1, []byte("old"))
	wantErr(t, "refresh of a connection needing authorization", st.StoreRefreshedTokens(ctx, "con_req", 1, []byte("old"), []byte("new"), at(0), at(0)), store.ErrConnectionChanged)

	// Refreshes racing from the same tokens: exactly one is stored.
	oauthConnection(t, st, "con_race", store.ConnectionActive, 1, []byte("t0"))
	won := wins(t, 32, store.ErrConnectionChanged, func(i int) error {
		return st.StoreRefreshedTokens(ctx, "con_race", 1, []byte("t0"), []byte(fmt.Sprintf("t%d", i+1)), at(time.Hour), at(time.Minute))
	})
	if won != 1 {
		t.Errorf("%d refreshes from the same tokens were stored, want 1", won)
	}
}

// TestRequireAuthorization: only an active connection still holding the
// tokens whose grant was refused, at its generation, moves to
// authorization_required; the generation stays, and the next
// authorization starts from it.
func TestRequireAuthorization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	oauthConnection(t, st, "con_a", store.ConnectionActive, 3, []byte("old"))
	wantErr(t, "from tokens replaced since", st.RequireAuthorization(ctx, "con_a", 3, []byte("other"), at(0)), store.ErrConnectionChanged)
	wantErr(t, "at another generation", st.RequireAuthorization(ctx, "con_a", 2, []byte("old"), at(0)), store.ErrConnectionChanged)
	if c, _ := st.GetConnection(ctx, "con_a"); c.Status != store.ConnectionActive {
		t.Fatalf("a refused move changed the status to %s", c.Status)
	}
	must(t, st.RequireAuthorization(ctx, "con_a", 3, []byte("old"), at(time.Minute)))
	c, err := st.GetConnection(ctx, "con_a")
	if err != nil || c.Status != store.ConnectionAuthorizationRequired || c.Generation != 3 || c.UpdatedAt != at(time.Minute) {
		t.Fatalf("after require = %+v, %v", c, err)
	}
	wantErr(t, "a second move", st.RequireAuthorization(ctx, "con_a", 3, []byte("old"), at(0)), store.ErrConnectionChanged)
	wantErr(t, "a refresh after the move", st.StoreRefreshedTokens(ctx, "con_a", 3, []byte("old"), []byte("new"), at(0), at(0)), store.ErrConnectionChanged)
	if c, err := st.AuthorizeConnection(ctx, "con_a", 3, []byte("fresh"), "{}", at(time.Hour), at(2*time.Minute)); err != nil || c.Generation != 4 || c.Status != store.ConnectionActive {
		t.Errorf("authorize after require = %+v, %v", c, err)
	}
	wantErr(t, "a missing connection", st.RequireAuthorization(ctx, "con_none", 1, []byte("x"), at(0)), store.ErrConnectionChanged)
	oauthConnection(t, st, "con_rev", store.ConnectionActive, 1, []byte("old"))
	if _, err := st.RevokeConnection(ctx, "con_rev", "admin", at(0)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a revoked connection", st.RequireAuthorization(ctx, "con_rev", 1, []byte("old"), at(0)), store.ErrConnectionChanged)
	if c, _ := st.GetConnection(ctx, "con_rev"); c.Status != store.ConnectionRevoked {
		t.Errorf("a revoked connection moved to %s", c.Status)
	}

	// A refresh and a refusal racing from the same tokens: one of them.
	oauthConnection(t, st, "con_race", store.ConnectionActive, 1, []byte("t0"))
	won := wins(t, 32, store.ErrConnectionChanged, func(i int) error {
		var err error
		if i%2 == 0 {
			err = st.RequireAuthorization(ctx, "con_race", 1, []byte("t0"), at(time.Minute))
		} else {
			err = st.StoreRefreshedTokens(ctx, "con_race", 1, []byte("t0"), []byte("t1"), at(time.Hour), at(time.Minute))
		}
		return err
	})
	if won != 1 {
		t.Errorf("%d of the racing refresh and refusal landed, want 1", won)
	}
}
