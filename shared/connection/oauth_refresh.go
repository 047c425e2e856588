package connection

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Refresh timing. An access token is refreshed a margin before it
// expires: a tenth of its lifetime, at most refreshSkew, so a token living
// a minute is not refreshed on every call and one living a day not hours
// early (refreshSkew when its lifetime is unknown). The lease outlives a
// refresh's own bound (oauth.DefaultTimeout) by far, so a live holder never
// loses it mid-refresh; a holder that died frees it when it runs out. A
// waiter gives up after leaseWait.
const (
	refreshSkew = time.Minute
	leaseTTL    = 30 * time.Second
	leaseWait   = 15 * time.Second
	leasePoll   = 50 * time.Millisecond
)

// refreshMargin is how long before its expiry ts is refreshed.
func refreshMargin(ts tokenSet) time.Duration {
	if ts.IssuedAt.IsZero() || !ts.Expiry.After(ts.IssuedAt) {
		return refreshSkew
	}
	return min(ts.Expiry.Sub(ts.IssuedAt)/10, refreshSkew)
}

// credential opens the credential to present upstream for generation gen of
// c. An OAuth connection's is its access token, refreshed first when it is
// within its refresh margin of expiring, or when force is set (the
// upstream refused it). Without a refresh token, the access token is
// presented until it really expires, and then (or when the upstream
// refuses it) the connection needs authorization. Before a refused token
// is refreshed, the upstream is asked which authorization server it names
// now: one that moved means a new client and a new authorization there,
// never this grant's tokens elsewhere. A connection whose grant is gone
// gives errAuthorizationLost.
func (s *Service) credential(ctx context.Context, c store.Connection, gen int, force bool) (seal.Credential, error) {
	if c.CredentialType != CredentialOAuth {
		cred, err := seal.OpenCredential(ctx, s.sealer, c.Sealed, seal.Context{ConnectionID: c.ID, Generation: gen})
		if err != nil {
			return seal.Credential{}, fmt.Errorf("connection: open credential of %s: %w", c.ID, err)
		}
		return cred, nil
	}
	if c.Status != store.ConnectionActive || c.Generation != gen || len(c.Sealed) == 0 {
		return seal.Credential{}, errAuthorizationLost
	}
	ts, err := s.openTokens(ctx, c.ID, gen, c.Sealed)
	if err != nil {
		return seal.Credential{}, err
	}
	now := s.opts.Now()
	if ts.RefreshToken == "" {
		if force || (!ts.Expiry.IsZero() && !now.Before(ts.Expiry)) {
			return seal.Credential{}, s.lose(ctx, c, gen, "the access token expired and the provider gave no refresh token")
		}
		return bearer(ts.AccessToken), nil
	}
	if !force && (ts.Expiry.IsZero() || now.Add(refreshMargin(ts)).Before(ts.Expiry)) {
		return bearer(ts.AccessToken), nil
	}
	if force {
		if err := s.checkAuthorizationServer(ctx, c, gen); err != nil {
			return seal.Credential{}, err
		}
	}
	if ts, err = s.refreshTokens(ctx, c.ID, gen, c.Sealed); err != nil {
		return seal.Credential{}, err
	}
	return bearer(ts.AccessToken), nil
}

// checkAuthorizationServer asks the upstream of c which authorization
// server it names now; when it is another than the one c was authorized at
// (MCP 2026-07-28: a server may move), c needs authorization (its next
// one registers a client there) and errAuthorizationLost is returned. A
// server that cannot be asked changes nothing: the refresh goes to the
// server the tokens came from, as before.
func (s *Service) checkAuthorizationServer(ctx context.Context, c store.Connection, gen int) error {
	d, err := storedDiscovery(c)
	if err != nil {
		return err
	}
	now, err := oauth.AuthorizationServer(ctx, s.opts.OAuthClient, c.URL)
	if err != nil || oauth.SameIssuer(now, d.Issuer) {
		return nil
	}
	return s.lose(ctx, c, gen, "the upstream names another authorization server; a new client is registered there at the next authorization")
}

// lose puts c (generation gen, its sealed tokens unchanged since read) in
// authorization_required, for the reason given (fixed words, for the log);
// its owner is told by the binding denial of the call, and by the
// connection's status.
func (s *Service) lose(ctx context.Context, c store.Connection, gen int, reason string) error {
	s.log().WarnContext(ctx, "oauth connection needs authorization", "connection", c.ID, "reason", reason)
	if err := s.st.RequireAuthorization(context.WithoutCancel(ctx), c.ID, gen, c.Sealed, store.FormatTime(s.opts.Now())); err != nil && !errors.Is(err, store.ErrConnectionChanged) {
		return err
	}
	s.tools.forget(c.ID)
	return errAuthorizationLost
}

func bearer(token string) seal.Credential {
	return seal.Credential{Type: seal.TypeBearer, Token: token}
}

// refreshTokens replaces the tokens sealed as stale with refreshed ones,
// single-flight across every instance: only the holder of the connection's
// lease redeems the refresh token, and it first reads the connection again,
// so a refresh token another holder already rotated is never sent. The
// others wait for the new tokens to land. A refresh refused for good puts
// the connection in authorization_required (errAuthorizationLost); the
// generation does not move on a refresh.
func (s *Service) refreshTokens(ctx context.Context, id string, gen int, stale []byte) (tokenSet, error) {
	holder := rand.Text()
	wctx, cancel := context.WithTimeout(ctx, leaseWait)
	defer cancel()
	for {
		now := s.opts.Now()
		err := s.st.AcquireRefreshLease(wctx, id, holder, now.UnixMilli(), now.Add(leaseTTL).UnixMilli())
		if err == nil {
			ts, err := s.refreshHeld(wctx, id, gen, stale)
			// Freed even if the refresh was cut short: its outcome is
			// either stored or nothing was redeemed.
			_ = s.st.ReleaseRefreshLease(context.WithoutCancel(ctx), id, holder)
			return ts, err
		}
		if !errors.Is(err, store.ErrLeaseHeld) {
			return tokenSet{}, err
		}
		// Someone else is refreshing: take their tokens once they land.
		c, err := s.st.GetConnection(wctx, id)
		if err != nil {
			return tokenSet{}, err
		}
		if c.Status != store.ConnectionActive || c.Generation != gen {
			return tokenSet{}, errAuthorizationLost
		}
		if !bytes.Equal(c.Sealed, stale) {
			return s.openTokens(ctx, id, gen, c.Sealed)
		}
		t := time.NewTimer(leasePoll)
		select {
		case <-wctx.Done():
			t.Stop()
			return tokenSet{}, fmt.Errorf("%w: waiting for another instance's token refresh: %w", ErrUpstreamUnavailable, wctx.Err())
		case <-t.C:
		}
	}
}

// refreshHeld refreshes under the lease.
func (s *Service) refreshHeld(ctx context.Context, id string, gen int, stale []byte) (tokenSet, error) {
	c, err := s.st.GetConnection(ctx, id)
	if err != nil {
		return tokenSet{}, err
	}
	if c.Status != store.ConnectionActive || c.Generation != gen || len(c.Sealed) == 0 {
		return tokenSet{}, errAuthorizationLost
	}
	if !bytes.Equal(c.Sealed, stale) {
		// Refreshed while this instance waited for the lease.
		return s.openTokens(ctx, id, gen, c.Sealed)
	}
	ts, err := s.openTokens(ctx, id, gen, c.Sealed)
	if err != nil {
		return tokenSet{}, err
	}
	var d oauth.Discovery
	if err := json.Unmarshal([]byte(c.OAuth.Discovery), &d); err != nil {
		return tokenSet{}, fmt.Errorf("connection: decode discovery of %s: %w", id, err)
	}
	if iss, err := clientIssuer(c); err != nil {
		return tokenSet{}, err
	} else if !oauth.SameIssuer(iss, d.Issuer) {
		// A client was registered at another server since these tokens
		// were granted (the upstream moved, and its owner started a new
		// authorization): that client and its secret are not sent to the
		// server the tokens came from, and these tokens refresh no more.
		return tokenSet{}, s.lose(ctx, c, gen, "the connection's client now belongs to another authorization server than its tokens")
	}
	client, err := s.client(ctx, c)
	if err != nil {
		return tokenSet{}, err
	}
	tok, err := oauth.Refresh(ctx, s.opts.OAuthClient, d, client, ts.RefreshToken)
	if errors.Is(err, oauth.ErrGrant) {
		s.log().WarnContext(ctx, "oauth refresh refused for good; the connection needs authorization", "connection", id, "err", err)
		if err := s.st.RequireAuthorization(context.WithoutCancel(ctx), id, gen, c.Sealed, store.FormatTime(s.opts.Now())); err != nil && !errors.Is(err, store.ErrConnectionChanged) {
			return tokenSet{}, err
		}
		s.tools.forget(id)
		return tokenSet{}, errAuthorizationLost
	}
	if err != nil {
		return tokenSet{}, fmt.Errorf("%w: %w", ErrUpstreamUnavailable, err)
	}
	sealed, expires, err := s.sealTokens(ctx, id, gen, tok)
	if err != nil {
		return tokenSet{}, err
	}
	// The refresh token was redeemed: its successor must land even if the
	// caller gave up, or the grant is lost with it.
	err = s.st.StoreRefreshedTokens(context.WithoutCancel(ctx), id, gen, c.Sealed, sealed, expires, store.FormatTime(s.opts.Now()))
	if errors.Is(err, store.ErrConnectionChanged) {
		return tokenSet{}, errAuthorizationLost
	}
	if err != nil {
		return tokenSet{}, err
	}
	return tokenSet{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}, nil
}
