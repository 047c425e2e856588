package route

import (
	"errors"
	"net/http"
	"strings"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/store"
)

// CheckLaunch checks a launch credential against runID's launch. Nothing
// is cached: the credential is good for one request. A spent credential
// still authenticates (it is the run's), so that the token route can
// refuse its reuse and record it; it authorizes nothing else.
func (k *SessionKeys) CheckLaunch(r *http.Request, tok, runID string) KeyCheck {
	if runID == "" || !strings.HasPrefix(tok, auth.LaunchCredentialPrefix) {
		return KeyRefused
	}
	l, err := k.st.GetLaunch(r.Context(), runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return KeyRefused
	case err != nil:
		k.log.ErrorContext(r.Context(), "authenticate launch", "run", runID, "err", err)
		return KeyUnavailable
	case !auth.TokenMatches(tok, l.CredentialHash):
		return KeyRefused
	}
	return KeyOK
}
