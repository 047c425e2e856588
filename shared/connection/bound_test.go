package connection_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// TestOverlongToolNamesNeverCollide: an upstream offers a tool whose name
// is at the bound and others whose names start with it and run past it. A
// tool over the bound is kept un-callable under a cut name, and no cut
// name may equal another tool's: the photograph would hold one name twice,
// every later refresh would fail rebuilding it (even once the upstream
// dropped the long tools), and no run could attach the connection.
func TestOverlongToolNamesNeverCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testenv.Store(t)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	base := strings.Repeat("a", connection.MaxToolNameBytes)
	long := []string{base + "b", base + "c"}
	server := mcp.NewServer(&mcp.Implementation{Name: "long", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	handler := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	for _, name := range append([]string{base}, long...) {
		mcp.AddTool(server, &mcp.Tool{Name: name}, handler)
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)

	svc := connection.NewService(st, sealer, connection.Options{Egress: testenv.Loopback})
	v, err := svc.Create(ctx, admin, connection.CreateRequest{Name: "long", URL: srv.URL, Kind: "shared", Credential: &seal.Credential{Type: seal.TypeBearer, Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Refresh(ctx, admin, v.ID)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	names := map[string]bool{}
	for _, tool := range res.Tools {
		if names[tool.Name] {
			t.Errorf("the photograph names %.20q... twice", tool.Name)
		}
		names[tool.Name] = true
		if over := tool.Name != base; over && tool.Callable {
			t.Errorf("tool %.20q... (over the bound) is callable", tool.Name)
		}
		if len(tool.Name) > 2*connection.MaxToolNameBytes {
			t.Errorf("a kept name is %d bytes, unbounded", len(tool.Name))
		}
	}
	if !names[base] || len(names) != 3 {
		t.Errorf("photograph has %d distinct names (the one at the bound: %v), want 3", len(names), names[base])
	}

	// A run can attach the connection.
	runs := run.NewService(ledger.New(st, time.Now), time.Now)
	req := run.CreateRequest{PolicyID: mustPolicy(t, st), Capabilities: []string{"claude-code"}, Connections: []string{"long"}}
	limit := 1.0
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	if _, err := runs.Create(ctx, admin, req); err != nil {
		t.Errorf("a run attaching the connection: %v", err)
	}

	// The upstream drops the long tools; the next refresh rebuilds the
	// previous photograph and reports them removed.
	server.RemoveTools(long...)
	res, err = svc.Refresh(ctx, admin, v.ID)
	if err != nil {
		t.Fatalf("refresh after the upstream dropped the long tools: %v", err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != base || !res.Tools[0].Callable {
		t.Errorf("tools after the drop = %+v, want the one at the bound, callable", res.Tools)
	}
}
