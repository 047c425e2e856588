package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// askIn is what the ask tool requests of its client.
type askIn struct {
	Mode   string         `json:"mode"`
	URL    string         `json:"url,omitempty"`
	Schema map[string]any `json:"schema,omitempty"`
}

// askCase is one request the ask tool is told to make.
type askCase struct {
	Mode   string
	URL    string
	Schema json.RawMessage
}

// addAsk registers ask, a tool that needs input before it answers: it
// returns input_required (the SDK's server turns that into an elicitation
// on the call's stream for a 2025-11-25 client), and once answered says
// which action it got.
func addAsk(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Needs input."},
		func(_ context.Context, req *mcp.CallToolRequest, in askIn) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "action " + r.Action}}}, nil, nil
			}
			p := &mcp.ElicitParams{Mode: in.Mode, Message: "Please confirm.", URL: in.URL, ElicitationID: "el-1"}
			if in.Schema != nil {
				p.RequestedSchema = in.Schema
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": p}, RequestState: "st-1"}, nil, nil
		})
}

// TestInputRequests: an upstream that asks for input mid-call, in either
// revision, gets an answer and finishes the call, and the broker keeps
// what a human may see: a link's scheme, host and path (never its query,
// which carries the server's state), or nothing. A link that is not http
// or https, or a form asking for a secret, is refused (decline); any other
// request is unanswered (cancel), since no human is reachable within the
// call. On the old code the call failed: the client took no elicitation.
func TestInputRequests(t *testing.T) {
	t.Parallel()
	name := `{"type":"object","properties":{"name":{"type":"string","title":"Your name"}}}`
	cases := []struct {
		name   string
		in     askCase
		action string
		want   broker.InputRequest
	}{
		{"https link", askCase{Mode: "url", URL: "https://auth.example.com/consent/start?state=QUERY-SECRET#frag"}, "cancel",
			broker.InputRequest{Mode: "url", Link: "https://auth.example.com/consent/start", URL: "https://auth.example.com/consent/start?state=QUERY-SECRET", Outcome: "unanswered"}},
		{"user info", askCase{Mode: "url", URL: "http://user:USERINFO-SECRET@auth.example.com/c"}, "cancel",
			broker.InputRequest{Mode: "url", Link: "http://auth.example.com/c", URL: "http://auth.example.com/c", Outcome: "unanswered"}},
		// A link holding the credential the broker sent is not shown.
		{"credential", askCase{Mode: "url", URL: "https://auth.example.com/c?t=" + canary}, "cancel",
			broker.InputRequest{Mode: "url", Link: "https://auth.example.com/c", Outcome: "unanswered"}},
		{"javascript", askCase{Mode: "url", URL: "javascript:alert(1)"}, "decline", broker.InputRequest{Mode: "url", Outcome: "refused"}},
		{"custom scheme", askCase{Mode: "url", URL: "vscode://open?x=QUERY-SECRET"}, "decline", broker.InputRequest{Mode: "url", Outcome: "refused"}},
		{"relative", askCase{Mode: "url", URL: "/consent"}, "decline", broker.InputRequest{Mode: "url", Outcome: "refused"}},
		{"form", askCase{Mode: "form", Schema: json.RawMessage(name)}, "cancel", broker.InputRequest{Mode: "form", Outcome: "unanswered"}},
		{"write only", askCase{Mode: "form", Schema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","writeOnly":true}}}`)}, "decline",
			broker.InputRequest{Mode: "form", Outcome: "refused"}},
		{"api key", askCase{Mode: "form", Schema: json.RawMessage(`{"type":"object","properties":{"github_api_key":{"type":"string"}}}`)}, "decline",
			broker.InputRequest{Mode: "form", Outcome: "refused"}},
		{"token title", askCase{Mode: "form", Schema: json.RawMessage(`{"type":"object","properties":{"v":{"type":"string","title":"Access token"}}}`)}, "decline",
			broker.InputRequest{Mode: "form", Outcome: "refused"}},
	}
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		u := newUpstream(t, upstreamOpts{versions: []string{rev}, stateless: rev == "2026-07-28", tools: addAsk})
		for _, tc := range cases {
			s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
			if err != nil {
				t.Fatal(err)
			}
			args := map[string]any{"mode": tc.in.Mode, "url": tc.in.URL}
			if tc.in.Schema != nil {
				var schema map[string]any
				if err := json.Unmarshal(tc.in.Schema, &schema); err != nil {
					t.Fatal(err)
				}
				args["schema"] = schema
			}
			res, err := s.CallTool(t.Context(), "ask", args)
			asked := s.InputRequests()
			s.Close()
			if err != nil {
				t.Errorf("%s %s: CallTool = %v, want the upstream's answer", rev, tc.name, err)
				continue
			}
			if got := string(res.Content); got != `[{"type":"text","text":"action `+tc.action+`"}]` {
				t.Errorf("%s %s: result %s, want action %s", rev, tc.name, got, tc.action)
			}
			if diff := cmp.Diff([]broker.InputRequest{tc.want}, asked); diff != "" {
				t.Errorf("%s %s: input requests (-want +got):\n%s", rev, tc.name, diff)
			}
			// The sandbox gets the encoded result: no input request in it.
			if b, _ := json.Marshal(res); strings.Contains(string(b), "example.com") || strings.Contains(string(b), "SECRET") {
				t.Errorf("%s %s: encoded result %s carries the input request", rev, tc.name, b)
			}
			if b, _ := json.Marshal(asked); strings.Contains(string(b), "SECRET") || strings.Contains(string(b), canary) {
				t.Errorf("%s %s: input requests %s encode a query or user info", rev, tc.name, b)
			}
		}
	}
}

// TestInputRequestsWithoutEnd: an upstream that asks again at every answer
// does not hold the call: the SDK gives up after a bounded number of rounds
// and the call fails, and what it asked is still there for the ledger,
// bounded.
func TestInputRequestsWithoutEnd(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		u := newUpstream(t, upstreamOpts{versions: []string{rev}, stateless: rev == "2026-07-28", tools: func(s *mcp.Server) {
			mcp.AddTool(s, &mcp.Tool{Name: "nag", Description: "Asks forever."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
						"a": &mcp.ElicitParams{Mode: "url", Message: "again", URL: "https://nag.example.com/a?n=QUERY-SECRET", ElicitationID: "x"},
					}}, nil, nil
				})
		}})
		s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.CallTool(t.Context(), "nag", nil)
		asked := s.InputRequests()
		s.Close()
		if err == nil {
			t.Errorf("%s: CallTool(nag) succeeded, want a failure once the SDK gives up", rev)
		}
		assertNoSecret(t, err)
		if len(asked) == 0 || len(asked) > broker.MaxInputRequests {
			t.Errorf("%s: %d input requests kept, want 1 to %d", rev, len(asked), broker.MaxInputRequests)
		}
		for _, r := range asked {
			if r != (broker.InputRequest{Mode: "url", Link: "https://nag.example.com/a", URL: "https://nag.example.com/a?n=QUERY-SECRET", Outcome: "unanswered"}) {
				t.Errorf("%s: input request %+v", rev, r)
			}
		}
	}
}

// TestInputCompleted: once a person has finished a link (Completed), the
// upstream asking for that link again is answered accept, in either
// revision; a link nobody finished is still cancelled, and the record says
// which was which. Only the link's scheme, host and path are compared, so
// a fresh state in the query still matches.
func TestInputCompleted(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		u := newUpstream(t, upstreamOpts{versions: []string{rev}, stateless: rev == "2026-07-28", tools: addAsk})
		for _, tc := range []struct {
			done   []string
			action string
			want   string
		}{
			{[]string{"https://auth.example.com/consent"}, "accept", broker.InputCompleted},
			{[]string{"https://auth.example.com/other"}, "cancel", broker.InputUnanswered},
			{nil, "cancel", broker.InputUnanswered},
		} {
			s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
			if err != nil {
				t.Fatal(err)
			}
			s.Completed(tc.done...)
			res, err := s.CallTool(t.Context(), "ask", map[string]any{"mode": "url", "url": "https://auth.example.com/consent?state=FRESH-QUERY-SECRET"})
			asked := s.InputRequests()
			s.Close()
			if err != nil || string(res.Content) != `[{"type":"text","text":"action `+tc.action+`"}]` {
				t.Errorf("%s done %v: CallTool = %s, %v; want action %s", rev, tc.done, res.Content, err, tc.action)
			}
			want := []broker.InputRequest{{Mode: "url", Link: "https://auth.example.com/consent", URL: "https://auth.example.com/consent?state=FRESH-QUERY-SECRET", Outcome: tc.want}}
			if diff := cmp.Diff(want, asked); diff != "" {
				t.Errorf("%s done %v: input requests (-want +got):\n%s", rev, tc.done, diff)
			}
		}
	}
}

// TestURLElicitationRequired: an upstream that refuses a call with
// URLElicitationRequired (-32042) until a person opens its links fails the
// call as a protocol error, and its links are recorded as the same
// requests an elicitation makes: stripped, judged, bounded; a link that is
// not http or https, or data not of the error's shape, is refused.
func TestURLElicitationRequired(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{versions: []string{"2025-11-25"}, tools: func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "gate", Description: "Needs consent first."},
			func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				URLs []string `json:"urls"`
			}) (*mcp.CallToolResult, any, error) {
				if len(in.URLs) == 0 {
					return nil, nil, &jsonrpc.Error{Code: mcp.CodeURLElicitationRequired, Message: "x", Data: json.RawMessage(`{"elicitations":"QUERY-SECRET"}`)}
				}
				var ps []*mcp.ElicitParams
				for i, u := range in.URLs {
					ps = append(ps, &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: u, ElicitationID: fmt.Sprint("e", i)})
				}
				return nil, nil, mcp.URLElicitationRequiredError(ps)
			})
	}})
	for _, tc := range []struct {
		urls []string
		want []broker.InputRequest
	}{
		{[]string{"https://idp.example.com/authorize?state=QUERY-SECRET", "javascript:alert(1)"}, []broker.InputRequest{
			{Mode: "url", Link: "https://idp.example.com/authorize", URL: "https://idp.example.com/authorize?state=QUERY-SECRET", Outcome: "unanswered"}, {Mode: "url", Outcome: "refused"}}},
		{nil, []broker.InputRequest{{Mode: "form", Outcome: "refused"}}},
	} {
		s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.CallTool(t.Context(), "gate", map[string]any{"urls": tc.urls})
		asked := s.InputRequests()
		s.Close()
		if !errors.Is(err, broker.ErrProtocol) {
			t.Errorf("urls %v: CallTool = %v, want ErrProtocol", tc.urls, err)
		}
		if diff := cmp.Diff(tc.want, asked, cmpopts.SortSlices(func(a, b broker.InputRequest) bool { return a.Link > b.Link })); diff != "" {
			t.Errorf("urls %v: input requests (-want +got):\n%s", tc.urls, diff)
		}
		if b, _ := json.Marshal(asked); strings.Contains(string(b), "SECRET") {
			t.Errorf("urls %v: input requests %s keep a query", tc.urls, b)
		}
	}
}
