package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestModelProxyOtherPathsAndMethods: only POST .../v1/messages reaches the
// proxy. Other Messages API paths (token counting, batches, files), other
// methods, and paths that reach v1/messages only after cleaning or
// decoding answer without forwarding anything, with any valid body and the
// run's own key.
func TestModelProxyOtherPathsAndMethods(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":1,"output_tokens":1}`, `{"type":"text","text":"never"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 5})
	base := p.url + "/v1/sessions/" + id + "/model"
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct{ method, path string }{
		{"POST", "/v1/messages/count_tokens"},
		{"POST", "/v1/messages/batches"},
		{"POST", "/v1/files"},
		{"POST", "/v1/models"},
		{"POST", "/v1/messages/"},
		{"POST", "/v1/x/../messages"},
		{"POST", "/v1%2Fmessages"},
		{"POST", "/v1/messages%2F"},
		{"POST", "//v1/messages"},
		{"GET", "/v1/messages"},
		{"PUT", "/v1/messages"},
		{"PATCH", "/v1/messages"},
		{"DELETE", "/v1/messages"},
	} {
		req, err := http.NewRequest(c.method, base+c.path, strings.NewReader(msgBody("")))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-api-key", tok)
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode == http.StatusOK {
			t.Errorf("%s %s = %d %s, want it not served", c.method, c.path, resp.StatusCode, b)
		}
	}
	if n := len(up.received()); n != 0 {
		t.Errorf("the upstream received %d requests", n)
	}
	if evs := p.budgetEvents(id); len(evs) != 0 {
		t.Errorf("money was booked: %v", evs)
	}
}
