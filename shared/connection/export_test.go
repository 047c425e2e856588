package connection

import (
	"context"
	"time"

	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// ClassOf exposes classOf to the tests.
var ClassOf = classOf

// Credential exposes the broker's credential for a connection (refreshing
// an OAuth token that is due) to the tests.
func Credential(s *Service, ctx context.Context, c store.Connection, gen int) (seal.Credential, error) {
	return s.credential(ctx, c, gen, false)
}

// RecordStepUp exposes the recording of an upstream's scope challenge to
// the tests.
func RecordStepUp(s *Service, ctx context.Context, id string, gen int, asked []string) error {
	return s.recordStepUp(ctx, id, gen, asked)
}

// ScopeChallenge exposes the handling of an upstream's refusal to the
// tests.
func ScopeChallenge(s *Service, ctx context.Context, c store.Connection, err error, refreshed bool) error {
	return s.scopeChallenge(ctx, c, c.Generation, err, refreshed)
}

// RefreshMargin exposes how long before expiry tokens issued at issued and
// expiring at expiry are refreshed.
func RefreshMargin(issued, expiry time.Time) time.Duration {
	return refreshMargin(tokenSet{IssuedAt: issued, Expiry: expiry})
}
