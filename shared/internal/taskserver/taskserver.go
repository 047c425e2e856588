// Package taskserver is an MCP server for tests that runs tools as tasks
// in the 2025-11-25 experimental form, built on the official Go SDK.
package taskserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is an MCP server (official Go SDK) that runs tools as tasks
// in the 2025-11-25 experimental form: tasks/get and tasks/result are SDK
// custom methods, and a receiving middleware answers a task-augmented
// tools/call with a CreateTaskResult and runs the tool in the background.
// The SDK's types have no place for capabilities.tasks, a tool's execution
// or params.task, so a thin HTTP layer in front of the SDK's handler adds
// the first two to its JSON answers and passes the third on in a header.
type Server struct {
	srv *httptest.Server
	// URL is where it listens, on 127.0.0.1.
	URL       string
	Calls     atomic.Int64 // tools/call requests
	TaskCalls atomic.Int64 // of them, task-augmented
	Gets      atomic.Int64 // tasks/get requests
	TTL       atomic.Int64 // the last task's requested ttl

	o       Options
	created atomic.Int64 // task ids handed out
	mu      sync.Mutex
	tasks   map[string]*upTask
}

type upTask struct {
	status  string
	session string // the MCP session that created it: only it finds the task
	res     *mcp.CallToolResult
	done    chan struct{}
}

// Options shape a Server; a test sets a field to make it misbehave.
type Options struct {
	// Token is the bearer token it requires.
	Token string
	// NoCapability: the server does not declare tasks.
	NoCapability bool
	// Support is each tool's execution.taskSupport ("" leaves it out).
	Support map[string]string
	// ID is the id the server gives its tasks (default: task-<n>).
	ID string
	// Poll is the pollInterval it sends (nil: none); Status, when set,
	// is what tasks/get says instead of the truth.
	Poll   any
	Status string
	// Related overrides the result's related-task id.
	Related string
	// Work is how long a tool runs (default 300 ms); Forever: until the
	// test ends.
	Work    time.Duration
	Forever bool
	// Result is the tool's text (default "report on tides").
	Result string
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

// New starts a task server on 127.0.0.1 for the test's life, shaped by o.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Work == 0 {
		o.Work = 300 * time.Millisecond
	}
	if o.Result == "" {
		o.Result = "report on tides"
	}
	u := &Server{tasks: map[string]*upTask{}, o: o}
	stop := make(chan struct{})
	server := mcp.NewServer(&mcp.Implementation{Name: "task-upstream", Version: "1"}, nil)
	u.addTools(server, stop)
	server.AddReceivingMiddleware(u.taskCalls)
	if err := mcp.AddReceivingCustomMethod(server, "tasks/get", u.get); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddReceivingCustomMethod(server, "tasks/result", u.result); err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	u.srv = httptest.NewServer(u.front(t, h))
	u.URL = u.srv.URL
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(stop) })
	return u
}

// addTools adds the slow tools, each of which works o.Work (or until stop
// with o.Forever) and answers o.Result.
func (u *Server) addTools(server *mcp.Server, stop chan struct{}) {
	for _, name := range []string{"research", "maybe", "plain", "odd"} {
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: "Researches a topic slowly."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
				Topic string `json:"topic"`
			}) (*mcp.CallToolResult, any, error) {
				if u.o.Forever {
					<-stop
				}
				time.Sleep(u.o.Work)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: u.o.Result}}}, nil, nil
			})
	}
}

// taskCalls runs a task-augmented tools/call (front marks it) as a task:
// the tool works in the background and the answer is a CreateTaskResult; a
// plain call of a required tool is refused as the TypeScript SDK refuses
// it.
func (u *Server) taskCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		u.Calls.Add(1)
		name := req.(*mcp.CallToolRequest).Params.Name
		if req.GetExtra().Header.Get("X-Test-Task") == "" {
			if u.o.Support[name] == "required" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Tool " + name + " requires task augmentation"}
			}
			return next(ctx, method, req)
		}
		u.TaskCalls.Add(1)
		id := u.o.ID
		if id == "" {
			id = fmt.Sprintf("task-%d", u.created.Add(1))
		}
		task := &upTask{status: "working", session: req.GetSession().(*mcp.ServerSession).ID(), done: make(chan struct{})}
		u.mu.Lock()
		u.tasks[id] = task
		u.mu.Unlock()
		go u.work(task, func() (mcp.Result, error) { return next(context.WithoutCancel(ctx), method, req) })
		return &createTaskResult{Task: u.wire(id, "working", u.o)}, nil
	}
}

// work runs a task's tool and keeps its result.
func (u *Server) work(task *upTask, run func() (mcp.Result, error)) {
	res, err := run()
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
}

// get answers tasks/get: the task's status (o.Status instead, when set).
func (u *Server) get(_ context.Context, ss *mcp.ServerSession, p *taskIDParams) (*taskState, error) {
	u.Gets.Add(1)
	task := u.task(ss, p.TaskID)
	if task == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found"}
	}
	u.mu.Lock()
	status := task.status
	u.mu.Unlock()
	if u.o.Status != "" {
		status = u.o.Status
	}
	return &taskState{TaskID: p.TaskID, Status: status, PollInterval: u.o.Poll, CreatedAt: "2026-12-07T00:00:00Z"}, nil
}

// result answers tasks/result once the task is done, with its related-task
// id (o.Related instead, when set).
func (u *Server) result(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	task := u.task(ss, p.TaskID)
	if task == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found"}
	}
	select {
	case <-task.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	related := p.TaskID
	if u.o.Related != "" {
		related = u.o.Related
	}
	res := *task.res
	res.Meta = mcp.Meta{"io.modelcontextprotocol/related-task": map[string]any{"taskId": related}}
	return &res, nil
}

// front is the HTTP layer before the SDK's handler: it requires the bearer
// token, marks a task-augmented tools/call for taskCalls (and keeps its
// ttl), and adds what the SDK's types cannot carry to the answers
// (capabilities.tasks, each tool's execution).
func (u *Server) front(t testing.TB, h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+u.o.Token {
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
			u.TTL.Store(msg.Params.Task.TTL)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		out := u.withTasks(t, msg.Method, rec.Body.Bytes())
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
	}
}

// withTasks adds the tasks capability to initialize's answer (unless
// o.NoCapability) and each tool's taskSupport to tools/list's.
func (u *Server) withTasks(t testing.TB, method string, out []byte) []byte {
	switch method {
	case "initialize":
		if !u.o.NoCapability {
			return edit(t, out, func(res map[string]any) {
				res["capabilities"].(map[string]any)["tasks"] = map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
			})
		}
	case "tools/list":
		return edit(t, out, func(res map[string]any) {
			for _, tool := range res["tools"].([]any) {
				tl := tool.(map[string]any)
				if s := u.o.Support[tl["name"].(string)]; s != "" {
					tl["execution"] = map[string]any{"taskSupport": s}
				}
			}
		})
	}
	return out
}

// task is the task id of session ss, as the TypeScript SDK's task store
// finds it: a task belongs to the session that created it.
func (u *Server) task(ss *mcp.ServerSession, id string) *upTask {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.tasks[id]; t != nil && t.session == ss.ID() {
		return t
	}
	return nil
}

func (u *Server) wire(id, status string, o Options) map[string]any {
	w := map[string]any{"taskId": id, "status": status, "createdAt": "2026-12-07T00:00:00Z", "lastUpdatedAt": "2026-12-07T00:00:00Z", "ttl": 60000}
	if o.Poll != nil {
		w["pollInterval"] = o.Poll
	}
	return w
}

// edit changes the result of a JSON-RPC response body.
func edit(t testing.TB, body []byte, change func(map[string]any)) []byte {
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
