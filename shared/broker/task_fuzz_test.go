package broker

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzTaskOf: whatever an upstream sends as a task-augmented call's answer
// (a JSON body or an SSE stream), what the broker takes from it is a task
// with an id of at most MaxTaskIDBytes printable UTF-8, one of the five
// statuses, and a poll within [minTaskPoll, maxTaskPoll]; nothing panics.
func FuzzTaskOf(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"786512e2","status":"working","pollInterval":5000}}}`,
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"task\":{\"taskId\":\"t\",\"status\":\"completed\"}}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\n data: \"result\":{}}\n\n",
		`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a\nb","status":"paused","pollInterval":-1e308}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"x","status":"working","pollInterval":1e308}}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, sse bool) {
		for _, r := range resultsIn(body, sse) {
			if !json.Valid(r) {
				t.Fatalf("result %q is not JSON", r)
			}
			task, ok := experimentalTasks{}.created(r)
			if !ok {
				continue
			}
			if task.id == "" || len(task.id) > MaxTaskIDBytes || !utf8.ValidString(task.id) || !printable(task.id) {
				t.Fatalf("task id %q let through", task.id)
			}
			switch task.status {
			case taskWorking, taskInputRequired, taskCompleted, taskFailed, taskCancelled:
			default:
				t.Fatalf("status %q let through", task.status)
			}
			if task.poll < minTaskPoll || task.poll > maxTaskPoll {
				t.Fatalf("poll %s out of bounds", task.poll)
			}
		}
	})
}
