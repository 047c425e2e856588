package route

import (
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// FuzzParseList: whatever a caller sends as a listing's query, the answer
// is a refusal or a query within bounds whose cursor is a position (so it
// can only ever name an item key of the listing's own shape).
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"", "limit=5", "cursor=MjAyNi0wMS0wMVQwMDowMDowMFojc2VzX2E", "created_after=2026-01-01T00:00:00Z&created_before=2025-01-01T00:00:00Z", "limit=-1", "cursor=%00", "limit=101"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/v1/sessions", nil)
		r.URL.RawQuery = raw
		q, err := ParseList(r)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxListPage {
			t.Fatalf("limit %d accepted", q.Limit)
		}
		if q.Cursor != "" && !positionPattern().MatchString(q.Cursor) {
			t.Fatalf("cursor %q accepted", q.Cursor)
		}
		if !q.CreatedAfter.IsZero() && !q.CreatedBefore.IsZero() && q.CreatedBefore.Before(q.CreatedAfter) {
			t.Fatalf("inverted bounds accepted")
		}
	})
}

func TestParseListRefuses(t *testing.T) {
	for _, raw := range []string{"limit=0", "limit=x", "cursor=" + url.QueryEscape("not base64!"), "cursor=" + b64("2026-01-01T00:00:00Z#pol_a' OR 1"), "created_after=yesterday"} {
		r := httptest.NewRequest("GET", "/v1/x?"+raw, nil)
		if _, err := ParseList(r); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
	r := httptest.NewRequest("GET", "/v1/x?limit=7&cursor="+b64("2026-01-01T00:00:00.000000000Z#ses_abc")+"&created_after=2026-01-01T00:00:00Z", nil)
	q, err := ParseList(r)
	if err != nil || q.Limit != 7 || q.Cursor != "2026-01-01T00:00:00.000000000Z#ses_abc" || !q.CreatedAfter.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseList = %+v, %v", q, err)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
