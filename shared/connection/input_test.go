package connection_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/permission"
)

// TestBrokeredInputRequest: a brokered tool whose upstream asks for input
// mid-call (a consent link with its state in the query, then a form asking
// for a token) no longer fails the call: the upstream is answered (cancel
// for the link nobody could open within the call, decline for the secret),
// finishes, and the runner gets its result; tool.brokered records both
// requests, the link without its query, and nothing of either request
// reaches the ledger otherwise. In each revision.
func TestBrokeredInputRequest(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		server := mcp.NewServer(&mcp.Implementation{Name: "asks", Version: "1"}, &mcp.ServerOptions{
			Logger: slog.New(slog.DiscardHandler), SupportedProtocolVersions: []string{rev},
		})
		mcp.AddTool(server, &mcp.Tool{Name: "deploy", Description: "Deploys, after consent."},
			func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				link, ok1 := req.Params.InputResponses["consent"].(*mcp.ElicitResult)
				form, ok2 := req.Params.InputResponses["token"].(*mcp.ElicitResult)
				if ok1 && ok2 {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not deployed: consent " + link.Action + ", token " + form.Action}}}, nil, nil
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
					"consent": &mcp.ElicitParams{Mode: "url", Message: "Approve the deploy.", URL: "https://deploy.example.com/consent?state=QUERY-SECRET-7", ElicitationID: "el-1"},
					"token": &mcp.ElicitParams{Mode: "form", Message: "Your PAT", RequestedSchema: map[string]any{
						"type": "object", "properties": map[string]any{"personal_access_token": map[string]any{"type": "string"}},
					}},
				}}, nil, nil
			})
		mcp.AddTool(server, &mcp.Tool{Name: "nag", Description: "Asks forever."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
					"a": &mcp.ElicitParams{Mode: "url", Message: "again", URL: "javascript:alert(1)//QUERY-SECRET"},
				}}, nil, nil
			})
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{Stateless: rev == "2026-07-28"}))
		t.Cleanup(srv.Close)
		f, _ := newRunOn(t, srv.URL)

		ans, err := f.broker.Call(context.Background(), f.run.ID, permission.Request{ToolCallID: "d1", ToolName: "mcp__team__deploy", Input: []byte(`{}`)}, 0)
		if err != nil {
			t.Fatalf("%s: Call: %v", rev, err)
		}
		if ans.Decision != call.Allowed || ans.Result == nil || string(ans.Result.Content) != `[{"type":"text","text":"not deployed: consent cancel, token decline"}]` {
			t.Fatalf("%s: Call = %+v (result %+v), want allowed with the upstream's answer", rev, ans.Answer, ans.Result)
		}
		// One that asks at every answer fails once the SDK gives up, and
		// its requests are recorded all the same.
		nag, err := f.broker.Call(context.Background(), f.run.ID, permission.Request{ToolCallID: "n1", ToolName: "mcp__team__nag", Input: []byte(`{}`)}, 0)
		if err != nil || nag.Decision != call.Allowed || nag.Result == nil || !nag.Result.IsError {
			t.Fatalf("%s: Call(nag) = %+v, %v; want allowed with a tool error", rev, nag.Answer, err)
		}
		evs, _, err := f.led.Read(context.Background(), f.run.ID, 0, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got, nagged []map[string]string
		for _, e := range evs {
			if strings.Contains(string(e.Data), "SECRET") || strings.Contains(string(e.Data), "Approve the deploy") {
				t.Errorf("%s: %s event keeps the upstream's request: %s", rev, e.Type, e.Data)
			}
			if e.Type != "tool.brokered" {
				continue
			}
			var data struct {
				ToolCallID   string              `json:"tool_call_id"`
				Elicitations []map[string]string `json:"elicitations"`
			}
			if err := json.Unmarshal([]byte(e.Data), &data); err != nil {
				t.Fatal(err)
			}
			switch data.ToolCallID {
			case "d1":
				got = data.Elicitations
			case "n1":
				nagged = data.Elicitations
			}
		}
		if len(nagged) == 0 || len(nagged) > broker.MaxInputRequests || nagged[0]["outcome"] != "refused" || nagged[0]["link"] != "" {
			t.Errorf("%s: tool.brokered of the failed call lists %v, want its refused requests, bounded", rev, nagged)
		}
		want := []map[string]string{
			{"mode": "form", "outcome": "refused"},
			{"mode": "url", "link": "https://deploy.example.com/consent", "outcome": "unanswered"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: tool.brokered elicitations (-want +got):\n%s", rev, diff)
		}
	}
}
