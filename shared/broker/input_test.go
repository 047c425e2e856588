package broker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
			broker.InputRequest{Mode: "url", Link: "https://auth.example.com/consent/start", Outcome: "unanswered"}},
		{"user info", askCase{Mode: "url", URL: "http://user:USERINFO-SECRET@auth.example.com/c"}, "cancel",
			broker.InputRequest{Mode: "url", Link: "http://auth.example.com/c", Outcome: "unanswered"}},
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
			if b, _ := json.Marshal(asked); strings.Contains(string(b), "SECRET") {
				t.Errorf("%s %s: input requests %s keep a query or user info", rev, tc.name, b)
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
			if r != (broker.InputRequest{Mode: "url", Link: "https://nag.example.com/a", Outcome: "unanswered"}) {
				t.Errorf("%s: input request %+v", rev, r)
			}
		}
	}
}
