package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// taskUpstream is an MCP server (official Go SDK) that runs tools as tasks
// in the 2025-11-25 experimental form: tasks/get and tasks/result are SDK
// custom methods, and a receiving middleware answers a task-augmented
// tools/call with a CreateTaskResult and runs the tool in the background.
// The SDK's types have no place for capabilities.tasks, a tool's execution
// or params.task, so a thin HTTP layer in front of the SDK's handler adds
// the first two to its JSON answers and passes the third on in a header.
type taskUpstream struct {
	srv       *httptest.Server
	calls     atomic.Int64 // tools/call requests
	taskCalls atomic.Int64 // of them, task-augmented
	gets      atomic.Int64 // tasks/get requests
	ttl       atomic.Int64 // the last task's requested ttl

	mu    sync.Mutex
	tasks map[string]*upTask
}

type upTask struct {
	status string
	res    *mcp.CallToolResult
	done   chan struct{}
}

type taskUpstreamOpts struct {
	// noCapability: the server does not declare tasks.
	noCapability bool
	// support is each tool's execution.taskSupport ("" leaves it out).
	support map[string]string
	// id is the id the server gives its tasks (default: task-<n>).
	id string
	// poll is the pollInterval it sends (nil: none); status, when set,
	// is what tasks/get says instead of the truth.
	poll   any
	status string
	// related overrides the result's related-task id.
	related string
	// work is how long a tool runs (default 300 ms); forever: until the test ends.
	work    time.Duration
	forever bool
	// result is the tool's text.
	result string
}

type createTaskResult struct {
	mcp.ResultBase
	Task map[string]any `json:"task"`
}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskState struct {
	mcp.ResultBase
	TaskID       string `json:"taskId"`
	Status       string `json:"status"`
	PollInterval any    `json:"pollInterval,omitempty"`
	CreatedAt    string `json:"createdAt"`
}

func newTaskUpstream(t *testing.T, o taskUpstreamOpts) *taskUpstream {
	t.Helper()
	if o.work == 0 {
		o.work = 300 * time.Millisecond
	}
	if o.result == "" {
		o.result = "report on tides"
	}
	u := &taskUpstream{tasks: map[string]*upTask{}}
	stop := make(chan struct{})
	server := mcp.NewServer(&mcp.Implementation{Name: "task-upstream", Version: "1"}, nil)
	for _, name := range []string{"research", "maybe", "plain", "odd"} {
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: "Researches a topic slowly."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
				Topic string `json:"topic"`
			}) (*mcp.CallToolResult, any, error) {
				if o.forever {
					<-stop
				}
				time.Sleep(o.work)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: o.result}}}, nil, nil
			})
	}
	var n atomic.Int64
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			u.calls.Add(1)
			name := req.(*mcp.CallToolRequest).Params.Name
			if req.GetExtra().Header.Get("X-Test-Task") == "" {
				if o.support[name] == "required" {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Tool " + name + " requires task augmentation"}
				}
				return next(ctx, method, req)
			}
			u.taskCalls.Add(1)
			id := o.id
			if id == "" {
				id = fmt.Sprintf("task-%d", n.Add(1))
			}
			task := &upTask{status: "working", done: make(chan struct{})}
			u.mu.Lock()
			u.tasks[id] = task
			u.mu.Unlock()
			go func() {
				res, err := next(context.WithoutCancel(ctx), method, req)
				u.mu.Lock()
				defer u.mu.Unlock()
				task.status = "completed"
				if r, ok := res.(*mcp.CallToolResult); ok && err == nil {
					task.res = r
				} else {
					task.status = "failed"
					task.res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failed"}}}
				}
				close(task.done)
			}()
			return &createTaskResult{Task: u.wire(id, "working", o)}, nil
		}
	})
	if err := mcp.AddReceivingCustomMethod(server, "tasks/get", func(_ context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskState, error) {
		u.gets.Add(1)
		task := u.task(p.TaskID)
		if task == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found"}
		}
		u.mu.Lock()
		status := task.status
		u.mu.Unlock()
		if o.status != "" {
			status = o.status
		}
		return &taskState{TaskID: p.TaskID, Status: status, PollInterval: o.poll, CreatedAt: "2026-12-07T00:00:00Z"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddReceivingCustomMethod(server, "tasks/result", func(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
		task := u.task(p.TaskID)
		if task == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found"}
		}
		select {
		case <-task.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		related := p.TaskID
		if o.related != "" {
			related = o.related
		}
		res := *task.res
		res.Meta = mcp.Meta{"io.modelcontextprotocol/related-task": map[string]any{"taskId": related}}
		return &res, nil
	}); err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+canary {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Task *struct {
					TTL int64 `json:"ttl"`
				} `json:"task"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method == "tools/call" && msg.Params.Task != nil {
			r.Header.Set("X-Test-Task", "1")
			u.ttl.Store(msg.Params.Task.TTL)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		out := rec.Body.Bytes()
		switch msg.Method {
		case "initialize":
			if !o.noCapability {
				out = edit(t, out, func(res map[string]any) {
					res["capabilities"].(map[string]any)["tasks"] = map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
				})
			}
		case "tools/list":
			out = edit(t, out, func(res map[string]any) {
				for _, tool := range res["tools"].([]any) {
					tl := tool.(map[string]any)
					if s := o.support[tl["name"].(string)]; s != "" {
						tl["execution"] = map[string]any{"taskSupport": s}
					}
				}
			})
		}
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
	}))
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(stop) })
	return u
}

func (u *taskUpstream) task(id string) *upTask {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tasks[id]
}

func (u *taskUpstream) wire(id, status string, o taskUpstreamOpts) map[string]any {
	w := map[string]any{"taskId": id, "status": status, "createdAt": "2026-12-07T00:00:00Z", "lastUpdatedAt": "2026-12-07T00:00:00Z", "ttl": 60000}
	if o.poll != nil {
		w["pollInterval"] = o.poll
	}
	return w
}

// edit changes the result of a JSON-RPC response body.
func edit(t *testing.T, body []byte, change func(map[string]any)) []byte {
	t.Helper()
	var msg map[string]any
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("upstream answer is not JSON: %v", err)
	}
	if res, ok := msg["result"].(map[string]any); ok {
		change(res)
	}
	out, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var requiredResearch = map[string]string{"research": "required", "maybe": "optional", "plain": "forbidden", "odd": "sometimes"}

func callTask(t *testing.T, u *taskUpstream, ctx context.Context, name string) (broker.Result, error) {
	t.Helper()
	s, err := broker.Connect(ctx, loopback, u.srv.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.CallTool(ctx, name, map[string]any{"topic": "tides"})
}

// TestTaskRequiredTool: a tool whose taskSupport is required runs as a
// task (params.task with the broker's ttl), is polled with tasks/get and
// its result read with tasks/result; optional and forbidden tools are
// called plainly; an unknown taskSupport is refused before anything is sent.
func TestTaskRequiredTool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := newTaskUpstream(t, taskUpstreamOpts{support: requiredResearch})
	res, err := callTask(t, u, ctx, "research")
	if err != nil {
		t.Fatalf("task call: %v", err)
	}
	if !strings.Contains(string(res.Content), "report on tides") || res.IsError {
		t.Fatalf("result = %s (is_error %t)", res.Content, res.IsError)
	}
	if u.taskCalls.Load() != 1 || u.gets.Load() < 1 {
		t.Fatalf("task calls %d, tasks/get %d", u.taskCalls.Load(), u.gets.Load())
	}
	if got := u.ttl.Load(); got != broker.TaskTTL.Milliseconds() {
		t.Fatalf("requested ttl = %d ms", got)
	}
	for _, name := range []string{"maybe", "plain"} {
		if _, err := callTask(t, u, ctx, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if u.taskCalls.Load() != 1 || u.calls.Load() != 3 {
		t.Fatalf("optional and forbidden tools: task calls %d of %d", u.taskCalls.Load(), u.calls.Load())
	}
	_, err = callTask(t, u, ctx, "odd")
	if !errors.Is(err, broker.ErrInvalidResponse) || u.calls.Load() != 3 {
		t.Fatalf("unknown taskSupport: err %v, calls %d", err, u.calls.Load())
	}
}

// TestTaskRequiredWithoutCapability: a server that marks a tool required
// but declares no tasks may not be sent a task (MUST NOT), and a plain call
// is one it refuses: the broker refuses before sending.
func TestTaskRequiredWithoutCapability(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := newTaskUpstream(t, taskUpstreamOpts{support: requiredResearch, noCapability: true})
	s, err := broker.Connect(ctx, loopback, u.srv.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.TaskSupport("research"); got != broker.TaskRequired {
		t.Fatalf("TaskSupport = %q", got)
	}
	_, err = s.CallTool(ctx, "research", nil)
	if !errors.Is(err, broker.ErrInvalidRequest) || u.calls.Load() != 0 {
		t.Fatalf("err %v, calls %d", err, u.calls.Load())
	}
}

// TestTaskHostile: what the upstream says of its task is held to bounds,
// and never shows in an error.
func TestTaskHostile(t *testing.T) {
	long := strings.Repeat("T", broker.MaxTaskIDBytes+1)
	cases := []struct {
		name string
		o    taskUpstreamOpts
		want error
	}{
		{"id too long", taskUpstreamOpts{id: long}, broker.ErrInvalidResponse},
		{"id with a newline", taskUpstreamOpts{id: "zq9\nFORGED log line"}, broker.ErrInvalidResponse},
		{"unknown status", taskUpstreamOpts{status: "paused"}, broker.ErrInvalidResponse},
		{"cancelled", taskUpstreamOpts{status: "cancelled"}, broker.ErrProtocol},
		{"result of another task", taskUpstreamOpts{related: "task-other"}, broker.ErrInvalidResponse},
		{"poll interval not a number", taskUpstreamOpts{poll: "soon"}, broker.ErrInvalidResponse},
		{"never done", taskUpstreamOpts{forever: true, poll: 0}, context.DeadlineExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.support = requiredResearch
			u := newTaskUpstream(t, c.o)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := callTask(t, u, ctx, "research")
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.o.id != "" && strings.Contains(err.Error(), c.o.id[:4]) {
				t.Fatalf("error quotes the task id: %v", err)
			}
			// pollInterval 0 is clamped: 2 s of polling is at most 20 polls.
			if n := u.gets.Load(); n > 21 {
				t.Fatalf("%d tasks/get in 2 s", n)
			}
		})
	}
}

// TestTaskPollClamped: a server asking to be polled every hour is polled
// at most every maxTaskPoll (5 s), and one asking for 0 ms at least 100 ms
// apart.
func TestTaskPollClamped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := newTaskUpstream(t, taskUpstreamOpts{support: requiredResearch, poll: 3_600_000, work: 50 * time.Millisecond})
	start := time.Now()
	if _, err := callTask(t, u, ctx, "research"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("an hour's pollInterval held the call %s", d)
	}
}

// TestTaskResultEchoesCredential: a task's result is held to the same
// rules as a plain call's: one holding the credential is withheld.
func TestTaskResultEchoesCredential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := newTaskUpstream(t, taskUpstreamOpts{support: requiredResearch, result: "token " + canary})
	_, err := callTask(t, u, ctx, "research")
	if !errors.Is(err, broker.ErrCredentialEcho) {
		t.Fatalf("err = %v", err)
	}
	assertNoSecret(t, err)
}
