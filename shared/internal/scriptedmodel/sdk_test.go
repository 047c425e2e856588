package scriptedmodel

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/fluidbox/fluidbox/shared/budget"
)

// These tests point the official Anthropic Go SDK at the scripted model: if the SDK can
// decode what the server sends, so can the proxy's clients.

func sdkClient(s *Server, key string) *anthropic.Client {
	c := anthropic.NewClient(option.WithBaseURL(s.URL()), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

func TestSDKNonStreaming(t *testing.T) {
	t.Parallel()
	s := New(Respond(Reply{Text: "Hello from the script", Usage: budget.Usage{InputTokens: 11, OutputTokens: 7, CacheReadInputTokens: 5, CacheCreationInputTokens: 2}}))
	defer s.Close()
	s.RequireAPIKey("sk-operator")
	msg, err := sdkClient(s, "sk-operator").Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 256, System: []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	if err != nil {
		t.Fatalf("Messages.New = %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from the script" || msg.StopReason != anthropic.StopReasonEndTurn ||
		msg.Model != anthropic.ModelClaudeSonnet4_5 {
		t.Errorf("Messages.New = %+v", msg)
	}
	if u := msg.Usage; u.InputTokens != 11 || u.OutputTokens != 7 || u.CacheReadInputTokens != 5 || u.CacheCreationInputTokens != 2 {
		t.Errorf("Usage = %+v", u)
	}
	r := s.Requests()[0]
	// anthropic-sdk-go v2 sends its API key as "Authorization: Bearer", not x-api-key.
	if r.Credential() != "sk-operator" || r.Authorization != "Bearer sk-operator" || r.AnthropicVersion == "" || r.System != "be brief" || r.MaxTokens != 256 || r.Stream {
		t.Errorf("recorded: credential %q version %q system %q max %d stream %v", r.Credential(), r.AnthropicVersion, r.System, r.MaxTokens, r.Stream)
	}

	// The wrong key gets the SDK's typed authentication error.
	_, err = sdkClient(s, "sk-session").Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 1,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	if apiErr, ok := err.(*anthropic.Error); !ok || apiErr.StatusCode != 401 {
		t.Errorf("wrong key: err = %v, want a 401 *anthropic.Error", err)
	}
}

func TestSDKStreaming(t *testing.T) {
	t.Parallel()
	s := New(Respond(Reply{Text: "A streamed answer, long enough to take several text_delta events.",
		Usage: budget.Usage{InputTokens: 30, OutputTokens: 12, CacheReadInputTokens: 1}}))
	defer s.Close()
	stream := sdkClient(s, "k").Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: anthropic.ModelClaudeHaiku4_5, MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("stream please"))},
	})
	var acc anthropic.Message
	deltas := 0
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate = %v", err)
		}
		if _, ok := ev.AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			deltas++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream = %v", err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "A streamed answer, long enough to take several text_delta events." || deltas < 2 {
		t.Errorf("accumulated %+v in %d deltas", acc.Content, deltas)
	}
	if acc.StopReason != anthropic.StopReasonEndTurn || acc.Usage.InputTokens != 30 || acc.Usage.OutputTokens != 12 || acc.Usage.CacheReadInputTokens != 1 {
		t.Errorf("stop %q usage %+v", acc.StopReason, acc.Usage)
	}
	if r := s.Requests()[0]; !r.Stream || r.Model != anthropic.ModelClaudeHaiku4_5 {
		t.Errorf("recorded stream %v model %q", r.Stream, r.Model)
	}
}

// TestSDKToolRoundTrip: the model calls a tool, the client runs it and sends the result, and
// the next step answers from that result — streaming for the call, non-streaming for the rest.
func TestSDKToolRoundTrip(t *testing.T) {
	t.Parallel()
	s := New(
		Respond(Reply{Text: "I'll check.", ToolUse: &ToolUse{Name: "get_weather", Input: map[string]any{"location": "San Francisco, CA"}}}),
		AfterToolResult(func(tr ToolResult) Reply { return Reply{Text: "The tool said: " + tr.Content} }),
	)
	defer s.Close()
	client := sdkClient(s, "k")
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name: "get_weather", Description: anthropic.String("Weather at a place"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"location": map[string]any{"type": "string"}}, Required: []string{"location"}},
	}}}
	messages := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in SF?"))}

	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: anthropic.ModelClaudeOpus4_5, MaxTokens: 512, Tools: tools, Messages: messages})
	var first anthropic.Message
	for stream.Next() {
		if err := first.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate = %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream = %v", err)
	}
	if first.StopReason != anthropic.StopReasonToolUse || len(first.Content) != 2 {
		t.Fatalf("first reply: stop %q content %+v", first.StopReason, first.Content)
	}
	tu := first.Content[1].AsToolUse()
	if tu.Name != "get_weather" || string(tu.Input) != `{"location":"San Francisco, CA"}` || tu.ID == "" {
		t.Fatalf("tool_use = %+v (input %s)", tu, tu.Input)
	}

	messages = append(messages, first.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(tu.ID, "68°F, sunny", false)))
	second, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.ModelClaudeOpus4_5, MaxTokens: 512, Tools: tools, Messages: messages})
	if err != nil {
		t.Fatalf("second Messages.New = %v", err)
	}
	if len(second.Content) != 1 || second.Content[0].Text != "The tool said: 68°F, sunny" {
		t.Errorf("second reply = %+v", second.Content)
	}

	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("Requests() = %d, want 2", len(reqs))
	}
	if tool, ok := reqs[0].Tool("get_weather"); !ok || !strings.Contains(string(tool.InputSchema), `"location"`) {
		t.Errorf("first request tools = %s", reqs[0].ToolsJSON)
	}
	tr, ok := reqs[1].LastToolResult()
	if !ok || tr.ToolUseID != tu.ID || tr.Content != "68°F, sunny" || tr.IsError {
		t.Errorf("second request LastToolResult() = %+v, %v", tr, ok)
	}
	// The assistant turn the SDK replayed carries our tool_use back.
	if got := reqs[1].Messages[1]; got.Role != "assistant" || len(got.Content) != 2 || got.Content[1].ID != tu.ID {
		t.Errorf("replayed assistant turn = %+v", got)
	}
}

// TestSDKParallelToolUses: one message with several tool_use blocks, in
// order, streamed and not, as a model that calls tools in parallel sends it.
func TestSDKParallelToolUses(t *testing.T) {
	t.Parallel()
	reply := Reply{Text: "three at once", ToolUse: &ToolUse{ID: "toolu_a", Name: "Read", Input: map[string]any{"file_path": "/a"}},
		ToolUses: []ToolUse{{ID: "toolu_b", Name: "Bash", Input: map[string]any{"command": "ls"}}, {Name: "Glob", Input: map[string]any{"pattern": "*"}}}}
	s := New(Respond(reply), Respond(reply))
	defer s.Close()
	params := anthropic.MessageNewParams{Model: anthropic.ModelClaudeHaiku4_5, MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("go"))}}
	stream := sdkClient(s, "k").Messages.NewStreaming(context.Background(), params)
	var streamed anthropic.Message
	for stream.Next() {
		if err := streamed.Accumulate(stream.Current()); err != nil {
			t.Fatalf("Accumulate = %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream = %v", err)
	}
	plain, err := sdkClient(s, "k").Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	for name, msg := range map[string]*anthropic.Message{"streamed": &streamed, "non-streaming": plain} {
		var got []string
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				got = append(got, b.Name+":"+string(b.Input))
			}
		}
		want := []string{`Read:{"file_path":"/a"}`, `Bash:{"command":"ls"}`, `Glob:{"pattern":"*"}`}
		if strings.Join(got, " ") != strings.Join(want, " ") || msg.StopReason != anthropic.StopReasonToolUse || msg.Content[0].Text != "three at once" {
			t.Errorf("%s: tool uses %v, stop %q; want %v and tool_use", name, got, msg.StopReason, want)
		}
		if id := msg.Content[3].ID; !strings.HasPrefix(id, "toolu_scripted_") || !strings.HasSuffix(id, "_2") {
			t.Errorf("%s: the third call's default id = %q", name, id)
		}
	}
}
