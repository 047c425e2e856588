package connection

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Step-up authorization (MCP 2025-11-25 "Authorization", scope challenge
// handling): an upstream that refuses a call with 403 insufficient_scope
// (or 401) naming scopes the connection's authorization did not ask for
// has those scopes recorded on the connection, and the call is refused
// (binding) with a reason telling the owner to re-authorize. The next
// authorization asks for the union. The connection stays active at its
// generation meanwhile: calls the current grant allows keep working, and
// only the completed re-authorization moves the generation.

// ErrStepUp: the upstream asked for scopes the connection's authorization
// lacks; they are recorded on the connection (step_up_scopes), and its
// owner must re-authorize it.
var ErrStepUp = errors.New("connection: the upstream asks for more scopes; re-authorize the connection")

// maxStepUpScopes bounds a connection's recorded scopes: the scopes its
// authorization requested (at most maxScopes and offline_access) and what
// the upstream asked for beyond them.
const maxStepUpScopes = 2 * maxScopes

// maxStepUpTries bounds the compare-and-swap rounds of one recording; each
// round some contender wins.
const maxStepUpTries = 32

// requestedScopes is what the connection's last authorization asked for.
func requestedScopes(c store.Connection) []string {
	d, err := storedDiscovery(c)
	if err != nil {
		return nil
	}
	return d.Scopes
}

// recordedScopes is the connection's recorded step-up scopes; a stored
// value that is not a valid scope parameter counts as none.
func recordedScopes(c store.Connection) []string {
	if c.OAuth.StepUpScope == "" {
		return nil
	}
	scopes := strings.Split(c.OAuth.StepUpScope, " ")
	if len(scopes) > maxStepUpScopes || slices.ContainsFunc(scopes, func(s string) bool { return !broker.ValidScope(s) }) {
		return nil
	}
	return scopes
}

// pendingScopes is what the upstream asked for that the last authorization
// did not request: what the next one adds.
func pendingScopes(c store.Connection) []string {
	requested := requestedScopes(c)
	var out []string
	for _, s := range recordedScopes(c) {
		if !slices.Contains(requested, s) {
			out = append(out, s)
		}
	}
	return out
}

// unionScopes is every scope of the sets, once, in the order first seen.
func unionScopes(sets ...[]string) []string {
	var out []string
	for _, set := range sets {
		for _, s := range set {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// scopeChallenge handles an upstream's refusal err of a call on conn at
// generation gen: when its challenge names scopes (broker validated them)
// that the connection's last authorization did not ask for, they are
// recorded and ErrStepUp returned. nil means it is not a step-up (no
// challenge, or one asking only for scopes already requested: another
// authorization would ask for the same), and the refusal is handled as
// before. A 401 counts only once refreshed (refreshed): it most often
// means an expired token, which a refresh mends; a 401 that a fresh token
// gets too, naming more scopes, is a step-up.
func (s *Service) scopeChallenge(ctx context.Context, conn store.Connection, gen int, err error, refreshed bool) error {
	var ue *broker.UpstreamError
	if conn.CredentialType != CredentialOAuth || !errors.As(err, &ue) || len(ue.Scopes) == 0 {
		return nil
	}
	if !errors.Is(err, broker.ErrInsufficientScope) && !(refreshed && errors.Is(err, broker.ErrUnauthorized)) {
		return nil
	}
	return s.recordStepUp(ctx, conn.ID, gen, ue.Scopes)
}

// recordStepUp records asked on the connection, as the union of what its
// last authorization requested, what was recorded before and asked, with a
// compare-and-swap on what it read (concurrent challenges each add theirs).
func (s *Service) recordStepUp(ctx context.Context, id string, gen int, asked []string) error {
	for try := range maxStepUpTries {
		if try > 0 {
			// Lost a race with another challenge: back off a little, at
			// random, so contenders do not collide again in step.
			t := time.NewTimer(time.Duration(mrand.Int64N(int64(20 * time.Millisecond))))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		c, err := s.st.GetConnection(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return errAuthorizationLost
		}
		if err != nil {
			return err
		}
		if c.Status != store.ConnectionActive || c.Generation != gen {
			return errAuthorizationLost
		}
		requested, recorded := requestedScopes(c), recordedScopes(c)
		if !slices.ContainsFunc(asked, func(a string) bool { return !slices.Contains(requested, a) }) {
			return nil
		}
		if !slices.ContainsFunc(asked, func(a string) bool { return !slices.Contains(recorded, a) }) {
			return ErrStepUp // recorded already
		}
		union := unionScopes(requested, recorded, asked)
		if len(union) > maxStepUpScopes {
			s.log().WarnContext(ctx, "upstream asks for more scopes than a connection keeps; not recorded", "connection", id, "scopes", len(union))
			return nil
		}
		err = s.st.RecordStepUpScope(ctx, id, gen, c.OAuth.StepUpScope, strings.Join(union, " "), store.FormatTime(s.opts.Now()))
		if errors.Is(err, store.ErrConnectionChanged) {
			continue // another challenge, or the connection moved on: read again
		}
		if err != nil {
			return err
		}
		s.log().InfoContext(ctx, "upstream asks for more scopes; the connection needs re-authorization", "connection", id)
		return ErrStepUp
	}
	return fmt.Errorf("%w: its step-up scopes kept changing", ErrChanged)
}

// stepUpReason is the denial of a call the upstream refused for want of
// scopes. It names no scope (the upstream chose them; the connection shows
// them to those who may see it).
func stepUpReason(id string) string {
	return fmt.Sprintf("connection %s needs re-authorization with more scopes: its upstream refused the call for want of scopes its current grant lacks (insufficient_scope); the connection lists them as step_up_scopes. Its owner runs `fluidbox connections authorize %s` (calls the current grant allows keep working meanwhile); then start a new run", id, id)
}
