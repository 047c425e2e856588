package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// A task that outlives the call's timeout (API Gateway cuts a request at
// 29 s) is left running and polled again on the runner's retry, by another
// request, maybe in another process. A 2025-11-25 task belongs to the MCP
// session that created it (the TypeScript SDK's task store looks tasks up
// by session), and the Go SDK cannot resume a session, so:
//   - the session that created it is not ended (its DELETE is not sent),
//     and its id, protocol revision and the task's id are the TaskHandle
//     the caller keeps;
//   - ResumeTask polls with two JSON-RPC requests of its own (tasks/get,
//     then tasks/result) on that session, through the same guard, the same
//     credential handling, the same body bounds and the same answer checks
//     as every other exchange; EndTask ends the session once the caller
//     recorded the outcome (until then a concurrent poll reads the same
//     result).
//
// A resumed task cannot be given input: input_required ends it as failed.

// ErrTaskPending: the task was created and still runs at the call's
// deadline; Session.PendingTask is its handle. Only a session told to
// (DeferTasks) leaves a task pending; the tool may be running.
var ErrTaskPending = errors.New("broker: the upstream's task still runs")

// TaskHandle is what a pending task is polled again with. Session is the
// upstream's MCP session id and Task its task id: the upstream chose both.
// They are bounded, never part of an error, and are for the call's record
// alone (not the ledger, a log line or the runner).
type TaskHandle struct {
	Session  string `json:"session" dynamodbav:"session"`
	Protocol string `json:"protocol" dynamodbav:"protocol"`
	Task     string `json:"task" dynamodbav:"task"`
}

// MaxSessionIDBytes bounds the session id a handle keeps.
const MaxSessionIDBytes = 1024

// DeferTasks makes the session leave a task still running at its call's
// deadline pending (ErrTaskPending) and keep the session open for it,
// instead of failing the call.
func (s *Session) DeferTasks() { s.deferTasks = true }

// PendingTask is the handle of the task the last CallTool left pending.
func (s *Session) PendingTask() (TaskHandle, bool) {
	if s == nil {
		return TaskHandle{}, false
	}
	return s.pending, s.pending.Task != ""
}

// leavePending keeps the session open for task and records its handle;
// false when its session id is not one a handle may keep.
func (s *Session) leavePending(task Task) bool {
	id := s.cs.ID()
	res := s.cs.InitializeResult()
	if id == "" || len(id) > MaxSessionIDBytes || !printable(id) || res == nil {
		return false
	}
	s.pending = TaskHandle{Session: id, Protocol: res.ProtocolVersion, Task: task.id}
	s.rec.keep.Store(true)
	return true
}

// ResumeTask polls a pending task at the upstream at endpoint for up to
// wait: done is false while it still works. When it ended, the result is
// its CallToolResult (failed: the upstream's error result), held to the
// rules of CallTool. The session stays until EndTask.
func ResumeTask(ctx context.Context, g *egress.Guard, endpoint string, cred seal.Credential, h TaskHandle, wait time.Duration) (res Result, done bool, err error) {
	const op = "tasks/get"
	r, err := newResumer(endpoint, g, cred, h)
	if err != nil {
		return Result{}, false, err
	}
	deadline := time.Now().Add(wait)
	for polls := 0; ; polls++ {
		raw, err := r.send(ctx, methodTasksGet)
		if err != nil {
			return Result{}, false, err
		}
		var w taskWire
		if json.Unmarshal(raw, &w) != nil {
			return Result{}, false, errBadTask
		}
		task, ok := taskOf(w)
		if !ok || task.id != h.Task {
			return Result{}, false, errBadTask
		}
		switch task.status {
		case taskCompleted, taskFailed:
			res, err := r.result(ctx)
			return res, err == nil, err
		case taskCancelled, taskInputRequired:
			return Result{}, false, &UpstreamError{Op: op, Msg: "the upstream cancelled the task, or asked for input a resumed task cannot be given", Err: ErrProtocol}
		}
		if polls == maxTaskPolls || time.Until(deadline) < task.poll {
			return Result{}, false, nil
		}
		t := time.NewTimer(task.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Result{}, false, ctx.Err()
		case <-t.C:
		}
	}
}

// resumer sends a pending task's requests on its session.
type resumer struct {
	endpoint string
	h        TaskHandle
	cred     seal.Credential
	rec      *recorder
	client   *http.Client
}

// newResumer checks the endpoint and credential as Connect does.
func newResumer(endpoint string, g *egress.Guard, cred seal.Credential, h TaskHandle) (*resumer, error) {
	const op = "tasks/get"
	u, err := checkEndpoint(endpoint)
	if err != nil {
		return nil, &UpstreamError{Op: op, Msg: err.Error(), Err: ErrInvalidRequest}
	}
	if err := g.CheckURL(u); err != nil {
		return nil, &UpstreamError{Op: op, Msg: addressRefused, Err: ErrAddressRefused}
	}
	if err := cred.Validate(); err != nil {
		return nil, &UpstreamError{Op: op, Msg: "invalid credential: " + err.Error(), Err: ErrInvalidRequest}
	}
	r := &resumer{endpoint: endpoint, h: h, cred: cred, rec: &recorder{}}
	r.client = &http.Client{
		Transport:     &authTransport{base: transportFor(g), cred: cred, rec: r.rec},
		Timeout:       DefaultHTTPTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return r, nil
}

// send posts one request about the task and returns its result.
func (r *resumer) send(ctx context.Context, method string) (json.RawMessage, error) {
	// Polls of one task may run at once on its session: each request has
	// its own id, a string (a TypeScript server refuses a number past 2^53).
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "fluidbox-" + strconv.FormatUint(rand.Uint64(), 36), "method": method, "params": map[string]string{"taskId": r.h.Task}})
	if err != nil {
		return nil, &UpstreamError{Op: method, Msg: "request not encodable", Err: ErrInvalidRequest}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &UpstreamError{Op: method, Msg: "request not built", Err: ErrInvalidRequest}
	}
	r.headers(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	r.rec.reset()
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, classify(ctx, method, err, r.rec)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, classify(ctx, method, errors.New("task request failed"), r.rec)
	}
	ct := resp.Header.Get("Content-Type")
	results := resultsIn(raw, isSSE(ct))
	if len(results) != 1 {
		// A JSON-RPC error (the task or the session is gone) or no answer.
		return nil, &UpstreamError{Op: method, Status: resp.StatusCode, Msg: "no result for the task", Err: ErrProtocol}
	}
	return results[0], nil
}

// result reads tasks/result and holds it to CallTool's rules.
func (r *resumer) result(ctx context.Context) (Result, error) {
	raw, err := r.send(ctx, methodTasksResult)
	if err != nil {
		return Result{}, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return Result{}, &UpstreamError{Op: methodTasksResult, Msg: "result not decodable", Err: ErrInvalidResponse}
	}
	if rel, ok := res.Meta[relatedTaskKey].(map[string]any); ok && rel["taskId"] != r.h.Task {
		return Result{}, errBadTask
	}
	return checkedResult(methodTasksResult, &res, r.cred)
}

// EndTask ends a pending task's session at the upstream (best effort,
// within 5 s).
func EndTask(ctx context.Context, g *egress.Guard, endpoint string, cred seal.Credential, h TaskHandle) {
	r, err := newResumer(endpoint, g, cred, h)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.endpoint, nil)
	if err != nil {
		return
	}
	r.headers(req)
	if resp, err := r.client.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

func (r *resumer) headers(req *http.Request) {
	req.Header.Set("Mcp-Session-Id", r.h.Session)
	req.Header.Set("MCP-Protocol-Version", r.h.Protocol)
}
