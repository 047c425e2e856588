package route

import (
	"net/http"
	"strconv"
	"time"

	"github.com/fluidbox/fluidbox/shared/ids"
)

// RunID returns the path's run id ({id}), or a 404 if it cannot be one.
func RunID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !ids.Valid("ses_", id) {
		return "", NotFound("session " + id)
	}
	return id, nil
}

// WaitSeconds parses a wait_seconds parameter: whole seconds from 0 to
// limit; "" is no wait.
func WaitSeconds(v string, limit time.Duration) (time.Duration, *Error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || time.Duration(n)*time.Second > limit {
		return 0, Invalid("wait_seconds: must be an integer from 0 to %d", int(limit/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}
