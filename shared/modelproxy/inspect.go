package modelproxy

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/fluidbox/fluidbox/shared/capability"
)

// The inspector reads a Messages API request as untrusted input. Its rule
// is the gate's: what it does not understand is refused, never forwarded.
// Every object it reads has an allowlist of members; the request's own
// bytes are forwarded only when every member of every object on the way to
// a tool or a content block was read and accepted (free text, schemas and
// tool inputs are opaque values that the API only reads as data). Duplicate
// member names are refused anywhere in the body: a JSON reader that keeps
// the first of two "tools" and one that keeps the last would judge
// different requests.

// Reason says why a model request was refused. Reasons are persisted (the
// model.refused event) and on the wire: never rename one.
type Reason string

// Reasons of a refusal.
const (
	ReasonMalformed Reason = "malformed"  // not JSON, a duplicate member, a wrong type
	ReasonField     Reason = "field"      // a member outside the allowlist
	ReasonToolType  Reason = "tool_type"  // a tool type outside the allowlist
	ReasonBlockType Reason = "block_type" // a content block type outside the allowlist
	ReasonSource    Reason = "source"     // a file_id or unknown image/document source
	ReasonBeta      Reason = "beta"       // an anthropic-beta value outside the allowlist
	ReasonQuery     Reason = "query"      // a query string other than beta=true
	ReasonConnector Reason = "connector"  // mcp_servers / mcp_toolset
	ReasonContainer Reason = "container"  // container
	ReasonGate      Reason = "gate"       // a server tool or URL source the gate did not allow
	ReasonUnpriced  Reason = "unpriced"   // something the price table cannot price
	ReasonBudget    Reason = "budget"     // not even the floor of max_tokens fits
	ReasonRun       Reason = "run"        // the run has ended or is unknown
)

// Refusal is a request the proxy will not forward. Message says what to
// change; it may quote a member name or a type, never a value.
type Refusal struct {
	Status  int
	Type    string // Anthropic's error type
	Reason  Reason
	Message string
	Tool    string // the server tool, for gate refusals
	Stage   string // the gate stage that denied
	Source  string // the gate source that denied
	// Needed and Available are set for a budget refusal (micro-USD).
	Needed, Available int64
}

func refuse(reason Reason, format string, a ...any) *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Type: "invalid_request_error", Reason: reason,
		Message: "fluidbox: " + fmt.Sprintf(format, a...)}
}

// Server-tool limits fluidbox imposes when a request sets none, so that
// every request has a bound before it is admitted.
const (
	DefaultMaxUses          = 5
	DefaultMaxContentTokens = 50_000
)

// ServerTool is one server tool a request offers, as the gate judges it.
type ServerTool struct {
	// Tool is its name in the anthropic-server-tools bundle.
	Tool string
	// Input is the tool's definition as forwarded (limits imposed), decoded
	// with UseNumber for the gate.
	Input any
	// MaxUses bounds how often it may run; MaxContentTokens bounds what
	// one web fetch brings in (0 for the others).
	MaxUses, MaxContentTokens int64

	index int // in tools
}

// Inspection is what the proxy learned from a request it understood.
type Inspection struct {
	Model     string
	MaxTokens int64
	Stream    bool
	// ThinkingBudget is thinking.budget_tokens, or 0.
	ThinkingBudget int64
	ServerTools    []ServerTool
	// URLSources are the URLs of URL-sourced images and documents, which
	// the API fetches; each is judged as anthropic__web_fetch {"url"}.
	URLSources []string
	// Cache1h: some cache_control asks for the 1-hour TTL.
	Cache1h bool
	// Documents: a PDF or URL source, whose token count the body's bytes
	// do not bound (a page renders as an image).
	Documents bool
	// InferenceGeo is "" (default), "global" or "us".
	InferenceGeo string

	top     map[string]jsontext.Value
	tools   []jsontext.Value
	changed bool
}

// Offered returns the names of the server tools offered, in order, each once.
func (in *Inspection) Offered() []string {
	var out []string
	for _, st := range in.ServerTools {
		if !slices.Contains(out, st.Tool) {
			out = append(out, st.Tool)
		}
	}
	return out
}

// SetMaxTokens lowers max_tokens in the forwarded body.
func (in *Inspection) SetMaxTokens(n int64) {
	in.MaxTokens = n
	in.top["max_tokens"] = jsontext.Value(strconv.FormatInt(n, 10))
	in.changed = true
}

// Body returns what to forward: the request's own bytes, or, when fluidbox
// imposed a limit or lowered max_tokens, the request re-encoded from what
// was read.
func (in *Inspection) Body(orig []byte) ([]byte, error) {
	if !in.changed {
		return orig, nil
	}
	if in.tools != nil {
		b, err := json.Marshal(in.tools)
		if err != nil {
			return nil, err
		}
		in.top["tools"] = b
	}
	return json.Marshal(in.top, json.Deterministic(true))
}

var strict = json.JoinOptions(json.RejectUnknownMembers(true))

// topFields is the allowlist of the request's top-level members, each with
// its reader. mcp_servers and container are refused by name below.
var topFields = map[string]func(in *Inspection, v jsontext.Value) *Refusal{
	"model":              readModel,
	"max_tokens":         readMaxTokens,
	"messages":           readMessages,
	"system":             readSystem,
	"metadata":           readMetadata,
	"stop_sequences":     readStrings("stop_sequences"),
	"stream":             readStream,
	"temperature":        readNumber("temperature"),
	"top_p":              readNumber("top_p"),
	"top_k":              readNumber("top_k"),
	"tools":              readTools,
	"tool_choice":        readToolChoice,
	"thinking":           readThinking,
	"context_management": readContextManagement,
	"output_config":      readOutputConfig,
	"output_format":      readObject("output_format"),
	"service_tier":       readEnum("service_tier", "auto", "standard_only"),
	"inference_geo":      readInferenceGeo,
	"speed":              readEnum("speed", "standard"),
}

// TopFields returns the allowlisted top-level members, sorted.
func TopFields() []string {
	out := make([]string, 0, len(topFields))
	for k := range topFields {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// allowedBetas are the anthropic-beta values that neither widen what a
// request can reach nor change its price beyond what the proxy prices.
var allowedBetas = map[string]bool{
	"claude-code-20250219":                     true, // Claude Code's own prompt shaping
	"interleaved-thinking-2025-05-14":          true, // thinking between tool calls; output within max_tokens
	"context-management-2025-06-27":            true, // only the clear_* edits are admitted
	"per-turn-control-2026-07-01":              true, // output_config on a message
	"mid-conversation-tool-changes-2026-07-01": true, // the tools are inspected on every request
	"thinking-token-count-2026-05-13":          true, // reports counts
	"effort-2025-11-24":                        true, // output_config.effort; within max_tokens
	"fine-grained-tool-streaming-2025-05-14":   true, // how tool input is streamed
	"token-efficient-tools-2025-02-19":         true, // fewer tokens
	"prompt-caching-2024-07-31":                true, // cache rates are priced
	"extended-cache-ttl-2025-04-11":            true, // the 1-hour cache rate is priced
	"output-128k-2025-02-19":                   true, // max_tokens still bounds output
	"structured-outputs-2025-11-13":            true, // output format
	"web-fetch-2025-09-10":                     true, // web_fetch is judged by the gate
}

// AllowedBetas returns the allowlisted anthropic-beta values, sorted.
func AllowedBetas() []string {
	out := make([]string, 0, len(allowedBetas))
	for k := range allowedBetas {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Inspect reads one request. h carries its anthropic-beta headers and
// rawQuery its query string.
func Inspect(body []byte, h http.Header, rawQuery string) (*Inspection, *Refusal) {
	if rawQuery != "" && rawQuery != "beta=true" {
		return nil, refuse(ReasonQuery, "the query string may only be beta=true; remove the rest")
	}
	for _, line := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(line, ",") {
			b = strings.TrimSpace(b)
			if b != "" && !allowedBetas[b] {
				return nil, refuse(ReasonBeta, "anthropic-beta %s is not on fluidbox's allowlist (it may widen access or change the price); remove it", quoteName(b))
			}
		}
	}
	in := &Inspection{}
	if err := json.Unmarshal(body, &in.top); err != nil {
		return nil, refuse(ReasonMalformed, "the body must be one JSON object with unique member names (%s)", jsonProblem(err))
	}
	if in.top == nil {
		return nil, refuse(ReasonMalformed, "the body must be a JSON object")
	}
	if _, ok := in.top["mcp_servers"]; ok {
		return nil, refuse(ReasonConnector, "mcp_servers is refused: the MCP connector would reach servers with the operator's key outside the gate; attach the server to the run as a fluidbox connection instead")
	}
	if _, ok := in.top["container"]; ok {
		return nil, refuse(ReasonContainer, "container is refused: it reuses server-side state fluidbox cannot see; remove it")
	}
	keys := make([]string, 0, len(in.top))
	for k := range in.top {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same request is always refused for the same reason
	for _, k := range keys {
		read, ok := topFields[k]
		if !ok {
			return nil, refuse(ReasonField, "request field %s is not one fluidbox's model proxy understands; remove it", quoteName(k))
		}
		if r := read(in, in.top[k]); r != nil {
			return nil, r
		}
	}
	switch {
	case in.Model == "":
		return nil, refuse(ReasonMalformed, "model: field required")
	case in.MaxTokens < 1:
		return nil, refuse(ReasonMalformed, "max_tokens: must be an integer of at least 1")
	case in.top["messages"] == nil:
		return nil, refuse(ReasonMalformed, "messages: field required")
	}
	return in, nil
}

func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.QuoteToASCII(s)
}

// jsonProblem names what was wrong without quoting the input.
func jsonProblem(err error) string {
	var se *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &syn):
		if strings.Contains(syn.Error(), "duplicate") {
			return "duplicate member name at " + string(syn.JSONPointer)
		}
		return "invalid JSON at byte " + strconv.FormatInt(syn.ByteOffset, 10)
	case errors.As(err, &se):
		if se.JSONPointer != "" {
			return "unexpected value at " + string(se.JSONPointer)
		}
	}
	return "not a JSON object"
}

func readModel(in *Inspection, v jsontext.Value) *Refusal {
	if err := json.Unmarshal(v, &in.Model); err != nil {
		return refuse(ReasonMalformed, "model: must be a string")
	}
	return nil
}

func readMaxTokens(in *Inspection, v jsontext.Value) *Refusal {
	if err := json.Unmarshal(v, &in.MaxTokens); err != nil || in.MaxTokens < 1 {
		return refuse(ReasonMalformed, "max_tokens: must be an integer of at least 1")
	}
	return nil
}

func readStream(in *Inspection, v jsontext.Value) *Refusal {
	if err := json.Unmarshal(v, &in.Stream); err != nil {
		return refuse(ReasonMalformed, "stream: must be a boolean")
	}
	return nil
}

func readStrings(field string) func(*Inspection, jsontext.Value) *Refusal {
	return func(_ *Inspection, v jsontext.Value) *Refusal {
		var s []string
		if err := json.Unmarshal(v, &s); err != nil {
			return refuse(ReasonMalformed, "%s: must be an array of strings", field)
		}
		return nil
	}
}

func readNumber(field string) func(*Inspection, jsontext.Value) *Refusal {
	return func(_ *Inspection, v jsontext.Value) *Refusal {
		if v.Kind() != '0' {
			return refuse(ReasonMalformed, "%s: must be a number", field)
		}
		return nil
	}
}

func readObject(field string) func(*Inspection, jsontext.Value) *Refusal {
	return func(_ *Inspection, v jsontext.Value) *Refusal {
		if v.Kind() != '{' && v.Kind() != 'n' {
			return refuse(ReasonMalformed, "%s: must be an object", field)
		}
		return nil
	}
}

func readEnum(field string, values ...string) func(*Inspection, jsontext.Value) *Refusal {
	return func(_ *Inspection, v jsontext.Value) *Refusal {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || !slices.Contains(values, s) {
			return refuse(ReasonUnpriced, "%s: fluidbox admits only %s (other values are not priced); change or remove it", field, strings.Join(values, ", "))
		}
		return nil
	}
}

func readInferenceGeo(in *Inspection, v jsontext.Value) *Refusal {
	if err := json.Unmarshal(v, &in.InferenceGeo); err != nil || (in.InferenceGeo != "global" && in.InferenceGeo != "us") {
		return refuse(ReasonMalformed, `inference_geo: must be "global" or "us"`)
	}
	return nil
}

func readMetadata(_ *Inspection, v jsontext.Value) *Refusal {
	var m struct {
		UserID *string `json:"user_id"`
	}
	if err := json.Unmarshal(v, &m, strict); err != nil {
		return refuse(ReasonField, "metadata: only user_id (a string) is admitted")
	}
	return nil
}

func readToolChoice(_ *Inspection, v jsontext.Value) *Refusal {
	var c struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(v, &c, strict); err != nil || !slices.Contains([]string{"auto", "any", "tool", "none"}, c.Type) {
		return refuse(ReasonField, "tool_choice: must be {type: auto|any|tool|none, name?, disable_parallel_tool_use?}")
	}
	return nil
}

func readThinking(in *Inspection, v jsontext.Value) *Refusal {
	var t struct {
		Type         string `json:"type"`
		BudgetTokens *int64 `json:"budget_tokens"`
		Display      string `json:"display"`
	}
	if err := json.Unmarshal(v, &t, strict); err != nil {
		return refuse(ReasonField, "thinking: only type, budget_tokens and display are admitted")
	}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens == nil || *t.BudgetTokens < 1 {
			return refuse(ReasonMalformed, "thinking.budget_tokens: required with type enabled")
		}
		in.ThinkingBudget = *t.BudgetTokens
	case "disabled", "adaptive":
	default:
		return refuse(ReasonField, "thinking.type: must be enabled, disabled or adaptive")
	}
	return nil
}

// contextEdits are the context-management edits admitted: both only drop
// content from what the model reads. Server-side compaction (another model
// call) is not admitted.
var contextEdits = []string{"clear_thinking_20251015", "clear_tool_uses_20250919"}

func readContextManagement(_ *Inspection, v jsontext.Value) *Refusal {
	var c struct {
		// The clearing edits' own settings (keep, trigger, exclude_tools,
		// ...) only choose what is dropped, so they are not read.
		Edits []map[string]jsontext.Value `json:"edits"`
	}
	if err := json.Unmarshal(v, &c, strict); err != nil {
		return refuse(ReasonField, "context_management: only edits is admitted")
	}
	for i, e := range c.Edits {
		var typ string
		if err := json.Unmarshal(e["type"], &typ); err != nil || !slices.Contains(contextEdits, typ) {
			return refuse(ReasonField, "context_management.edits[%d].type: only %s are admitted", i, strings.Join(contextEdits, " and "))
		}
	}
	return nil
}

func readOutputConfig(_ *Inspection, v jsontext.Value) *Refusal {
	var c struct {
		Effort string         `json:"effort"`
		Format jsontext.Value `json:"format"`
	}
	if err := json.Unmarshal(v, &c, strict); err != nil {
		return refuse(ReasonField, "output_config: only effort and format are admitted")
	}
	return nil
}

func readSystem(in *Inspection, v jsontext.Value) *Refusal {
	switch v.Kind() {
	case '"':
		return nil
	case '[':
		var blocks []jsontext.Value
		if err := json.Unmarshal(v, &blocks); err != nil {
			return refuse(ReasonMalformed, "system: must be a string or an array of text blocks")
		}
		for i, b := range blocks {
			if r := in.readBlock(b, fmt.Sprintf("system[%d]", i), textOnly); r != nil {
				return r
			}
		}
		return nil
	}
	return refuse(ReasonMalformed, "system: must be a string or an array of text blocks")
}

func readMessages(in *Inspection, v jsontext.Value) *Refusal {
	var msgs []struct {
		Role         string         `json:"role"`
		Content      jsontext.Value `json:"content"`
		OutputConfig jsontext.Value `json:"output_config"`
	}
	if err := json.Unmarshal(v, &msgs, strict); err != nil {
		return refuse(ReasonField, "messages: each message is {role, content, output_config?}; %s", jsonProblem(err))
	}
	for i, m := range msgs {
		allowed := messageBlocks
		switch m.Role {
		case "user", "assistant":
		case "system":
			// Claude Code puts mid-conversation system text here; text only.
			allowed = textOnly
		default:
			return refuse(ReasonMalformed, "messages[%d].role: must be user, assistant or system", i)
		}
		if m.OutputConfig != nil {
			if r := readOutputConfig(in, m.OutputConfig); r != nil {
				r.Message = strings.Replace(r.Message, "output_config", fmt.Sprintf("messages[%d].output_config", i), 1)
				return r
			}
		}
		if r := in.readContent(m.Content, fmt.Sprintf("messages[%d].content", i), allowed); r != nil {
			return r
		}
	}
	return nil
}

// Block sets: which content block types may appear where.
var (
	messageBlocks = []string{"text", "image", "document", "search_result", "tool_use", "tool_result",
		"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result"}
	resultBlocks = []string{"text", "image", "document", "search_result"}
	textOnly     = []string{"text"}
)

// BlockTypes returns the allowlisted content block types of a message.
func BlockTypes() []string { return slices.Clone(messageBlocks) }

func (in *Inspection) readContent(v jsontext.Value, at string, allowed []string) *Refusal {
	switch v.Kind() {
	case '"':
		return nil
	case '[':
		var blocks []jsontext.Value
		if err := json.Unmarshal(v, &blocks); err != nil {
			return refuse(ReasonMalformed, "%s: must be a string or an array of blocks", at)
		}
		for i, b := range blocks {
			if r := in.readBlock(b, fmt.Sprintf("%s[%d]", at, i), allowed); r != nil {
				return r
			}
		}
		return nil
	}
	return refuse(ReasonMalformed, "%s: must be a string or an array of blocks", at)
}

// block is every member any admitted block type may have; which of them a
// given type may carry is checked against blockMembers.
type block struct {
	Type         string         `json:"type"`
	Text         jsontext.Value `json:"text"`
	CacheControl jsontext.Value `json:"cache_control"`
	Citations    jsontext.Value `json:"citations"`
	Source       jsontext.Value `json:"source"`
	Title        jsontext.Value `json:"title"`
	Context      jsontext.Value `json:"context"`
	ID           jsontext.Value `json:"id"`
	Name         jsontext.Value `json:"name"`
	Input        jsontext.Value `json:"input"`
	ToolUseID    jsontext.Value `json:"tool_use_id"`
	Content      jsontext.Value `json:"content"`
	IsError      jsontext.Value `json:"is_error"`
	Thinking     jsontext.Value `json:"thinking"`
	Signature    jsontext.Value `json:"signature"`
	Data         jsontext.Value `json:"data"`
}

// blockMembers lists the members each block type may carry besides type.
var blockMembers = map[string][]string{
	"text":                   {"text", "cache_control", "citations"},
	"image":                  {"source", "cache_control"},
	"document":               {"source", "title", "context", "citations", "cache_control"},
	"search_result":          {"source", "title", "content", "citations", "cache_control"},
	"tool_use":               {"id", "name", "input", "cache_control"},
	"tool_result":            {"tool_use_id", "content", "is_error", "cache_control"},
	"thinking":               {"thinking", "signature"},
	"redacted_thinking":      {"data"},
	"server_tool_use":        {"id", "name", "input", "cache_control"},
	"web_search_tool_result": {"tool_use_id", "content", "cache_control"},
	"web_fetch_tool_result":  {"tool_use_id", "content", "cache_control"},
}

func (b *block) present() []string {
	var out []string
	for _, f := range []struct {
		name string
		v    jsontext.Value
	}{
		{"text", b.Text}, {"cache_control", b.CacheControl}, {"citations", b.Citations}, {"source", b.Source},
		{"title", b.Title}, {"context", b.Context}, {"id", b.ID}, {"name", b.Name}, {"input", b.Input},
		{"tool_use_id", b.ToolUseID}, {"content", b.Content}, {"is_error", b.IsError},
		{"thinking", b.Thinking}, {"signature", b.Signature}, {"data", b.Data},
	} {
		if f.v != nil {
			out = append(out, f.name)
		}
	}
	return out
}

func (in *Inspection) readBlock(v jsontext.Value, at string, allowed []string) *Refusal {
	var b block
	if err := json.Unmarshal(v, &b, strict); err != nil {
		return refuse(ReasonField, "%s: a member is not one fluidbox understands for a content block (%s); remove it", at, jsonProblem(err))
	}
	if !slices.Contains(allowed, b.Type) {
		if b.Type == "mcp_tool_use" || b.Type == "mcp_tool_result" {
			return refuse(ReasonConnector, "%s: MCP connector blocks are refused; use a fluidbox connection", at)
		}
		if b.Type == "container_upload" {
			return refuse(ReasonContainer, "%s: container_upload is refused", at)
		}
		return refuse(ReasonBlockType, "%s.type %s is not admitted here; fluidbox admits %s", at, quoteName(b.Type), strings.Join(allowed, ", "))
	}
	members := blockMembers[b.Type]
	for _, p := range b.present() {
		if !slices.Contains(members, p) {
			return refuse(ReasonField, "%s: a %s block may not carry %s; remove it", at, b.Type, p)
		}
	}
	if b.CacheControl != nil {
		if r := in.readCacheControl(b.CacheControl, at); r != nil {
			return r
		}
	}
	switch b.Type {
	case "text":
		if b.Text.Kind() != '"' {
			return refuse(ReasonMalformed, "%s.text: must be a string", at)
		}
	case "image":
		return in.readSource(b.Source, at, "base64", "url")
	case "document":
		return in.readSource(b.Source, at, "base64", "text", "content", "url")
	case "search_result":
		return in.readContent(b.Content, at+".content", textOnly)
	case "tool_result":
		if b.Content != nil {
			return in.readContent(b.Content, at+".content", resultBlocks)
		}
	case "server_tool_use":
		var name string
		if err := json.Unmarshal(b.Name, &name); err != nil || (name != "web_search" && name != "web_fetch") {
			return refuse(ReasonBlockType, "%s: only web_search and web_fetch server_tool_use blocks are admitted", at)
		}
	}
	return nil
}

func (in *Inspection) readCacheControl(v jsontext.Value, at string) *Refusal {
	var c struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	if err := json.Unmarshal(v, &c, strict); err != nil || c.Type != "ephemeral" {
		return refuse(ReasonField, `%s.cache_control: must be {"type":"ephemeral","ttl"?}`, at)
	}
	switch c.TTL {
	case "", "5m":
	case "1h":
		in.Cache1h = true
	default:
		return refuse(ReasonField, `%s.cache_control.ttl: must be "5m" or "1h"`, at)
	}
	return nil
}

func (in *Inspection) readSource(v jsontext.Value, at string, kinds ...string) *Refusal {
	var s struct {
		Type      string         `json:"type"`
		MediaType string         `json:"media_type"`
		Data      jsontext.Value `json:"data"`
		URL       string         `json:"url"`
		Content   jsontext.Value `json:"content"`
		FileID    jsontext.Value `json:"file_id"`
	}
	if err := json.Unmarshal(v, &s, strict); err != nil {
		return refuse(ReasonSource, "%s.source: a member is not one fluidbox understands; remove it", at)
	}
	if s.Type == "file" || s.FileID != nil {
		return refuse(ReasonSource, "%s.source: file_id references are refused (they read the operator's Files); send the content inline as base64", at)
	}
	if !slices.Contains(kinds, s.Type) {
		return refuse(ReasonSource, "%s.source.type %s is not admitted; use one of %s", at, quoteName(s.Type), strings.Join(kinds, ", "))
	}
	switch s.Type {
	case "url":
		if s.URL == "" || s.Data != nil || s.Content != nil {
			return refuse(ReasonSource, "%s.source: a url source carries only url", at)
		}
		in.URLSources = append(in.URLSources, s.URL)
		in.Documents = true
	case "content":
		if s.Data != nil || s.URL != "" {
			return refuse(ReasonSource, "%s.source: a content source carries only content", at)
		}
		return in.readContent(s.Content, at+".source.content", []string{"text", "image"})
	default: // base64, text
		if s.Data.Kind() != '"' || s.URL != "" || s.Content != nil {
			return refuse(ReasonSource, "%s.source: a %s source carries media_type and data (a string)", at, s.Type)
		}
		if s.MediaType == "application/pdf" {
			in.Documents = true
		}
	}
	return nil
}

// tool is every member an admitted tool type may have.
type tool struct {
	Type             string         `json:"type"`
	Name             jsontext.Value `json:"name"`
	Description      jsontext.Value `json:"description"`
	InputSchema      jsontext.Value `json:"input_schema"`
	CacheControl     jsontext.Value `json:"cache_control"`
	Strict           jsontext.Value `json:"strict"`
	MaxUses          jsontext.Value `json:"max_uses"`
	AllowedDomains   jsontext.Value `json:"allowed_domains"`
	BlockedDomains   jsontext.Value `json:"blocked_domains"`
	UserLocation     jsontext.Value `json:"user_location"`
	Citations        jsontext.Value `json:"citations"`
	MaxContentTokens jsontext.Value `json:"max_content_tokens"`
	MaxCharacters    jsontext.Value `json:"max_characters"`
}

// toolTypes lists the admitted tool types, the members each may carry
// besides type, and the server tool it is (none for tools the client runs,
// which meet the gate through the runner's hook).
var toolTypes = map[string]struct {
	members []string
	server  string
}{
	"custom":                  {[]string{"name", "description", "input_schema", "cache_control", "strict"}, ""},
	"bash_20250124":           {[]string{"name", "cache_control"}, ""},
	"text_editor_20250728":    {[]string{"name", "cache_control", "max_characters"}, ""},
	"web_search_20250305":     {[]string{"name", "max_uses", "allowed_domains", "blocked_domains", "user_location", "cache_control"}, capability.ToolWebSearch},
	"web_fetch_20250910":      {[]string{"name", "max_uses", "max_content_tokens", "allowed_domains", "blocked_domains", "citations", "cache_control"}, capability.ToolWebFetch},
	"code_execution_20250825": {[]string{"name", "cache_control"}, capability.ToolCodeExecution},
}

// ToolTypes returns the admitted tool types, sorted ("custom" stands for a
// tool without a type).
func ToolTypes() []string {
	out := make([]string, 0, len(toolTypes))
	for k := range toolTypes {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (t *tool) present() []string {
	var out []string
	for _, f := range []struct {
		name string
		v    jsontext.Value
	}{
		{"name", t.Name}, {"description", t.Description}, {"input_schema", t.InputSchema}, {"cache_control", t.CacheControl},
		{"strict", t.Strict}, {"max_uses", t.MaxUses}, {"allowed_domains", t.AllowedDomains}, {"blocked_domains", t.BlockedDomains},
		{"user_location", t.UserLocation}, {"citations", t.Citations}, {"max_content_tokens", t.MaxContentTokens},
		{"max_characters", t.MaxCharacters},
	} {
		if f.v != nil {
			out = append(out, f.name)
		}
	}
	return out
}

func readTools(in *Inspection, v jsontext.Value) *Refusal {
	if err := json.Unmarshal(v, &in.tools); err != nil {
		return refuse(ReasonMalformed, "tools: must be an array of tools")
	}
	for i, raw := range in.tools {
		at := fmt.Sprintf("tools[%d]", i)
		var peek struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &peek) == nil && peek.Type == "mcp_toolset" {
			return refuse(ReasonConnector, "%s: mcp_toolset is refused; attach the MCP server to the run as a fluidbox connection", at)
		}
		var t tool
		if err := json.Unmarshal(raw, &t, strict); err != nil {
			return refuse(ReasonField, "%s: a member is not one fluidbox understands for a tool (%s); remove it", at, jsonProblem(err))
		}
		typ := t.Type
		if typ == "" {
			typ = "custom"
		}
		def, ok := toolTypes[typ]
		if !ok {
			return refuse(ReasonToolType, "%s.type %s is not admitted; fluidbox admits %s", at, quoteName(typ), strings.Join(ToolTypes(), ", "))
		}
		for _, p := range t.present() {
			if !slices.Contains(def.members, p) {
				return refuse(ReasonField, "%s: a %s tool may not carry %s; remove it", at, typ, p)
			}
		}
		if t.Name.Kind() != '"' {
			return refuse(ReasonMalformed, "%s.name: must be a string", at)
		}
		if typ == "custom" && t.InputSchema.Kind() != '{' {
			return refuse(ReasonMalformed, "%s.input_schema: must be an object", at)
		}
		if t.CacheControl != nil {
			if r := in.readCacheControl(t.CacheControl, at); r != nil {
				return r
			}
		}
		if def.server == "" {
			continue
		}
		if r := in.serverTool(i, def.server, &t); r != nil {
			return r
		}
	}
	return nil
}

// serverTool records a server tool, imposing max_uses (and, for web
// fetch, max_content_tokens) when the request sets none.
func (in *Inspection) serverTool(i int, name string, t *tool) *Refusal {
	at := fmt.Sprintf("tools[%d]", i)
	st := ServerTool{Tool: name, index: i}
	var m map[string]jsontext.Value
	if err := json.Unmarshal(in.tools[i], &m); err != nil {
		return refuse(ReasonMalformed, "%s: must be an object", at)
	}
	if name != capability.ToolCodeExecution {
		if t.MaxUses == nil {
			m["max_uses"] = jsontext.Value(strconv.Itoa(DefaultMaxUses))
			in.changed = true
		}
		if err := json.Unmarshal(m["max_uses"], &st.MaxUses); err != nil || st.MaxUses < 1 {
			return refuse(ReasonMalformed, "%s.max_uses: must be an integer of at least 1", at)
		}
	} else {
		st.MaxUses = 1
	}
	if name == capability.ToolWebFetch {
		if t.MaxContentTokens == nil {
			m["max_content_tokens"] = jsontext.Value(strconv.Itoa(DefaultMaxContentTokens))
			in.changed = true
		}
		if err := json.Unmarshal(m["max_content_tokens"], &st.MaxContentTokens); err != nil || st.MaxContentTokens < 1 {
			return refuse(ReasonMalformed, "%s.max_content_tokens: must be an integer of at least 1", at)
		}
	}
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return refuse(ReasonMalformed, "%s: could not be read", at)
	}
	in.tools[i] = b
	dec := stdjson.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&st.Input); err != nil {
		return refuse(ReasonMalformed, "%s: could not be read", at)
	}
	in.ServerTools = append(in.ServerTools, st)
	return nil
}
