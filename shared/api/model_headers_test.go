package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// orgHeaders are what the real API sends beside a message: the operator's
// organization and its organization-wide rate-limit counts, none of which
// is the sandbox's business.
var orgHeaders = map[string]string{
	"Anthropic-Organization-Id":                  "org-7f3c-operator",
	"Anthropic-Ratelimit-Requests-Limit":         "4000",
	"Anthropic-Ratelimit-Requests-Remaining":     "3999",
	"Anthropic-Ratelimit-Requests-Reset":         "2026-12-02T01:30:00Z",
	"Anthropic-Ratelimit-Tokens-Remaining":       "1999000",
	"Anthropic-Ratelimit-Input-Tokens-Remaining": "1999000",
	"Anthropic-Ratelimit-Unified-Status":         "allowed",
	"Anthropic-Priority-Input-Tokens-Remaining":  "100000",
	"Anthropic-Something-New":                    "x",
	"Set-Cookie":                                 "_cfuvid=abc",
	"Cf-Ray":                                     "8f00",
}

// TestModelProxyResponseHeadersAllowlist: only the headers an Anthropic
// client reads about its own request (content type, request id, retry
// advice) reach the sandbox, on a message, a stream and an error answer;
// the anthropic-* family (organization id, organization-wide rate limits)
// never does. Failed on the old code, which passed every anthropic-* header.
func TestModelProxyResponseHeadersAllowlist(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, extra string
		status      int
		answer      func(w http.ResponseWriter)
		want        map[string]string
	}{
		{"message", "", 200, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}`)
		}, map[string]string{"Content-Type": "application/json", "Request-Id": "req_up_1"}},
		{"stream", `,"stream":true`, 200, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n"+
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		}, map[string]string{"Content-Type": "text/event-stream", "Request-Id": "req_up_1", "Cache-Control": "no-cache"}},
		{"rate limited", "", 429, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "7")
			w.Header().Set("Retry-After-Ms", "6500")
			w.Header().Set("X-Should-Retry", "true")
			w.WriteHeader(429)
			fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
		}, map[string]string{"Content-Type": "application/json", "Request-Id": "req_up_1", "Retry-After": "7", "Retry-After-Ms": "6500", "X-Should-Retry": "true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := newRecorder(t, func(w http.ResponseWriter, _ []byte) {
				for k, v := range orgHeaders {
					w.Header().Set(k, v)
				}
				w.Header().Set("Request-Id", "req_up_1")
				c.answer(w)
			})
			p := newProxyStack(t, up.srv.URL)
			id, tok := p.gateRun(p.policy(allowAll), runOpts{budget: 5})
			req, _ := http.NewRequest("POST", p.url+"/v1/sessions/"+id+"/model/v1/messages", strings.NewReader(msgBody(c.extra)))
			req.Header.Set("x-api-key", tok)
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			for k, v := range c.want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			for k := range resp.Header {
				if _, ok := c.want[k]; !ok && k != "Content-Length" && k != "Date" && k != "X-Accel-Buffering" {
					t.Errorf("header %s: %q reached the sandbox; only %v may", k, resp.Header[k], c.want)
				}
			}
		})
	}
}

const allowAll = `{"name":"all","default_verdict":"allow","rules":[]}`

// TestModelProxyServiceTier: the API's default service tier is "auto",
// which may run on Priority Tier capacity at a price fluidbox does not
// know. "auto" and every value but "standard_only" are refused with nothing
// forwarded; a request that names no tier is forwarded with
// "standard_only" imposed, so every forwarded request is priced at the
// rate it can be billed at. Failed on the old code, which forwarded "auto"
// and an absent tier priced at the standard rate.
func TestModelProxyServiceTier(t *testing.T) {
	t.Parallel()
	up := newRecorder(t, answerJSON("claude-haiku-4-5", `{"input_tokens":10,"output_tokens":2}`, `{"type":"text","text":"ok"}`))
	p := newProxyStack(t, up.srv.URL)
	id, tok := p.gateRun(p.policy(allowAll), runOpts{budget: 5})
	for _, tier := range []string{`"auto"`, `"priority"`, `"standard"`, `"batch"`, `"AUTO"`, `""`, `null`, `1`, `["standard_only"]`, `{"type":"standard_only"}`} {
		st, body := p.post(id, tok, msgBody(`,"service_tier":`+tier))
		if st != 400 || !strings.Contains(body, "service_tier") || !strings.Contains(body, `"invalid_request_error"`) {
			t.Errorf("service_tier %s = %d %s, want a 400 naming service_tier", tier, st, body)
		}
	}
	if n := len(up.received()); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	for _, c := range []struct{ extra, want string }{{"", "standard_only"}, {`,"service_tier":"standard_only"`, "standard_only"}} {
		if st, body := p.post(id, tok, msgBody(c.extra)); st != 200 {
			t.Fatalf("service_tier %q = %d %s", c.extra, st, body)
		}
		got := up.received()
		var fwd map[string]json.RawMessage
		if err := json.Unmarshal(got[len(got)-1], &fwd); err != nil {
			t.Fatal(err)
		}
		if string(fwd["service_tier"]) != `"`+c.want+`"` {
			t.Errorf("request %q forwarded with service_tier %s, want %q", c.extra, fwd["service_tier"], c.want)
		}
	}
}
