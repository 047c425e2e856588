package route

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// Pages of the listings (GET /v1/sessions, /v1/policies, /v1/triggers).
const (
	DefaultListPage = 50
	MaxListPage     = store.MaxPage
)

// positionPattern is what a decoded cursor must be: a listed item's
// position (its creation time, '#', its id). Anything else is refused
// before it reaches a key condition. Its counted repetitions are costly to
// compile (about 0.25 ms), so it is compiled on first use, not in init.
var positionPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{1,20}Z#[a-z]{3}_[a-z0-9_-]{1,64}$`)
})

// ParseList reads a listing's limit, cursor, created_after and
// created_before (RFC 3339) query parameters.
func ParseList(r *http.Request) (store.ListQuery, error) {
	v := r.URL.Query()
	q := store.ListQuery{Limit: DefaultListPage}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxListPage {
			return q, Invalid("limit: must be an integer from 1 to %d", MaxListPage)
		}
		q.Limit = n
	}
	if c := v.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !positionPattern().Match(b) {
			return q, Invalid("cursor: must be a next_cursor from an earlier page of the same listing")
		}
		q.Cursor = string(b)
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"created_after", &q.CreatedAfter}, {"created_before", &q.CreatedBefore}} {
		if s := v.Get(p.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return q, Invalid("%s: must be an RFC 3339 time such as 2026-12-01T09:00:00Z", p.name)
			}
			*p.to = t
		}
	}
	if !q.CreatedAfter.IsZero() && !q.CreatedBefore.IsZero() && q.CreatedBefore.Before(q.CreatedAfter) {
		return q, Invalid("created_before: must not be before created_after")
	}
	return q, nil
}

// WithCursor adds a page's next_cursor to a listing's body, when there is
// a next page.
func WithCursor(body map[string]any, next string) map[string]any {
	if next != "" {
		body["next_cursor"] = Cursor(next)
	}
	return body
}

// Cursor is a listing position as a page's next_cursor ("" for none).
func Cursor(next string) string {
	if next == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(next))
}
