package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Request is one request the server received, as recorded and as handed to a Step.
// Treat it as read-only: the server keeps the same values.
type Request struct {
	Method   string
	Path     string
	RawQuery string // e.g. "beta=true", as Claude Code sends
	Header   http.Header

	// The credentials and version headers, copied out for assertions such as "the upstream
	// saw the operator's key, never the session token".
	APIKey           string // x-api-key
	Authorization    string // the Authorization header, as sent
	AnthropicVersion string // anthropic-version
	AnthropicBeta    string // anthropic-beta

	Body []byte // the raw request body

	Model     string
	MaxTokens int64
	Stream    bool
	System    string    // the system prompt; an array of blocks is joined with "\n"
	Messages  []Message // in order; `role: "system"` entries are kept as they came
	Tools     []Tool
	ToolsJSON json.RawMessage // the "tools" array exactly as received (nil if absent)

	// Status is the HTTP status the server answered with; Step is the index of the script
	// step that answered, or -1 (a route, count_tokens, or a rejected request).
	Status int
	Step   int
}

// Message is one entry of the request's messages array.
type Message struct {
	Role    string
	Content []Block // a string content becomes one text block
}

// Block is one content block. Only the fields of its Type are set; Raw has it all.
type Block struct {
	Type string
	Text string // text (and thinking) blocks

	ID    string          // tool_use
	Name  string          // tool_use
	Input json.RawMessage // tool_use

	ToolUseID string // tool_result
	Content   string // tool_result content, text blocks joined with "\n"
	IsError   bool   // tool_result

	Raw json.RawMessage
}

// Tool is one entry of the request's tools array.
type Tool struct {
	Type        string // empty for a custom tool, e.g. "web_search_20250305" for a server tool
	Name        string
	Description string
	InputSchema json.RawMessage
	Raw         json.RawMessage
}

// ToolResult is a tool_result block the client sent back.
type ToolResult struct {
	ToolUseID string
	Content   string
	IsError   bool
}

// Credential returns the key the request authenticated with: x-api-key if set, else the
// token of an "Authorization: Bearer" header (the Anthropic Go SDK v2 sends its API key that
// way). Assert on it, not on APIKey alone, when checking which key reached the upstream.
func (r Request) Credential() string {
	if r.APIKey != "" {
		return r.APIKey
	}
	tok, _ := strings.CutPrefix(r.Authorization, "Bearer ")
	if tok == r.Authorization {
		return ""
	}
	return tok
}

// ToolResults returns the tool_result blocks of the request's last message: the results of
// the tool calls the previous reply asked for. Trailing `role: "system"` entries are skipped:
// Claude Code (2.1.x) appends them after the tool results, e.g. "The user hasn't heard from
// you in a while".
func (r Request) ToolResults() []ToolResult {
	i := len(r.Messages) - 1
	for i >= 0 && r.Messages[i].Role == "system" {
		i--
	}
	if i < 0 {
		return nil
	}
	var out []ToolResult
	for _, b := range r.Messages[i].Content {
		if b.Type == "tool_result" {
			out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: b.Content, IsError: b.IsError})
		}
	}
	return out
}

// LastToolResult returns the last tool_result of the request's last message (trailing
// `role: "system"` entries skipped, as in ToolResults).
func (r Request) LastToolResult() (ToolResult, bool) {
	rs := r.ToolResults()
	if len(rs) == 0 {
		return ToolResult{}, false
	}
	return rs[len(rs)-1], true
}

// LastUserText returns the text blocks of the last user message, joined with "\n".
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		var texts []string
		for _, b := range r.Messages[i].Content {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

// Tool returns the tool of that name offered by the request.
func (r Request) Tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// decodeBody fills the decoded fields of r from its Body. Unknown fields are ignored and
// shapes a real client may send (string or block content, string or block system prompt,
// system-role messages) are all accepted; only a body that is not a JSON object fails.
func (r *Request) decodeBody() error {
	var body struct {
		Model     string          `json:"model"`
		MaxTokens json.Number     `json:"max_tokens"`
		Stream    bool            `json:"stream"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return err
	}
	r.Model, r.Stream = body.Model, body.Stream
	r.MaxTokens, _ = body.MaxTokens.Int64()
	r.System = joinTexts(body.System)
	for _, m := range body.Messages {
		r.Messages = append(r.Messages, Message{Role: m.Role, Content: decodeContent(m.Content)})
	}
	if len(body.Tools) > 0 && !bytes.Equal(body.Tools, []byte("null")) {
		r.ToolsJSON = body.Tools
		var tools []json.RawMessage
		_ = json.Unmarshal(body.Tools, &tools) // not an array: no tools decoded, raw kept
		for _, raw := range tools {
			var t struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			}
			_ = json.Unmarshal(raw, &t)
			r.Tools = append(r.Tools, Tool{Type: t.Type, Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Raw: raw})
		}
	}
	return nil
}

// decodeContent accepts a string (one text block) or an array of blocks.
func decodeContent(raw json.RawMessage) []Block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Block{{Type: "text", Text: s, Raw: raw}}
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	out := make([]Block, 0, len(blocks))
	for _, braw := range blocks {
		var b struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Thinking  string          `json:"thinking"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		_ = json.Unmarshal(braw, &b) // a malformed block keeps only Raw
		blk := Block{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, Input: b.Input,
			ToolUseID: b.ToolUseID, IsError: b.IsError, Raw: braw}
		if b.Type == "thinking" {
			blk.Text = b.Thinking
		}
		if b.Type == "tool_result" {
			blk.Content = joinTexts(b.Content)
		}
		out = append(out, blk)
	}
	return out
}

// joinTexts flattens a string or an array of text blocks into one string.
func joinTexts(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}
