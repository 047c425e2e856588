package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/budget"
)

// toolBlock is one tool_use block with its input encoded.
type toolBlock struct {
	ToolUse
	input []byte
}

// message is a reply rendered for the wire.
type message struct {
	id, model  string
	text       string
	tools      []toolBlock
	stopReason string
	usage      budget.Usage
}

func (s *Server) build(req Request, r Reply) message {
	n := s.nextSeq()
	m := message{id: fmt.Sprintf("msg_scripted_%04d", n), model: r.Model, text: r.Text, stopReason: r.StopReason, usage: r.Usage}
	if m.model == "" {
		m.model = req.Model
	}
	if m.model == "" {
		m.model = "claude-scripted"
	}
	uses := r.ToolUses
	if r.ToolUse != nil {
		uses = append([]ToolUse{*r.ToolUse}, uses...)
	}
	outBytes := len(m.text)
	for i, tu := range uses {
		if tu.ID == "" {
			tu.ID = fmt.Sprintf("toolu_scripted_%04d", n)
			if i > 0 {
				tu.ID += fmt.Sprintf("_%d", i)
			}
		}
		in := tu.Input
		if in == nil {
			in = map[string]any{}
		}
		b, err := json.Marshal(in)
		if err != nil {
			b = []byte("{}")
		}
		m.tools = append(m.tools, toolBlock{ToolUse: tu, input: b})
		outBytes += len(b)
	}
	if m.stopReason == "" {
		m.stopReason = "end_turn"
		if len(m.tools) > 0 {
			m.stopReason = "tool_use"
		}
	}
	if m.usage == (budget.Usage{}) {
		m.usage = budget.Usage{
			InputTokens:  estimateTokens(len(req.Body)),
			OutputTokens: estimateTokens(outBytes),
		}
	}
	return m
}

// estimateTokens is a deterministic stand-in for a tokenizer: about four bytes a token.
func estimateTokens(bytes int) int64 { return int64(max(1, (bytes+3)/4)) }

func (m message) contentBlocks() []any {
	blocks := []any{}
	if m.text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": m.text})
	}
	for _, t := range m.tools {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": t.ID, "name": t.Name, "input": json.RawMessage(t.input)})
	}
	return blocks
}

func (m message) usageJSON() map[string]any {
	return map[string]any{
		"input_tokens":                m.usage.InputTokens,
		"output_tokens":               m.usage.OutputTokens,
		"cache_read_input_tokens":     m.usage.CacheReadInputTokens,
		"cache_creation_input_tokens": m.usage.CacheCreationInputTokens,
	}
}

// body is the non-streaming response.
func (m message) body() map[string]any {
	return map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": m.contentBlocks(), "stop_reason": m.stopReason, "stop_sequence": nil,
		"usage": m.usageJSON(),
	}
}

// writeStream sends the reply as the Messages API's server-sent events: message_start (with
// input usage and output_tokens 1), a ping, per block content_block_start / _delta... / _stop,
// message_delta (stop_reason and cumulative usage), message_stop.
func writeStream(w http.ResponseWriter, m message, streamErr *APIError) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", "req_scripted")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}

	startUsage := m.usageJSON()
	startUsage["output_tokens"] = 1
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": startUsage,
	}})
	send("ping", map[string]any{"type": "ping"})

	index := 0
	failed := func() bool {
		if streamErr == nil {
			return false
		}
		send("error", map[string]any{"type": "error", "error": map[string]any{"type": streamErr.Type, "message": streamErr.Message}})
		return true
	}
	if m.text != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		if failed() {
			return
		}
		for _, chunk := range chunks(m.text, 16) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": chunk}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, t := range m.tools {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{
			"type": "tool_use", "id": t.ID, "name": t.Name, "input": map[string]any{}}})
		if m.text == "" && i == 0 && failed() {
			return
		}
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, chunk := range chunks(string(t.input), 16) {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": chunk}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if m.text == "" && len(m.tools) == 0 && failed() {
		return
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": m.stopReason, "stop_sequence": nil},
		"usage": m.usageJSON()})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// chunks splits s into pieces of at most n bytes on rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == 0 { // a rune longer than n: take it whole
			_, end = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}
