//go:build e2e

package connection_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestInteropServerEverything: refresh and a brokered call against a server
// nobody here wrote, @modelcontextprotocol/server-everything in Streamable
// HTTP mode on 127.0.0.1. `make e2e` installs it and sets
// FLUIDBOX_E2E_MCP_EVERYTHING to its dist/index.js.
func TestInteropServerEverything(t *testing.T) {
	entry := os.Getenv("FLUIDBOX_E2E_MCP_EVERYTHING")
	if entry == "" {
		t.Fatal("FLUIDBOX_E2E_MCP_EVERYTHING is not set: run `make e2e`, which installs @modelcontextprotocol/server-everything")
	}
	url := startEverything(t, entry)
	ctx := context.Background()
	st := testenv.Store(t)
	led := ledger.New(st, time.Now)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	svc := connection.NewService(st, sealer, connection.Options{Egress: testenv.Loopback})
	v := everythingConnection(t, svc, url)

	pol := mustPolicyDoc(t, st, `{"name":"e","default_verdict":"deny","rules":[{"id":"echo","tool":"mcp__everything__echo","verdict":"allow"},
 {"id":"url","tool":"mcp__everything__trigger-url-elicitation","verdict":"allow"},
 {"id":"task","tool":"mcp__everything__simulate-research-query","verdict":"allow"}]}`)
	limit := 1.0
	req := run.CreateRequest{PolicyID: pol, Capabilities: []string{"claude-code"}, Connections: []string{v.ID}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	r, err := run.NewService(led, time.Now).Create(ctx, admin, req)
	if err != nil {
		t.Fatal(err)
	}
	perm := permission.NewService(led, approval.NewService(led, time.Now), approval.Lazy{}, slog.New(slog.DiscardHandler), time.Now)
	b := connection.NewBroker(svc, perm, nil)
	everythingEchoes(t, b, r.ID)
	everythingWaitsForAPerson(t, b, elicitation.NewService(led, time.Now, nil), r.ID)
	everythingRunsATask(t, b, r.ID)
	// A broker whose calls time out after a second.
	short := connection.NewBroker(connection.NewService(st, sealer, connection.Options{Egress: testenv.Loopback, CallTimeout: time.Second}), perm, nil)
	everythingPollsATask(t, short, r.ID)
}

// everythingConnection creates the connection to server-everything at url
// and refreshes it: echo is among its tools, all of them added.
func everythingConnection(t *testing.T, svc *connection.Service, url string) connection.View {
	t.Helper()
	ctx := context.Background()
	v, err := svc.Create(ctx, admin, connection.CreateRequest{
		Name: "everything", URL: url, Kind: "shared",
		Credential:  &seal.Credential{Type: seal.TypeBearer, Token: "CANARY-everything-3c1"},
		ToolClasses: map[string]string{"echo": "read"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Refresh(ctx, admin, v.ID)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	t.Logf("server-everything offers %d tools: %s", len(res.Tools), strings.Join(names, ", "))
	if len(res.Changes) != len(res.Tools) || !strings.Contains(","+strings.Join(names, ",")+",", ",echo,") {
		t.Fatalf("refresh = %d tools, %d changes; want echo among them, all added", len(res.Tools), len(res.Changes))
	}
	return v
}

// everythingEchoes: echo runs; a tool the policy does not allow is denied
// by the gate before the upstream is called.
func everythingEchoes(t *testing.T, b *connection.Broker, runID string) {
	t.Helper()
	ctx := context.Background()
	ans, err := b.Call(ctx, runID, permission.Request{ToolCallID: "e1", ToolName: "mcp__everything__echo", Input: json.RawMessage(`{"message":"hello from fluidbox"}`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "hello from fluidbox") {
		t.Fatalf("echo = %+v (result %s)", ans.Answer, resultJSON(ans))
	}
	ans, err = b.Call(ctx, runID, permission.Request{ToolCallID: "e2", ToolName: "mcp__everything__get-sum", Input: json.RawMessage(`{"a":1,"b":2}`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Decision != vocab.Deny {
		t.Errorf("get-sum = %+v, want deny (policy)", ans.Answer)
	}
}

// everythingWaitsForAPerson: the TypeScript SDK's URL elicitation (its
// request path): the call waits for a person; after done, the retry's
// elicitation is accepted.
func everythingWaitsForAPerson(t *testing.T, b *connection.Broker, inputs *elicitation.Service, runID string) {
	t.Helper()
	ctx := context.Background()
	asks := permission.Request{ToolCallID: "u1", ToolName: "mcp__everything__trigger-url-elicitation",
		Input: json.RawMessage(`{"url":"https://consent.example.com/start?state=QUERY-7"}`)}
	ans, err := b.Call(ctx, runID, asks, 0)
	if err != nil || ans.Decision != vocab.Pending || ans.Source != "input_required" || ans.InputRequestID == "" {
		t.Fatalf("trigger-url-elicitation = %+v, %v; want pending on an input request", ans.Answer, err)
	}
	if ir, ok, err := inputs.Decide(ctx, admin, ans.InputRequestID, elicitation.DecisionDone); err != nil || !ok ||
		ir.Link != "https://consent.example.com/start" || ir.URL != "https://consent.example.com/start?state=QUERY-7" {
		t.Fatalf("done = %+v, %t, %v", ir, ok, err)
	}
	ans, err = b.Call(ctx, runID, asks, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || !strings.Contains(string(ans.Result.Content), "completed the URL elicitation") {
		t.Fatalf("trigger-url-elicitation after done = %+v (result %s), %v; want the upstream's accepted flow", ans.Answer, resultJSON(ans), err)
	}
}

// everythingRunsATask: the TypeScript SDK's experimental tasks
// (2025-11-25): its one task tool has taskSupport "required" (a plain call
// is -32601), so the broker calls it as a task, polls tasks/get and reads
// tasks/result; tool.brokered records the result.
func everythingRunsATask(t *testing.T, b *connection.Broker, runID string) {
	t.Helper()
	ctx := context.Background()
	research := permission.Request{ToolCallID: "t1", ToolName: "mcp__everything__simulate-research-query", Input: json.RawMessage(`{"topic":"tides"}`)}
	ans, err := b.Call(ctx, runID, research, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "Research Report: tides") {
		t.Fatalf("simulate-research-query = %+v (result %s), %v; want the task's report", ans.Answer, resultJSON(ans), err)
	}
	if _, err := b.Call(ctx, runID, research, 0); !errors.Is(err, connection.ErrAlreadyExecuted) {
		t.Fatalf("simulate-research-query again: %v, want ErrAlreadyExecuted", err)
	}
	// An ambiguous query moves the task to input_required: the broker reads
	// tasks/result, on whose stream the server asks (a form), and the
	// session answers cancel as for any form; the task goes on with its
	// default interpretation.
	ambiguous := permission.Request{ToolCallID: "t2", ToolName: "mcp__everything__simulate-research-query", Input: json.RawMessage(`{"topic":"tides","ambiguous":true}`)}
	ans, err = b.Call(ctx, runID, ambiguous, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "User cancelled - using default interpretation") {
		t.Fatalf("ambiguous simulate-research-query = %+v (result %s), %v; want the report on the default interpretation", ans.Answer, resultJSON(ans), err)
	}
}

// everythingPollsATask: a broker whose calls time out before the task
// ends leaves it running: pending (task_running), then polled through
// fluidbox on the server's session (its task store finds a task by
// session) until the report comes.
func everythingPollsATask(t *testing.T, short *connection.Broker, runID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	later := permission.Request{ToolCallID: "t3", ToolName: "mcp__everything__simulate-research-query", Input: json.RawMessage(`{"topic":"reefs"}`)}
	ans, err := short.Call(ctx, runID, later, 0)
	if err != nil || ans.Decision != vocab.Pending || ans.Source != "task_running" {
		t.Fatalf("simulate-research-query on a short call = %+v, %v; want pending on the task", ans.Answer, err)
	}
	ans, err = short.Call(ctx, runID, later, 8*time.Second)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "Research Report: reefs") {
		t.Fatalf("simulate-research-query polled = %+v (result %s), %v; want the task's report", ans.Answer, resultJSON(ans), err)
	}
}

func resultJSON(a connection.CallAnswer) string {
	b, _ := json.Marshal(a.Result)
	return string(b)
}

// startEverything runs server-everything on a free loopback port, with the
// preload that pins every listener to 127.0.0.1, and waits for it.
func startEverything(t *testing.T, entry string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	preload, err := filepath.Abs("testdata/loopback.cjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "-r", preload, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Logf("server-everything: %s", sc.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}
