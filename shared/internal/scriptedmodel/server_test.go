package scriptedmodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// post sends body to path with the headers a client sends and returns status and body.
func post(t *testing.T, url, path, apiKey, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	if apiKey != "" {
		req.Header.Set("x-api-key", apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

type sseEvent struct {
	Event string
	Data  map[string]any
}

// parseSSE is a minimal, independent SSE reader for the tests.
func parseSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("data line %q: %v", line, err)
			}
			if cur.Data["type"] != cur.Event {
				t.Errorf("event %q carries type %v", cur.Event, cur.Data["type"])
			}
		}
	}
	return out
}

func TestRootProbe(t *testing.T) {
	t.Parallel()
	s := New()
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL() = %q, want loopback", s.URL())
	}
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, s.URL()+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s / = %d, want 200", method, resp.StatusCode)
		}
	}
	if got := len(s.Requests()); got != 0 {
		t.Errorf("probes recorded as %d requests, want 0", got)
	}
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	s := New(Respond(Reply{Text: "hello", ToolUse: &ToolUse{ID: "toolu_1", Name: "Bash", Input: map[string]any{"command": "ls"}},
		Usage: budget.Usage{InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: 3, CacheCreationInputTokens: 4}}))
	defer s.Close()
	status, hdr, body := post(t, s.URL(), "/v1/messages?beta=true", "sk-test",
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("POST = %d %s %s", status, hdr.Get("Content-Type"), body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id": "msg_scripted_0001", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": []any{
			map[string]any{"type": "text", "text": "hello"},
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "ls"}},
		},
		"stop_reason": "tool_use", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10.0, "output_tokens": 20.0, "cache_read_input_tokens": 3.0, "cache_creation_input_tokens": 4.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response mismatch (-want +got):\n%s", diff)
	}
	if u, err := budget.UsageFromBody(body); err != nil || u != (budget.Usage{InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: 3, CacheCreationInputTokens: 4}) {
		t.Errorf("budget.UsageFromBody = %+v, %v", u, err)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("Requests() = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if r.APIKey != "sk-test" || r.AnthropicVersion != "2023-06-01" || r.RawQuery != "beta=true" || r.Model != "claude-sonnet-4-5" ||
		r.MaxTokens != 1024 || r.Stream || r.Status != 200 || r.Step != 0 || r.LastUserText() != "hi" {
		t.Errorf("recorded %+v", r)
	}
}

func TestStreamingToolUse(t *testing.T) {
	t.Parallel()
	input := map[string]any{"command": "echo 'héllo wörld' > /tmp/x && cat /tmp/x", "timeout": 5.0}
	s := New(Respond(Reply{Text: "Let me run that. ✓ unicode-safe chunks", ToolUse: &ToolUse{Name: "Bash", Input: input},
		Usage: budget.Usage{InputTokens: 472, OutputTokens: 89, CacheReadInputTokens: 100}}))
	defer s.Close()
	status, hdr, body := post(t, s.URL(), "/v1/messages", "", `{"model":"claude-opus-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"go"}]}`)
	if status != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST = %d %s", status, hdr.Get("Content-Type"))
	}
	events := parseSSE(t, body)
	var types []string
	var text, partial strings.Builder
	for _, ev := range events {
		types = append(types, ev.Event)
		if ev.Event == "content_block_delta" {
			d := ev.Data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				text.WriteString(d["text"].(string))
			case "input_json_delta":
				partial.WriteString(d["partial_json"].(string))
			}
		}
	}
	// The order the API documents: message_start, blocks (start, deltas, stop), message_delta, message_stop.
	compact := []string{}
	for _, ty := range types {
		if ty != "content_block_delta" || compact[len(compact)-1] != "content_block_delta" {
			compact = append(compact, ty)
		}
	}
	wantOrder := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(wantOrder, compact); diff != "" {
		t.Errorf("event order mismatch (-want +got):\n%s", diff)
	}
	if text.String() != "Let me run that. ✓ unicode-safe chunks" {
		t.Errorf("text deltas joined = %q", text.String())
	}
	var gotInput map[string]any
	if err := json.Unmarshal([]byte(partial.String()), &gotInput); err != nil || !cmp.Equal(input, gotInput) {
		t.Errorf("input_json_delta joined = %s (%v), want %v", partial.String(), err, input)
	}
	start := events[0].Data["message"].(map[string]any)
	if start["model"] != "claude-opus-4-5" || start["usage"].(map[string]any)["output_tokens"] != 1.0 {
		t.Errorf("message_start = %v", start)
	}
	delta := events[len(events)-2].Data
	if delta["delta"].(map[string]any)["stop_reason"] != "tool_use" {
		t.Errorf("message_delta = %v", delta)
	}

	// What the model proxy will do with the same bytes.
	su := budget.NewStreamUsage()
	su.Write(body)
	u, ok := su.Usage()
	if want := (budget.Usage{InputTokens: 472, OutputTokens: 89, CacheReadInputTokens: 100}); !ok || u != want || !su.Complete() || su.Model() != "claude-opus-4-5" {
		t.Errorf("StreamUsage = %+v, %v, complete %v, model %q, want %+v", u, ok, su.Complete(), su.Model(), want)
	}
}

func TestStreamError(t *testing.T) {
	t.Parallel()
	s := New(Respond(Reply{Text: "partial", StreamError: &APIError{Type: "overloaded_error", Message: "Overloaded"}}))
	defer s.Close()
	_, _, body := post(t, s.URL(), "/v1/messages", "", `{"model":"m","max_tokens":5,"stream":true,"messages":[]}`)
	events := parseSSE(t, body)
	if last := events[len(events)-1]; last.Event != "error" {
		t.Errorf("last event = %v, want error", last)
	}
	su := budget.NewStreamUsage()
	su.Write(body)
	if _, ok := su.Usage(); !ok || su.Complete() {
		t.Errorf("StreamUsage after a mid-stream error: ok %v complete %v, want ok, incomplete", ok, su.Complete())
	}
}

func TestDecodesWhatRealClientsSend(t *testing.T) {
	t.Parallel()
	s := New(SayText("ok"))
	defer s.Close()
	body := `{
	  "model": "claude-sonnet-4-5-20250929", "max_tokens": 32000, "stream": false,
	  "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Be brief."}],
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}, {"type": "text", "text": "list files"}]},
	    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}]},
	    {"role": "system", "content": "a system entry inside messages"},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_8", "content": "first"},
	      {"type": "tool_result", "tool_use_id": "toolu_9", "is_error": true, "content": [{"type": "text", "text": "denied by policy"}, {"type": "image", "source": {}}]},
	      {"type": "text", "text": "continue"}
	    ]}
	  ],
	  "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}, "extra": 1}, {"type": "web_search_20250305", "name": "web_search"}],
	  "metadata": {"user_id": "u"}, "temperature": 1, "unknown_future_field": [1, 2]
	}`
	if status, _, b := post(t, s.URL(), "/v1/messages", "", body); status != 200 {
		t.Fatalf("POST = %d %s", status, b)
	}
	r := s.Requests()[0]
	if r.System != "You are Claude Code.\nBe brief." {
		t.Errorf("System = %q", r.System)
	}
	type msg struct {
		Role  string
		Types []string
	}
	var got []msg
	for _, m := range r.Messages {
		mm := msg{Role: m.Role}
		for _, b := range m.Content {
			mm.Types = append(mm.Types, b.Type)
		}
		got = append(got, mm)
	}
	want := []msg{{"user", []string{"text", "text"}}, {"assistant", []string{"thinking", "tool_use"}}, {"system", []string{"text"}},
		{"user", []string{"tool_result", "tool_result", "text"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	wantResults := []ToolResult{{ToolUseID: "toolu_8", Content: "first"}, {ToolUseID: "toolu_9", Content: "denied by policy", IsError: true}}
	if diff := cmp.Diff(wantResults, r.ToolResults()); diff != "" {
		t.Errorf("ToolResults() mismatch (-want +got):\n%s", diff)
	}
	if tr, ok := r.LastToolResult(); !ok || !tr.IsError || tr.Content != "denied by policy" {
		t.Errorf("LastToolResult() = %+v, %v", tr, ok)
	}
	if got := r.LastUserText(); got != "continue" {
		t.Errorf("LastUserText() = %q", got)
	}
	if tu := r.Messages[1].Content[1]; tu.ID != "toolu_9" || tu.Name != "Bash" || string(tu.Input) != `{"command": "ls"}` {
		t.Errorf("tool_use block = %+v", tu)
	}
	wantTools := []Tool{{Name: "Bash", Description: "Run a command", InputSchema: json.RawMessage(`{"type": "object"}`)}, {Type: "web_search_20250305", Name: "web_search"}}
	if diff := cmp.Diff(wantTools, r.Tools, cmpopts.IgnoreFields(Tool{}, "Raw")); diff != "" {
		t.Errorf("Tools mismatch (-want +got):\n%s", diff)
	}
	if _, ok := r.Tool("Bash"); !ok || !json.Valid(r.ToolsJSON) {
		t.Errorf("Tool(Bash) missing or ToolsJSON invalid: %s", r.ToolsJSON)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s := New(SayText("first"), AfterToolResult(func(tr ToolResult) Reply { return Reply{Text: tr.Content} }), Fail(529, "overloaded_error", "Overloaded"))
	defer s.Close()
	s.RequireAPIKey("sk-operator")
	const msg = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

	checkErr := func(name string, status int, body []byte, wantStatus int, wantType string) {
		t.Helper()
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || status != wantStatus || e.Type != "error" || e.Error.Type != wantType || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with an Anthropic error of type %s", name, status, body, wantStatus, wantType)
		}
	}
	status, _, body := post(t, s.URL(), "/v1/messages", "sk-session-token", msg)
	checkErr("wrong key", status, body, 401, "authentication_error")
	status, _, body = post(t, s.URL(), "/v1/messages", "", msg)
	checkErr("no key", status, body, 401, "authentication_error")

	// Rejected requests do not use up a step: the right key now gets step 0.
	if status, _, body := post(t, s.URL(), "/v1/messages", "sk-operator", msg); status != 200 || !strings.Contains(string(body), "first") {
		t.Errorf("right key: %d %s", status, body)
	}
	// A bearer token is accepted too.
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(msg))
	req.Header.Set("Authorization", "Bearer sk-operator")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	checkErr("step expecting a tool_result", resp.StatusCode, body, 400, "invalid_request_error")

	status, _, body = post(t, s.URL(), "/v1/messages", "sk-operator", msg)
	checkErr("scripted failure", status, body, 529, "overloaded_error")
	status, _, body = post(t, s.URL(), "/v1/messages", "sk-operator", msg)
	checkErr("script exhausted", status, body, 400, "invalid_request_error")
	status, _, body = post(t, s.URL(), "/v1/messages", "sk-operator", `{not json`)
	checkErr("bad json", status, body, 400, "invalid_request_error")
	status, _, body = post(t, s.URL(), "/v1/complete", "sk-operator", msg)
	checkErr("unknown path", status, body, 404, "not_found_error")

	var got []string
	for _, r := range s.Requests() {
		got = append(got, fmt.Sprintf("%s %d step=%d key=%q", r.Path, r.Status, r.Step, r.APIKey))
	}
	want := []string{
		`/v1/messages 401 step=-1 key="sk-session-token"`,
		`/v1/messages 401 step=-1 key=""`,
		`/v1/messages 200 step=0 key="sk-operator"`,
		`/v1/messages 400 step=1 key=""`,
		`/v1/messages 529 step=2 key="sk-operator"`,
		`/v1/messages 400 step=-1 key="sk-operator"`,
		`/v1/messages 400 step=-1 key="sk-operator"`,
		`/v1/complete 404 step=-1 key="sk-operator"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded requests mismatch (-want +got):\n%s", diff)
	}
}

func TestRouteAndCountTokens(t *testing.T) {
	t.Parallel()
	s := New(SayText("main"))
	defer s.Close()
	s.Route(func(r Request) bool { return len(r.Tools) == 0 && strings.Contains(r.System, "title") }, SayText("A title"))
	_, _, b := post(t, s.URL(), "/v1/messages", "", `{"model":"claude-haiku-4-5","system":"write a title","messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(string(b), "A title") {
		t.Errorf("routed reply = %s", b)
	}
	_, _, b = post(t, s.URL(), "/v1/messages", "", `{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(string(b), "main") || s.Remaining() != 0 {
		t.Errorf("script reply = %s, remaining %d", b, s.Remaining())
	}
	status, _, b := post(t, s.URL(), "/v1/messages/count_tokens", "", `{"model":"m","messages":[{"role":"user","content":"hello there"}]}`)
	var ct struct {
		InputTokens int64 `json:"input_tokens"`
	}
	if err := json.Unmarshal(b, &ct); status != 200 || err != nil || ct.InputTokens <= 0 {
		t.Errorf("count_tokens = %d %s", status, b)
	}
}

// TestConcurrent: every step answers exactly one request when clients race (run with -race).
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const n = 50
	var steps []Step
	for i := range n {
		steps = append(steps, SayText(fmt.Sprintf("reply-%d", i)))
	}
	s := New(steps...)
	defer s.Close()
	var wg sync.WaitGroup
	replies := make(chan string, n)
	for range n {
		wg.Go(func() {
			_, _, b := post(t, s.URL(), "/v1/messages", "", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
			su := budget.NewStreamUsage()
			su.Write(b)
			if !su.Complete() {
				t.Errorf("stream incomplete: %s", b)
			}
			i := bytes.Index(b, []byte("reply-"))
			if i < 0 || i+8 > len(b) {
				t.Errorf("no reply text in %s", b)
				return
			}
			replies <- string(b[i : i+8])
		})
	}
	wg.Wait()
	close(replies)
	seen := map[string]bool{}
	for r := range replies {
		seen[strings.Trim(r, `"}`)] = true
	}
	if len(seen) != n || s.Remaining() != 0 || len(s.Requests()) != n {
		t.Errorf("distinct replies %d, remaining %d, requests %d; want %d, 0, %d", len(seen), s.Remaining(), len(s.Requests()), n, n)
	}
}

func TestChunks(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "héllo wörld ✓✓✓✓✓✓", strings.Repeat("🙂", 9), "\xff\xfe broken utf8"} {
		got := chunks(s, 4)
		if strings.Join(got, "") != s {
			t.Errorf("chunks(%q) = %q: does not rejoin", s, got)
		}
		for _, c := range got {
			if len(c) > 4 && len([]rune(c)) > 1 {
				t.Errorf("chunks(%q) has %q, over 4 bytes", s, c)
			}
		}
	}
}

// Claude Code 2.1.x appends role:"system" entries after the tool results of a turn;
// AfterToolResult must still see the results.
func TestToolResultsSkipTrailingSystem(t *testing.T) {
	t.Parallel()
	s := New(AfterToolResult(func(tr ToolResult) Reply { return Reply{Text: "saw " + tr.ToolUseID} }))
	defer s.Close()
	body := `{"model": "claude-opus-5-5", "max_tokens": 64, "messages": [
	  {"role": "user", "content": "go"},
	  {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
	  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
	  {"role": "system", "content": "The user hasn't heard from you in a while."}
	]}`
	if status, _, b := post(t, s.URL(), "/v1/messages", "", body); status != 200 || !strings.Contains(string(b), "saw toolu_1") {
		t.Fatalf("POST = %d %s, want 200 with the step's answer to toolu_1", status, b)
	}
	if tr, ok := s.Requests()[0].LastToolResult(); !ok || tr.ToolUseID != "toolu_1" || tr.Content != "a.txt" {
		t.Errorf("LastToolResult() = %+v, %v; want toolu_1 a.txt", tr, ok)
	}
}
