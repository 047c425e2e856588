package scriptedmodel

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/fluidbox/fluidbox/shared/budget"
)

// Step decides the reply to one request from what the request carried.
type Step func(req Request) Reply

// Reply is what the scripted model answers. A text block comes first, then the tool call,
// as a real model does when it explains before acting.
type Reply struct {
	Text    string
	ToolUse *ToolUse
	// ToolUses are further tool calls in the same message, after ToolUse:
	// a model that calls several tools at once.
	ToolUses []ToolUse
	// StopReason defaults to "tool_use" when there is a tool call and "end_turn" otherwise.
	StopReason string
	// Usage is reported in message_start / message_delta (or the JSON body). The zero value
	// means "estimate": input ≈ body bytes / 4, output ≈ reply bytes / 4, at least 1 each.
	Usage budget.Usage
	// Model overrides the model echoed back (by default, the request's model).
	Model string
	// Error, if set, is answered instead of a message, as an HTTP error in Anthropic's shape.
	Error *APIError
	// StreamError, if set on a streaming reply, is sent as an SSE error event after the
	// first content block starts, and the stream ends there (an upstream failing mid-stream).
	StreamError *APIError
}

// ToolUse is a tool call the scripted model makes.
type ToolUse struct {
	ID    string // default "toolu_scripted_<n>"
	Name  string
	Input map[string]any
}

// APIError is an error in the shape of the Anthropic API:
// {"type":"error","error":{"type":Type,"message":Message}} with HTTP status Status.
type APIError struct {
	Status  int    // e.g. 400, 401, 429, 529
	Type    string // e.g. "invalid_request_error", "authentication_error", "overloaded_error"
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// Respond always answers r.
func Respond(r Reply) Step { return func(Request) Reply { return r } }

// SayText answers with text and stop_reason end_turn.
func SayText(text string) Step { return Respond(Reply{Text: text}) }

// CallTool answers with a call of the named tool (stop_reason tool_use).
func CallTool(name string, input map[string]any) Step {
	return Respond(Reply{ToolUse: &ToolUse{Name: name, Input: input}})
}

// Fail answers with an API error, e.g. Fail(529, "overloaded_error", "Overloaded").
func Fail(status int, errType, message string) Step {
	return Respond(Reply{Error: &APIError{Status: status, Type: errType, Message: message}})
}

// AfterToolResult answers with f applied to the last tool_result of the request's last
// message. A request that carries no tool_result gets a 400 invalid_request_error naming the
// step's expectation, so a test sees at once that the client did not run the tool.
func AfterToolResult(f func(ToolResult) Reply) Step {
	return func(req Request) Reply {
		tr, ok := req.LastToolResult()
		if !ok {
			return Reply{Error: &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error",
				Message: "scriptedmodel: this step expected a tool_result in the last message"}}
		}
		return f(tr)
	}
}

// SayToolResult answers with the last tool_result's content, prefixed by "error: " when the
// client reported the tool as failed (is_error) — handy to make the outcome visible in the
// client's final output.
func SayToolResult() Step {
	return AfterToolResult(func(tr ToolResult) Reply {
		if tr.IsError {
			return Reply{Text: "error: " + tr.Content}
		}
		return Reply{Text: tr.Content}
	})
}

// Sequence is a script of its own, for a Route: each request the route
// answers takes the next of steps, and once they are used up it answers
// with the last again. A subagent's requests, for one, interleave with its
// parent's, so they are scripted apart from the main script.
func Sequence(steps ...Step) Step {
	var mu sync.Mutex
	next := 0
	return func(req Request) Reply {
		mu.Lock()
		i := min(next, len(steps)-1)
		next++
		mu.Unlock()
		return steps[i](req)
	}
}
