package modelproxy

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// SealID is the seal.Context connection id the model upstream's credential
// is sealed under; the generation is the upstream's own, bumped by every
// replacement, so a credential sealed for an older setting never opens.
const SealID = "model-upstream"

// Errors of the upstream setting.
var (
	// ErrNoUpstream: the operator has not configured a model upstream.
	ErrNoUpstream = errors.New("modelproxy: no model upstream configured")
	// ErrNoSealer: this process has no key service, so it can neither seal
	// nor open the upstream's credential.
	ErrNoSealer = errors.New("modelproxy: no key service configured")
	// ErrChanged: the upstream was replaced concurrently; try again.
	ErrChanged = errors.New("modelproxy: model upstream changed concurrently")
)

// InvalidError is a setting the operator must correct; Message names the
// field, never a credential.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return e.Message }

// Upstream is where model requests go and the operator's credential for it,
// in the clear. Only the proxy holds one, for the length of one request.
type Upstream struct {
	URL        string
	Credential seal.Credential
}

// UpstreamInfo describes the upstream without its credential.
type UpstreamInfo struct {
	URL            string `json:"url"`
	CredentialType string `json:"credential_type"`
	Generation     int    `json:"generation"`
	UpdatedAt      string `json:"updated_at"`
	UpdatedBy      string `json:"updated_by"`
}

// Upstreams keeps the model upstream, its credential sealed.
type Upstreams struct {
	st     *store.Store
	sealer seal.Sealer
	guard  *egress.Guard
	now    func() time.Time
}

// NewUpstreams returns the upstream setting over st. sealer may be nil in a
// process that has no key service: Set and Open then fail with ErrNoSealer.
// guard decides which addresses the upstream may be at (nil refuses every
// internal one); the proxy's default client dials through it.
func NewUpstreams(st *store.Store, sealer seal.Sealer, guard *egress.Guard, now func() time.Time) *Upstreams {
	if guard == nil {
		guard = egress.New(nil)
	}
	return &Upstreams{st: st, sealer: sealer, guard: guard, now: now}
}

// CheckURL validates an upstream base URL and returns it without a trailing
// slash. The operator's key travels to it, so it must be https, except to a
// loopback address (a local stand-in) where g allows loopback, and not to
// an address g refuses.
func CheckURL(g *egress.Guard, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		return "", &InvalidError{"url: must be an absolute http(s) URL"}
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", &InvalidError{"url: must not carry user info, a query or a fragment"}
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", &InvalidError{"url: must be an absolute http(s) URL"}
	}
	if err := g.CheckURL(u); err != nil {
		return "", &InvalidError{"url: " + strings.TrimPrefix(err.Error(), egress.ErrRefused.Error()+": ")}
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Set replaces the model upstream: the credential is sealed at once under
// the next generation and only the sealed form is stored.
func (u *Upstreams) Set(ctx context.Context, rawURL string, cred seal.Credential, by string) (UpstreamInfo, error) {
	if u.sealer == nil {
		return UpstreamInfo{}, ErrNoSealer
	}
	base, err := CheckURL(u.guard, rawURL)
	if err != nil {
		return UpstreamInfo{}, err
	}
	if err := cred.Validate(); err != nil {
		return UpstreamInfo{}, &InvalidError{"credential: " + err.Error()}
	}
	for range 3 {
		prev := 0
		cur, err := u.st.GetModelUpstream(ctx)
		switch {
		case err == nil:
			prev = cur.Generation
		case !errors.Is(err, store.ErrNotFound):
			return UpstreamInfo{}, err
		}
		m := store.ModelUpstream{URL: base, CredentialType: cred.Type, Generation: prev + 1,
			UpdatedAt: store.FormatTime(u.now()), UpdatedBy: by}
		m.Sealed, err = seal.SealCredential(ctx, u.sealer, cred, seal.Context{ConnectionID: SealID, Generation: m.Generation})
		if err != nil {
			return UpstreamInfo{}, fmt.Errorf("modelproxy: seal upstream credential: %w", err)
		}
		err = u.st.PutModelUpstream(ctx, m, prev)
		if errors.Is(err, store.ErrModelUpstreamChanged) {
			continue
		}
		if err != nil {
			return UpstreamInfo{}, err
		}
		return info(m), nil
	}
	return UpstreamInfo{}, ErrChanged
}

// Info reads the upstream setting without opening its credential.
func (u *Upstreams) Info(ctx context.Context) (UpstreamInfo, error) {
	m, err := u.st.GetModelUpstream(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return UpstreamInfo{}, ErrNoUpstream
	}
	if err != nil {
		return UpstreamInfo{}, err
	}
	return info(m), nil
}

// Open reads the upstream and opens its credential.
func (u *Upstreams) Open(ctx context.Context) (Upstream, error) {
	if u.sealer == nil {
		return Upstream{}, ErrNoSealer
	}
	m, err := u.st.GetModelUpstream(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return Upstream{}, ErrNoUpstream
	}
	if err != nil {
		return Upstream{}, err
	}
	cred, err := seal.OpenCredential(ctx, u.sealer, m.Sealed, seal.Context{ConnectionID: SealID, Generation: m.Generation})
	if err != nil {
		return Upstream{}, fmt.Errorf("modelproxy: open upstream credential: %w", err)
	}
	return Upstream{URL: m.URL, Credential: cred}, nil
}

func info(m store.ModelUpstream) UpstreamInfo {
	return UpstreamInfo{URL: m.URL, CredentialType: m.CredentialType, Generation: m.Generation, UpdatedAt: m.UpdatedAt, UpdatedBy: m.UpdatedBy}
}
