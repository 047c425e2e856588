package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks (MCP 2025-11-25, experimental): a server that declares
// capabilities.tasks.requests.tools.call may mark a tool's
// execution.taskSupport "optional" or "required". A required tool must be
// called as a task (a tools/call with params.task), and the server answers
// at once with a CreateTaskResult (result.task: taskId, status,
// pollInterval, ttl); the client polls tasks/get until the task is terminal
// (completed, failed, cancelled) or input_required, then reads tasks/result,
// which is the CallToolResult the call would have returned (for
// input_required it carries the server's elicitation on its stream, which
// the session answers as it answers any).
//
// The client declares nothing for this: the client's own tasks capability
// is about requests the client receives (sampling, elicitation) as tasks,
// which the broker never accepts.
//
// The Go SDK (v1.8.0) has no tasks code: its Tool and ServerCapabilities
// drop execution and tasks, and its CallToolResult drops task. So:
//   - the request's task parameter is added by a sending middleware (the
//     SDK's own hook), and tasks/get and tasks/result are SDK custom methods;
//   - what the SDK's types drop is read from the raw responses the session
//     already bounds (a tap on the HTTP bodies, armed only during the
//     exchange that needs it): initialize's capabilities, tools/list's
//     execution, tools/call's task.
//
// The 2026-07-28 revision moved tasks into an extension
// (io.modelcontextprotocol/tasks, SEP-2663: resultType "task", tasks/get
// with pollIntervalMs, no tasks/result). No official SDK ships it yet; a
// session of that revision offers no tasks (a required tool is refused
// before anything is sent), and the extension would be a second taskForm.
//
// Everything the upstream says about a task is untrusted: the task id is
// bounded (MaxTaskIDBytes, printable) and kept only inside the session
// (never in an error, a log line or the ledger); the status must be one of
// the five; pollInterval is clamped to [minTaskPoll, maxTaskPoll]; the
// status message is dropped; polls are bounded by the caller's ctx and
// maxTaskPolls.

// TaskSupport is a tool's execution.taskSupport. They are on the wire:
// never rename.
type TaskSupport string

const (
	// TaskForbidden (or absent): the tool is never called as a task.
	TaskForbidden TaskSupport = "forbidden"
	// TaskOptional: the client may call it either way; the broker calls it
	// plainly.
	TaskOptional TaskSupport = "optional"
	// TaskRequired: the tool must be called as a task; the server refuses
	// a plain call (-32601).
	TaskRequired TaskSupport = "required"
	// taskUnknown is any other value: the tool is not called at all.
	taskUnknown TaskSupport = "?"
)

// Task statuses (2025-11-25). They are on the wire: never rename.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// Bounds on what the upstream controls.
const (
	// MaxTaskIDBytes bounds a task id.
	MaxTaskIDBytes = 256
	// TaskTTL is the lifetime the broker asks for its tasks (the server
	// may choose another): a task whose call was abandoned is not kept
	// longer than this.
	TaskTTL = 10 * time.Minute
	// minTaskPoll and maxTaskPoll clamp the server's pollInterval;
	// defaultTaskPoll is used when it gives none.
	minTaskPoll     = 100 * time.Millisecond
	maxTaskPoll     = 5 * time.Second
	defaultTaskPoll = time.Second
	// maxTaskPolls bounds the tasks/get requests of one call.
	maxTaskPolls = 1000
)

// Task is what the broker keeps of an upstream's task.
type Task struct {
	id     string
	status string
	poll   time.Duration
}

// terminal reports whether the task ended (or waits on input, which only
// tasks/result can deliver).
func (t Task) settled() bool { return t.status != taskWorking }

// taskWire is a Task as the upstream sends it (CreateTaskResult.task, the
// tasks/get result).
type taskWire struct {
	TaskID       string   `json:"taskId"`
	Status       string   `json:"status"`
	PollInterval *float64 `json:"pollInterval,omitempty"`
}

// taskOf checks a task the upstream sent: a printable id within
// MaxTaskIDBytes, a known status, a pollInterval clamped.
func taskOf(w taskWire) (Task, bool) {
	if w.TaskID == "" || len(w.TaskID) > MaxTaskIDBytes || !printable(w.TaskID) {
		return Task{}, false
	}
	switch w.Status {
	case taskWorking, taskInputRequired, taskCompleted, taskFailed, taskCancelled:
	default:
		return Task{}, false
	}
	poll := defaultTaskPoll
	if p := w.PollInterval; p != nil {
		// NaN and infinities cannot come from JSON; a value past a day is
		// cut before it is converted (a float past int64 converts to
		// nothing defined), then clamped like any other.
		poll = time.Duration(min(max(*p, 0), float64(24*time.Hour/time.Millisecond))) * time.Millisecond
	}
	return Task{id: w.TaskID, status: w.Status, poll: min(max(poll, minTaskPoll), maxTaskPoll)}, true
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// taskForm is one revision's form of tasks: which tool calls it makes tasks
// of, and its messages.
type taskForm interface {
	// capable reads the server's declaration of tasks for tools/call from
	// the raw result of the handshake.
	capable(handshake json.RawMessage) bool
	// created reads the task from the raw result of a task-augmented
	// tools/call; ok is false when the result holds none.
	created(result json.RawMessage) (Task, bool)
	// get polls the task's status.
	get(ctx context.Context, cs *mcp.ClientSession, id string) (Task, error)
	// result reads the task's CallToolResult once settled.
	result(ctx context.Context, cs *mcp.ClientSession, id string) (*mcp.CallToolResult, error)
}

// experimentalTasks is the 2025-11-25 form.
type experimentalTasks struct{}

func (experimentalTasks) capable(handshake json.RawMessage) bool {
	var init struct {
		Capabilities struct {
			Tasks *struct {
				Requests *struct {
					Tools *struct {
						Call *struct{} `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(handshake, &init) != nil {
		return false
	}
	t := init.Capabilities.Tasks
	return t != nil && t.Requests != nil && t.Requests.Tools != nil && t.Requests.Tools.Call != nil
}

func (experimentalTasks) created(result json.RawMessage) (Task, bool) {
	var res struct {
		Task *taskWire `json:"task"`
	}
	if json.Unmarshal(result, &res) != nil || res.Task == nil {
		return Task{}, false
	}
	return taskOf(*res.Task)
}

func (experimentalTasks) get(ctx context.Context, cs *mcp.ClientSession, id string) (Task, error) {
	res, err := mcp.CallCustomMethod[*taskIDParams, *taskGetResult](ctx, cs, methodTasksGet, &taskIDParams{TaskID: id})
	if err != nil {
		return Task{}, err
	}
	t, ok := taskOf(res.taskWire)
	if !ok || t.id != id {
		return Task{}, errBadTask
	}
	return t, nil
}

func (experimentalTasks) result(ctx context.Context, cs *mcp.ClientSession, id string) (*mcp.CallToolResult, error) {
	res, err := mcp.CallCustomMethod[*taskIDParams, *mcp.CallToolResult](ctx, cs, methodTasksResult, &taskIDParams{TaskID: id})
	if err != nil {
		return nil, err
	}
	// The result names its task (MUST); one naming another is refused.
	if rel, ok := res.Meta[relatedTaskKey].(map[string]any); ok && rel["taskId"] != id {
		return nil, errBadTask
	}
	return res, nil
}

const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	relatedTaskKey    = "io.modelcontextprotocol/related-task"
)

// errBadTask: the upstream's task is not one the broker accepts.
var errBadTask = &UpstreamError{Op: "tasks/get", Msg: "invalid task", Err: ErrInvalidResponse}

type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type taskGetResult struct {
	mcp.ResultBase
	taskWire
}

// taskCallParams are a tools/call's params with the task parameter.
type taskCallParams struct {
	mcp.ParamsBase
	Name      string    `json:"name"`
	Arguments any       `json:"arguments,omitempty"`
	Task      taskParam `json:"task"`
}

type taskParam struct {
	TTL int64 `json:"ttl"`
}

// registerTasks adds the task methods and the task parameter's middleware
// to a client.
func registerTasks(c *mcp.Client) error {
	if err := mcp.AddSendingCustomMethod[*taskIDParams, *taskGetResult](c, methodTasksGet); err != nil {
		return err
	}
	if err := mcp.AddSendingCustomMethod[*taskIDParams, *mcp.CallToolResult](c, methodTasksResult); err != nil {
		return err
	}
	c.AddSendingMiddleware(asTask)
	return nil
}

// asTaskKey marks a context whose tools/call is sent as a task.
type asTaskKey struct{}

// asTask adds params.task to a tools/call whose context asks for it.
func asTask(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ttl, ok := ctx.Value(asTaskKey{}).(time.Duration); ok && method == "tools/call" {
			p, pok := req.GetParams().(*mcp.CallToolParams)
			cs, sok := req.GetSession().(*mcp.ClientSession)
			if !pok || !sok {
				return nil, &UpstreamError{Op: "tools/call", Msg: "task call not built", Err: ErrInvalidRequest}
			}
			tp := &taskCallParams{Name: p.Name, Arguments: p.Arguments, Task: taskParam{TTL: ttl.Milliseconds()}}
			tp.Meta = p.Meta
			req = &mcp.ClientRequest[*taskCallParams]{Session: cs, Params: tp}
		}
		return next(ctx, method, req)
	}
}

// tap keeps the response bodies of the exchange under way, for what the
// SDK's types drop. Each body is already bounded by MaxResponseBytes.
type tap struct {
	mu     sync.Mutex
	bodies []tappedBody
}

type tappedBody struct {
	sse bool
	buf *bytes.Buffer
}

// body starts recording one response body of content type ct.
func (t *tap) body(ct string) *bytes.Buffer {
	b := tappedBody{sse: isSSE(ct), buf: new(bytes.Buffer)}
	t.mu.Lock()
	t.bodies = append(t.bodies, b)
	t.mu.Unlock()
	return b.buf
}

// isSSE reports whether a response of content type ct is an SSE stream.
func isSSE(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// write appends p to one of the tap's bodies; an SSE stream may still be
// read after its exchange returned.
func (t *tap) write(to *bytes.Buffer, p []byte) {
	t.mu.Lock()
	to.Write(p)
	t.mu.Unlock()
}

// results are the results of the JSON-RPC responses in the recorded
// bodies, in order; requests, notifications and errors are skipped.
func (t *tap) results() []json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []json.RawMessage
	for _, b := range t.bodies {
		out = append(out, resultsIn(b.buf.Bytes(), b.sse)...)
	}
	return out
}

// resultsIn reads a body: one JSON-RPC message, or an SSE stream of them.
func resultsIn(body []byte, sse bool) []json.RawMessage {
	if !sse {
		if r, ok := resultOf(body); ok {
			return []json.RawMessage{r}
		}
		return nil
	}
	var out []json.RawMessage
	var data []byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, MaxResponseBytes)
	flush := func() {
		if r, ok := resultOf(data); ok {
			out = append(out, r)
		}
		data = data[:0]
	}
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			flush()
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(line[len("data:"):], []byte(" "))...)
		}
	}
	flush()
	return out
}

// resultOf is the result of a JSON-RPC response.
func resultOf(msg []byte) (json.RawMessage, bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	if len(bytes.TrimSpace(msg)) == 0 || json.Unmarshal(msg, &m) != nil || m.Method != nil || len(m.ID) == 0 || len(m.Result) == 0 {
		return nil, false
	}
	return m.Result, true
}

// tapped runs exchange with the session's tap armed and returns the
// results it recorded.
func (s *Session) tapped(exchange func() error) ([]json.RawMessage, error) {
	return tapDuring(s.rec, exchange)
}

func tapDuring(rec *recorder, exchange func() error) ([]json.RawMessage, error) {
	t := &tap{}
	rec.tap.Store(t)
	err := exchange()
	rec.tap.Store(nil)
	return t.results(), err
}

// supportIn reads each tool's execution.taskSupport from tools/list results.
func supportIn(results []json.RawMessage) map[string]TaskSupport {
	out := map[string]TaskSupport{}
	for _, r := range results {
		var page struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport *string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		}
		if json.Unmarshal(r, &page) != nil {
			continue
		}
		for _, t := range page.Tools {
			out[t.Name] = supportOf(t.Execution)
		}
	}
	return out
}

func supportOf(e *struct {
	TaskSupport *string `json:"taskSupport"`
}) TaskSupport {
	if e == nil || e.TaskSupport == nil {
		return TaskForbidden
	}
	switch s := TaskSupport(*e.TaskSupport); s {
	case TaskForbidden, TaskOptional, TaskRequired:
		return s
	}
	return taskUnknown
}

// TaskSupport is how the upstream said tool name must be called, as its
// last tools/list on this session said (TaskForbidden when it did not list
// or did not say).
func (s *Session) TaskSupport(name string) TaskSupport {
	if ts, ok := s.support[name]; ok {
		return ts
	}
	return TaskForbidden
}

// callAsTask calls tool name as a task and waits, within ctx, for its
// result: tasks/get at the server's pace (clamped) until the task settles,
// then tasks/result.
func (s *Session) callAsTask(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	const op = "tools/call"
	var res *mcp.CallToolResult
	results, err := s.tapped(func() error {
		var err error
		res, err = s.cs.CallTool(context.WithValue(ctx, asTaskKey{}, TaskTTL), &mcp.CallToolParams{Name: name, Arguments: args})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(results) != 1 {
		return nil, &UpstreamError{Op: op, Msg: "no single result for the task call", Err: ErrInvalidResponse}
	}
	task, ok := s.tasks.created(results[0])
	if !ok {
		var probe struct {
			Task json.RawMessage `json:"task"`
		}
		if json.Unmarshal(results[0], &probe) == nil && probe.Task == nil {
			// The upstream ran the call plainly (a receiver may): its
			// answer is the result.
			return res, nil
		}
		return nil, &UpstreamError{Op: op, Msg: "invalid task", Err: ErrInvalidResponse}
	}
	// The call's deadline passing while the task exists, whether between
	// polls or during one, leaves it pending for a session told to defer.
	pending := func(err error) error {
		if s.deferTasks && errors.Is(ctx.Err(), context.DeadlineExceeded) && s.leavePending(task) {
			return &UpstreamError{Op: methodTasksGet, Msg: "the task still runs; poll it again", Err: ErrTaskPending}
		}
		return err
	}
	for polls := 0; !task.settled(); polls++ {
		if polls == maxTaskPolls {
			return nil, &UpstreamError{Op: methodTasksGet, Msg: "task still working after the most polls allowed", Err: ErrInvalidResponse}
		}
		t := time.NewTimer(task.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, pending(ctx.Err())
		case <-t.C:
		}
		next, err := s.tasks.get(ctx, s.cs, task.id)
		if err != nil {
			return nil, pending(err)
		}
		task = next
	}
	if task.status == taskCancelled {
		return nil, &UpstreamError{Op: methodTasksGet, Msg: "the upstream cancelled the task", Err: ErrProtocol}
	}
	// completed, failed (the result says how) or input_required (the
	// result's stream carries the request, answered like any).
	if res, err = s.tasks.result(ctx, s.cs, task.id); err != nil {
		return nil, pending(err)
	}
	return res, nil
}
