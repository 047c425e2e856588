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
// different requests. The reading is one pass over the body (scan.go).

// Reason says why a model request was refused. Reasons are persisted (the
// model.refused event) and on the wire: never rename one.
type Reason string

// Reasons of a refusal.
const (
	ReasonMalformed   Reason = "malformed"   // not JSON, a duplicate member, a wrong type
	ReasonField       Reason = "field"       // a member outside the allowlist
	ReasonToolType    Reason = "tool_type"   // a tool type outside the allowlist
	ReasonBlockType   Reason = "block_type"  // a content block type outside the allowlist
	ReasonSource      Reason = "source"      // a file_id or unknown image/document source
	ReasonBeta        Reason = "beta"        // an anthropic-beta value outside the allowlist
	ReasonQuery       Reason = "query"       // a query string other than beta=true
	ReasonConnector   Reason = "connector"   // mcp_servers / mcp_toolset
	ReasonContainer   Reason = "container"   // container
	ReasonGate        Reason = "gate"        // a server tool or URL source the gate did not allow
	ReasonUnpriced    Reason = "unpriced"    // something the price table cannot price
	ReasonBudget      Reason = "budget"      // not even the floor of max_tokens fits
	ReasonRun         Reason = "run"         // the run has ended or is unknown
	ReasonTooLarge    Reason = "too_large"   // a body over MaxBody, or over maxValues JSON values
	ReasonUnavailable Reason = "unavailable" // no upstream, or the store failed: nothing was forwarded
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
	// Documents: a PDF or a URL source, whose token count the body's bytes
	// do not bound (a page renders as an image).
	Documents bool
	// Images counts the image blocks: an image's tokens follow its pixels,
	// not its compressed size, so each is reserved at maxImageTokens.
	Images int64
	// InferenceGeo is "" (default), "global" or "us".
	InferenceGeo string
	// ReferencedBytes is, summed over the tool_reference blocks (a tool
	// search's result), the size of the deferred tool definition each
	// names: the API expands each into the context, so the body's bytes
	// do not bound them.
	ReferencedBytes int64

	body      []byte
	doc       *doc
	maxTokens span   // the max_tokens value in body
	edits     []edit // what fluidbox changes in the forwarded body

	// The conversation as the proof check reads it (verify.go): each
	// message's role, and the tool_use and tool_result blocks of the
	// messages, in order. msg is the message being read.
	roles   []string
	uses    []toolUse
	results []toolResult
	msg     int

	// refs are the tool names tool_reference blocks name; deferred the
	// size of each tool offered with defer_loading true.
	refs     []string
	deferred map[string]int64
}

// edit replaces body[at.s:at.e] with with.
type edit struct {
	at   span
	with []byte
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
	in.edits = slices.DeleteFunc(in.edits, func(e edit) bool { return e.at == in.maxTokens })
	in.edits = append(in.edits, edit{in.maxTokens, strconv.AppendInt(nil, n, 10)})
}

// Body returns what to forward: the request's own bytes, or, when fluidbox
// imposed a limit or lowered max_tokens, those bytes with just these values
// replaced (every other byte as the client sent it).
func (in *Inspection) Body(orig []byte) ([]byte, error) {
	if len(in.edits) == 0 {
		return orig, nil
	}
	if !bytes.Equal(orig, in.body) {
		return nil, errors.New("modelproxy: Body of another request than the one inspected")
	}
	edits := slices.Clone(in.edits)
	slices.SortFunc(edits, func(a, b edit) int { return a.at.s - b.at.s })
	out := make([]byte, 0, len(orig)+64*len(edits))
	at := 0
	for _, e := range edits {
		out = append(append(out, orig[at:e.at.s]...), e.with...)
		at = e.at.e
	}
	return append(out, orig[at:]...), nil
}

// reader reads one top-level member's value.
type reader func(in *Inspection, v span) *Refusal

// topFields is the allowlist of the request's top-level members, each with
// its reader. mcp_servers and container are refused by name below.
var topFields = map[string]reader{
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
	"service_tier":       readServiceTier,
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
	"advanced-tool-use-2025-11-20":             true, // tool search: only defer_loading and tool_reference are admitted
}

// apiVersions are the anthropic-version values whose request shape the
// inspector reads (anthropic-sdk-go v2 sends 2026-10-21).
var apiVersions = []string{defaultVersion, "2026-10-21"}

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
	if r := inspectHeaders(h, rawQuery); r != nil {
		return nil, r
	}
	d, err := validate(body)
	if errors.Is(err, errTooMany) {
		return nil, &Refusal{Status: http.StatusRequestEntityTooLarge, Type: "request_too_large", Reason: ReasonTooLarge,
			Message: fmt.Sprintf("fluidbox: the request body holds more than %d JSON values, more than fluidbox's model proxy reads; send less", maxValues)}
	}
	if err != nil {
		return nil, refuse(ReasonMalformed, "the body must be one JSON object with unique member names (%s)", jsonProblem(err))
	}
	in := &Inspection{body: body, doc: d}
	defer func() { in.doc = nil; d.release() }()
	if r := in.readTop(d.root()); r != nil {
		return nil, r
	}
	return in, nil
}

// inspectHeaders refuses a query string other than beta=true, an
// anthropic-version the inspector was not written against (or two), and
// an anthropic-beta off the allowlist.
func inspectHeaders(h http.Header, rawQuery string) *Refusal {
	if rawQuery != "" && rawQuery != "beta=true" {
		return refuse(ReasonQuery, "the query string may only be beta=true; remove the rest")
	}
	// The version says how the upstream reads the body: only the versions
	// the inspector was written against pass, and the one forwarded (the
	// first) is the only one sent.
	vs := h.Values("Anthropic-Version")
	for _, v := range vs {
		if !slices.Contains(apiVersions, v) || v != vs[0] {
			return refuse(ReasonField, "anthropic-version must be one of %s, sent once; fluidbox's model proxy reads no other", strings.Join(apiVersions, ", "))
		}
	}
	for _, line := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(line, ",") {
			b = strings.TrimSpace(b)
			if b != "" && !allowedBetas[b] {
				return refuse(ReasonBeta, "anthropic-beta %s is not on fluidbox's allowlist (it may widen access or change the price); remove it", quoteName(b))
			}
		}
	}
	return nil
}

// readTop reads the body's root object: refused members first, then each
// member by its reader, in name order, so the same request is always
// refused for the same reason; then what needs them all read.
func (in *Inspection) readTop(root span) *Refusal {
	if kind(in.body, root) != '{' {
		return refuse(ReasonMalformed, "the body must be a JSON object")
	}
	top := in.doc.members(root)
	for _, m := range top {
		switch m.name {
		case "mcp_servers":
			return refuse(ReasonConnector, "mcp_servers is refused: the MCP connector would reach servers with the operator's key outside the gate; attach the server to the run as a fluidbox connection instead")
		case "container":
			return refuse(ReasonContainer, "container is refused: it reuses server-side state fluidbox cannot see; remove it")
		}
	}
	slices.SortFunc(top, func(a, b member) int { return strings.Compare(a.name, b.name) })
	messages, tier := false, false
	for _, m := range top {
		read, ok := topFields[m.name]
		if !ok {
			return refuse(ReasonField, "request field %s is not one fluidbox's model proxy understands; remove it", quoteName(m.name))
		}
		if r := read(in, m.v); r != nil {
			return r
		}
		messages = messages || m.name == "messages"
		tier = tier || m.name == "service_tier"
	}
	if !tier {
		// Absent, the API's tier is "auto": standard_only is imposed, added
		// before the root's closing brace (the root has members, so a comma
		// leads).
		end := root.e - 1
		in.edits = append(in.edits, edit{span{s: end, e: end}, []byte(`,"service_tier":"standard_only"`)})
	}
	if r := in.resolveRefs(); r != nil {
		return r
	}
	switch {
	case in.Model == "":
		return refuse(ReasonMalformed, "model: field required")
	case in.MaxTokens < 1:
		return refuse(ReasonMalformed, "max_tokens: must be an integer of at least 1")
	case !messages:
		return refuse(ReasonMalformed, "messages: field required")
	}
	return nil
}

// resolveRefs holds each tool reference to a deferred tool of this
// request, as the API requires; it runs after both messages and tools
// were read.
func (in *Inspection) resolveRefs() *Refusal {
	for _, name := range in.refs {
		size, ok := in.deferred[name]
		if !ok {
			return refuse(ReasonMalformed, "a tool_reference names %s, which is not a tool of this request with defer_loading true", quoteName(name))
		}
		in.ReferencedBytes = satAdd(in.ReferencedBytes, size)
	}
	return nil
}

func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.QuoteToASCII(s)
}

// jsonProblem names what was wrong without quoting the input.
func jsonProblem(err error) string {
	var se *syntaxError
	if errors.As(err, &se) {
		return se.Error()
	}
	return "not a JSON object"
}

// object reads an object whose members must all be in allowed; what it
// returns holds each member present by name.
func (in *Inspection) object(v span, allowed ...string) (obj, bool) {
	if kind(in.body, v) != '{' {
		return nil, false
	}
	ms := in.doc.members(v)
	for _, m := range ms {
		if !slices.Contains(allowed, m.name) {
			return nil, false
		}
	}
	return ms, true
}

// obj is an object's members.
type obj []member

// get returns the value of the member name, if present.
func (o obj) get(name string) (span, bool) {
	for _, m := range o {
		if m.name == name {
			return m.v, true
		}
	}
	return span{}, false
}

// foreign returns the first of fields (in their order, so that the same
// object always gets the same answer) that o has and allowed does not
// list; type is always allowed.
func (o obj) foreign(fields, allowed []string) (string, bool) {
	for _, m := range o {
		if m.name != "type" && !slices.Contains(allowed, m.name) {
			for _, p := range fields {
				if _, present := o.get(p); present && !slices.Contains(allowed, p) {
					return p, true
				}
			}
			return quoteName(m.name), true
		}
	}
	return "", false
}

// val returns the value of the member name, or an absent value.
func (o obj) val(name string) span {
	v, _ := o.get(name)
	return v
}

// optString reads a member that is absent, null or a string.
func (in *Inspection) optString(o obj, name string) (string, bool) {
	v, ok := o.get(name)
	if !ok || kind(in.body, v) == 'n' {
		return "", true
	}
	return str(in.body, v)
}

// optKind reports whether a member is absent, null or of kind k.
func (in *Inspection) optKind(o obj, name string, k byte) bool {
	v, ok := o.get(name)
	return !ok || kind(in.body, v) == 'n' || kind(in.body, v) == k
}

func readModel(in *Inspection, v span) *Refusal {
	s, ok := str(in.body, v)
	if !ok {
		return refuse(ReasonMalformed, "model: must be a string")
	}
	in.Model = s
	return nil
}

func readMaxTokens(in *Inspection, v span) *Refusal {
	n, ok := integer(in.body, v)
	if !ok || n < 1 {
		return refuse(ReasonMalformed, "max_tokens: must be an integer of at least 1")
	}
	in.MaxTokens, in.maxTokens = n, v
	return nil
}

func readStream(in *Inspection, v span) *Refusal {
	b, ok := boolean(in.body, v)
	if !ok {
		return refuse(ReasonMalformed, "stream: must be a boolean")
	}
	in.Stream = b
	return nil
}

func readStrings(field string) reader {
	return func(in *Inspection, v span) *Refusal {
		if kind(in.body, v) != '[' {
			return refuse(ReasonMalformed, "%s: must be an array of strings", field)
		}
		for _, e := range in.doc.elements(v) {
			if kind(in.body, e) != '"' {
				return refuse(ReasonMalformed, "%s: must be an array of strings", field)
			}
		}
		return nil
	}
}

func readNumber(field string) reader {
	return func(in *Inspection, v span) *Refusal {
		if kind(in.body, v) != '0' {
			return refuse(ReasonMalformed, "%s: must be a number", field)
		}
		return nil
	}
}

func readObject(field string) reader {
	return func(in *Inspection, v span) *Refusal {
		if k := kind(in.body, v); k != '{' && k != 'n' {
			return refuse(ReasonMalformed, "%s: must be an object", field)
		}
		return nil
	}
}

func readEnum(field string, values ...string) reader {
	return func(in *Inspection, v span) *Refusal {
		if s, ok := str(in.body, v); !ok || !slices.Contains(values, s) {
			return refuse(ReasonUnpriced, "%s: fluidbox admits only %s (other values are not priced); change or remove it", field, strings.Join(values, ", "))
		}
		return nil
	}
}

// readServiceTier admits only service_tier "standard_only". The API's
// default, "auto", runs a request on Priority Tier capacity when the
// operator's organization has some, billed at Priority Tier rates that are
// the organization's contract and not in fluidbox's price table: priced at
// the standard rate, the run would spend more than it was charged. So
// "auto" is refused, as is every other value (an unknown tier has no known
// price), and a request without the field gets "standard_only" imposed
// (Inspect), so the highest tier any forwarded request may use is the one
// the proxy prices.
func readServiceTier(in *Inspection, v span) *Refusal {
	if s, ok := str(in.body, v); !ok || s != "standard_only" {
		return refuse(ReasonUnpriced, `service_tier: fluidbox admits only "standard_only": "auto" may run on Priority Tier capacity, whose price fluidbox does not know; send "standard_only" or leave it out (fluidbox then sends "standard_only")`)
	}
	return nil
}

func readInferenceGeo(in *Inspection, v span) *Refusal {
	s, ok := str(in.body, v)
	if !ok || (s != "global" && s != "us") {
		return refuse(ReasonMalformed, `inference_geo: must be "global" or "us"`)
	}
	in.InferenceGeo = s
	return nil
}

func readMetadata(in *Inspection, v span) *Refusal {
	o, ok := in.object(v, "user_id")
	if !ok || !in.optKind(o, "user_id", '"') {
		return refuse(ReasonField, "metadata: only user_id (a string) is admitted")
	}
	return nil
}

var toolChoices = []string{"auto", "any", "tool", "none"}

func readToolChoice(in *Inspection, v span) *Refusal {
	o, ok := in.object(v, "type", "name", "disable_parallel_tool_use")
	if ok {
		var typ string
		typ, ok = str(in.body, o.val("type"))
		ok = ok && slices.Contains(toolChoices, typ) && in.optKind(o, "name", '"') &&
			(in.optKind(o, "disable_parallel_tool_use", 't') || in.optKind(o, "disable_parallel_tool_use", 'f'))
	}
	if !ok {
		return refuse(ReasonField, "tool_choice: must be {type: auto|any|tool|none, name?, disable_parallel_tool_use?}")
	}
	return nil
}

func readThinking(in *Inspection, v span) *Refusal {
	o, ok := in.object(v, "type", "budget_tokens", "display")
	if !ok || !in.optKind(o, "display", '"') || !in.optKind(o, "budget_tokens", '0') {
		return refuse(ReasonField, "thinking: only type, budget_tokens and display are admitted")
	}
	typ, _ := in.optString(o, "type")
	switch typ {
	case "enabled":
		n, ok := integer(in.body, o.val("budget_tokens"))
		if !ok || n < 1 {
			return refuse(ReasonMalformed, "thinking.budget_tokens: required with type enabled")
		}
		in.ThinkingBudget = n
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

// editSettings are the members each admitted edit may carry besides type.
// Their values (how many to keep, when to trigger, which tools to spare)
// only choose what is dropped, so they are not read; a member not listed
// is one the upstream might read otherwise, and is refused.
var editSettings = map[string][]string{
	"clear_thinking_20251015":  {"keep"},
	"clear_tool_uses_20250919": {"trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"},
}

func readContextManagement(in *Inspection, v span) *Refusal {
	o, ok := in.object(v, "edits")
	if !ok || !in.optKind(o, "edits", '[') {
		return refuse(ReasonField, "context_management: only edits is admitted")
	}
	if _, ok := o.get("edits"); !ok || kind(in.body, o.val("edits")) == 'n' {
		return nil
	}
	for i, e := range in.doc.elements(o.val("edits")) {
		if kind(in.body, e) != '{' {
			return refuse(ReasonField, "context_management: only edits is admitted")
		}
		ms := obj(in.doc.members(e))
		typ, _ := str(in.body, ms.val("type"))
		if !slices.Contains(contextEdits, typ) {
			return refuse(ReasonField, "context_management.edits[%d].type: only %s are admitted", i, strings.Join(contextEdits, " and "))
		}
		for _, m := range ms {
			if m.name != "type" && !slices.Contains(editSettings[typ], m.name) {
				return refuse(ReasonField, "context_management.edits[%d]: a %s edit may not carry %s; remove it", i, typ, quoteName(m.name))
			}
		}
	}
	return nil
}

func readOutputConfig(in *Inspection, v span) *Refusal {
	o, ok := in.object(v, "effort", "format")
	if !ok || !in.optKind(o, "effort", '"') {
		return refuse(ReasonField, "output_config: only effort and format are admitted")
	}
	return nil
}

func readSystem(in *Inspection, v span) *Refusal {
	switch kind(in.body, v) {
	case '"':
		return nil
	case '[':
		for i, b := range in.doc.elements(v) {
			if r := in.readBlock(b, root("system").at(i), textOnly); r != nil {
				return r
			}
		}
		return nil
	}
	return refuse(ReasonMalformed, "system: must be a string or an array of text blocks")
}

func readMessages(in *Inspection, v span) *Refusal {
	if kind(in.body, v) != '[' {
		return refuse(ReasonField, "messages: each message is {role, content, output_config?}; must be an array")
	}
	for i, mv := range in.doc.elements(v) {
		m, ok := in.object(mv, "role", "content", "output_config")
		if !ok {
			return refuse(ReasonField, "messages: each message is {role, content, output_config?}; messages[%d] is not", i)
		}
		role, _ := in.optString(m, "role")
		allowed := messageBlocks
		switch role {
		case "user", "assistant":
		case "system":
			// Claude Code puts mid-conversation system text here; text only.
			allowed = textOnly
		default:
			return refuse(ReasonMalformed, "messages[%d].role: must be user, assistant or system", i)
		}
		in.roles, in.msg = append(in.roles, role), i
		if oc, ok := m.get("output_config"); ok && kind(in.body, oc) != 'n' {
			if r := readOutputConfig(in, oc); r != nil {
				r.Message = strings.Replace(r.Message, "output_config", fmt.Sprintf("messages[%d].output_config", i), 1)
				return r
			}
		}
		if r := in.readContent(m.val("content"), root("messages").at(i).dot("content"), allowed); r != nil {
			return r
		}
	}
	return nil
}

// Block sets: which content block types may appear where.
var (
	messageBlocks = []string{"text", "image", "document", "search_result", "tool_use", "tool_result",
		"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result"}
	resultBlocks = []string{"text", "image", "document", "search_result", "tool_reference"}
	textOnly     = []string{"text"}
	sourceBlocks = []string{"text", "image"}
)

// path is where in the request a value is, spelled out only for a
// refusal; a value, so that reading allocates nothing for it.
type path struct {
	segs [8]seg
	n    int
}

// seg is a member (or the root) by name, or an element by index.
type seg struct {
	name  string
	index int
}

func root(name string) path { return path{segs: [8]seg{{name: name}}, n: 1} }

func (p path) at(i int) path {
	if p.n < len(p.segs) {
		p.segs[p.n], p.n = seg{index: i}, p.n+1
	}
	return p
}

func (p path) dot(name string) path {
	if p.n < len(p.segs) {
		p.segs[p.n], p.n = seg{name: name}, p.n+1
	}
	return p
}

func (p path) String() string {
	var sb strings.Builder
	for i, s := range p.segs[:p.n] {
		switch {
		case s.name == "":
			sb.WriteString("[" + strconv.Itoa(s.index) + "]")
		case i > 0:
			sb.WriteString("." + s.name)
		default:
			sb.WriteString(s.name)
		}
	}
	if p.n == len(p.segs) {
		sb.WriteString("...")
	}
	return sb.String()
}

// BlockTypes returns the allowlisted content block types of a message.
func BlockTypes() []string { return slices.Clone(messageBlocks) }

func (in *Inspection) readContent(v span, at path, allowed []string) *Refusal {
	switch kind(in.body, v) {
	case '"':
		return nil
	case '[':
		for i, b := range in.doc.elements(v) {
			if r := in.readBlock(b, at.at(i), allowed); r != nil {
				return r
			}
		}
		return nil
	}
	return refuse(ReasonMalformed, "%s: must be a string or an array of blocks", at)
}

// blockFields is every member any admitted block type may have; which of
// them a given type may carry is checked against blockMembers.
var blockFields = []string{"type", "text", "cache_control", "citations", "source", "title", "context", "id", "name",
	"input", "tool_use_id", "content", "is_error", "thinking", "signature", "data", "tool_name"}

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
	"tool_reference":         {"tool_name"},
}

func (in *Inspection) readBlock(v span, at path, allowed []string) *Refusal {
	b, ok := in.object(v, blockFields...)
	if !ok {
		return refuse(ReasonField, "%s: a member is not one fluidbox understands for a content block; remove it", at)
	}
	typ, r := in.blockType(b, at, allowed)
	if r != nil {
		return r
	}
	if cc, ok := b.get("cache_control"); ok {
		if r := in.readCacheControl(cc, at); r != nil {
			return r
		}
	}
	return in.readBlockOf(typ, b, at)
}

// blockType is the type of the block b, refused unless it is allowed
// here and b carries only that type's members.
func (in *Inspection) blockType(b obj, at path, allowed []string) (string, *Refusal) {
	typ, ok := in.optString(b, "type")
	if !ok {
		return "", refuse(ReasonField, "%s: a content block's type must be a string", at)
	}
	if !slices.Contains(allowed, typ) {
		if typ == "mcp_tool_use" || typ == "mcp_tool_result" {
			return "", refuse(ReasonConnector, "%s: MCP connector blocks are refused; use a fluidbox connection", at)
		}
		if typ == "container_upload" {
			return "", refuse(ReasonContainer, "%s: container_upload is refused", at)
		}
		return "", refuse(ReasonBlockType, "%s.type %s is not admitted here; fluidbox admits %s", at, quoteName(typ), strings.Join(allowed, ", "))
	}
	if p, ok := b.foreign(blockFields[1:], blockMembers[typ]); ok {
		return "", refuse(ReasonField, "%s: a %s block may not carry %s; remove it", at, typ, p)
	}
	return typ, nil
}

// readBlockOf reads what a block of type typ holds.
func (in *Inspection) readBlockOf(typ string, b obj, at path) *Refusal {
	switch typ {
	case "text":
		if kind(in.body, b.val("text")) != '"' {
			return refuse(ReasonMalformed, "%s.text: must be a string", at)
		}
	case "image":
		// A few hundred bytes of PNG are a screen of pixels: up to some
		// 5,000 tokens, more than the bytes that carry them.
		in.Images++
		return in.readSource(b.val("source"), at, false, "base64", "url")
	case "document":
		return in.readSource(b.val("source"), at, true, "base64", "text", "content", "url")
	case "search_result":
		return in.readContent(b.val("content"), at.dot("content"), textOnly)
	case "tool_use":
		return in.readToolUse(b, at)
	case "tool_result":
		if r := in.readToolResult(b, at); r != nil {
			return r
		}
		if c, ok := b.get("content"); ok {
			return in.readContent(c, at.dot("content"), resultBlocks)
		}
	case "tool_reference":
		name, ok := str(in.body, b.val("tool_name"))
		if !ok {
			return refuse(ReasonMalformed, "%s.tool_name: must be a string", at)
		}
		in.refs = append(in.refs, name)
	case "web_search_tool_result":
		return in.readSearchResults(b.val("content"), at.dot("content"))
	case "web_fetch_tool_result":
		return in.readFetchResult(b.val("content"), at.dot("content"))
	case "server_tool_use":
		name, _ := str(in.body, b.val("name"))
		if name != "web_search" && name != "web_fetch" {
			return refuse(ReasonBlockType, "%s: only web_search and web_fetch server_tool_use blocks are admitted", at)
		}
	}
	return nil
}

// readSearchResults reads a web search's results replayed in the history:
// found pages (read by the model as data) or an error.
func (in *Inspection) readSearchResults(v span, at path) *Refusal {
	if o, ok := in.object(v, "type", "error_code"); ok {
		if typ, _ := in.optString(o, "type"); typ == "web_search_tool_result_error" {
			return nil
		}
	}
	if kind(in.body, v) != '[' {
		return refuse(ReasonField, "%s: must be web_search_result blocks or a web_search_tool_result_error", at)
	}
	for i, e := range in.doc.elements(v) {
		o, ok := in.object(e, "type", "url", "title", "encrypted_content", "page_age")
		typ, _ := in.optString(o, "type")
		if !ok || typ != "web_search_result" {
			return refuse(ReasonField, "%s: must be web_search_result blocks of type, url, title, encrypted_content and page_age", at.at(i))
		}
	}
	return nil
}

// readFetchResult reads a web fetch's result replayed in the history: the
// fetched document is a document block like any other (its source is
// judged: a file_id or a URL there reaches as far as one in a message), or
// an error.
func (in *Inspection) readFetchResult(v span, at path) *Refusal {
	o, ok := in.object(v, "type", "url", "content", "retrieved_at", "error_code")
	typ, _ := in.optString(o, "type")
	switch {
	case !ok:
	case typ == "web_fetch_tool_result_error":
		if _, c := o.get("content"); !c {
			return nil
		}
	case typ == "web_fetch_result":
		if _, e := o.get("error_code"); !e {
			return in.readBlock(o.val("content"), at.dot("content"), []string{"document"})
		}
	}
	return refuse(ReasonField, "%s: must be a web_fetch_result {type, url, content: a document, retrieved_at} or a web_fetch_tool_result_error", at)
}

func (in *Inspection) readCacheControl(v span, at path) *Refusal {
	c, ok := in.object(v, "type", "ttl")
	typ, tok := in.optString(c, "type")
	ttl, lok := in.optString(c, "ttl")
	if !ok || !tok || !lok || typ != "ephemeral" {
		return refuse(ReasonField, `%s.cache_control: must be {"type":"ephemeral","ttl"?}`, at)
	}
	switch ttl {
	case "", "5m":
	case "1h":
		in.Cache1h = true
	default:
		return refuse(ReasonField, `%s.cache_control.ttl: must be "5m" or "1h"`, at)
	}
	return nil
}

// readSource reads the source of an image or, with document, a document.
func (in *Inspection) readSource(v span, at path, document bool, kinds ...string) *Refusal {
	s, ok := in.object(v, "type", "media_type", "data", "url", "content", "file_id")
	typ, tok := in.optString(s, "type")
	mediaType, mok := in.optString(s, "media_type")
	url, uok := in.optString(s, "url")
	if !ok || !tok || !mok || !uok {
		return refuse(ReasonSource, "%s.source: a member is not one fluidbox understands; remove it", at)
	}
	_, fileID := s.get("file_id")
	if typ == "file" || fileID {
		return refuse(ReasonSource, "%s.source: file_id references are refused (they read the operator's Files); send the content inline as base64", at)
	}
	if !slices.Contains(kinds, typ) {
		return refuse(ReasonSource, "%s.source.type %s is not admitted; use one of %s", at, quoteName(typ), strings.Join(kinds, ", "))
	}
	data, hasData := s.get("data")
	content, hasContent := s.get("content")
	switch typ {
	case "url":
		if url == "" || hasData || hasContent {
			return refuse(ReasonSource, "%s.source: a url source carries only url", at)
		}
		in.URLSources = append(in.URLSources, url)
		in.Documents = true
	case "content":
		if hasData || url != "" {
			return refuse(ReasonSource, "%s.source: a content source carries only content", at)
		}
		return in.readContent(content, at.dot("source").dot("content"), sourceBlocks)
	default: // base64, text
		if kind(in.body, data) != '"' || url != "" || hasContent {
			return refuse(ReasonSource, "%s.source: a %s source carries media_type and data (a string)", at, typ)
		}
		// A base64 document is a PDF whatever media_type says: the flag
		// does not hang on a string the upstream may read otherwise. An
		// image is bounded by its pixels (Images), not by the window.
		if (document && typ == "base64") || mediaType == "application/pdf" {
			in.Documents = true
		}
	}
	return nil
}

// toolFields is every member an admitted tool type may have.
var toolFields = []string{"type", "name", "description", "input_schema", "cache_control", "strict", "max_uses",
	"allowed_domains", "blocked_domains", "user_location", "citations", "max_content_tokens", "max_characters", "defer_loading"}

// toolTypes lists the admitted tool types, the members each may carry
// besides type, and the server tool it is (none for tools the client runs,
// which meet the gate through the runner's hook).
var toolTypes = map[string]struct {
	members []string
	server  string
}{
	"custom":                  {[]string{"name", "description", "input_schema", "cache_control", "strict", "defer_loading"}, ""},
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

func readTools(in *Inspection, v span) *Refusal {
	if kind(in.body, v) != '[' {
		return refuse(ReasonMalformed, "tools: must be an array of tools")
	}
	for i, tv := range in.doc.elements(v) {
		at := root("tools").at(i)
		if kind(in.body, tv) != '{' {
			return refuse(ReasonMalformed, "tools: must be an array of tools")
		}
		t, known := in.object(tv, toolFields...)
		if !known {
			t = in.doc.members(tv)
		}
		typ, ok := in.optString(t, "type")
		if typ == "mcp_toolset" {
			return refuse(ReasonConnector, "%s: mcp_toolset is refused; attach the MCP server to the run as a fluidbox connection", at)
		}
		if !known {
			return refuse(ReasonField, "%s: a member is not one fluidbox understands for a tool; remove it", at)
		}
		if !ok {
			return refuse(ReasonField, "%s: a tool's type must be a string", at)
		}
		if typ == "" {
			typ = "custom"
		}
		def, ok := toolTypes[typ]
		if !ok {
			return refuse(ReasonToolType, "%s.type %s is not admitted; fluidbox admits %s", at, quoteName(typ), strings.Join(ToolTypes(), ", "))
		}
		if p, ok := t.foreign(toolFields[1:], def.members); ok {
			return refuse(ReasonField, "%s: a %s tool may not carry %s; remove it", at, typ, p)
		}
		if kind(in.body, t.val("name")) != '"' {
			return refuse(ReasonMalformed, "%s.name: must be a string", at)
		}
		if typ == "custom" && kind(in.body, t.val("input_schema")) != '{' {
			return refuse(ReasonMalformed, "%s.input_schema: must be an object", at)
		}
		if dv, ok := t.get("defer_loading"); ok {
			deferred, ok := boolean(in.body, dv)
			if !ok {
				return refuse(ReasonMalformed, "%s.defer_loading: must be a boolean", at)
			}
			if deferred {
				if in.deferred == nil {
					in.deferred = map[string]int64{}
				}
				name, _ := str(in.body, t.val("name"))
				in.deferred[name] = int64(tv.e - tv.s)
			}
		}
		if cc, ok := t.get("cache_control"); ok {
			if r := in.readCacheControl(cc, at); r != nil {
				return r
			}
		}
		if def.server == "" {
			continue
		}
		if r := in.serverTool(tv, at, def.server, t); r != nil {
			return r
		}
	}
	return nil
}

// serverTool records a server tool, imposing max_uses (and, for web
// fetch, max_content_tokens) when the request sets none.
func (in *Inspection) serverTool(v span, at path, name string, t obj) *Refusal {
	st := ServerTool{Tool: name}
	var imposed []byte
	limit := func(member string, def int64) (int64, *Refusal) {
		mv, ok := t.get(member)
		if !ok {
			imposed = strconv.AppendInt(append(imposed, `,"`+member+`":`...), def, 10)
			return def, nil
		}
		n, ok := integer(in.body, mv)
		if !ok || n < 1 {
			return 0, refuse(ReasonMalformed, "%s.%s: must be an integer of at least 1", at, member)
		}
		return n, nil
	}
	var r *Refusal
	switch name {
	case capability.ToolCodeExecution:
		st.MaxUses = 1
	case capability.ToolWebFetch:
		if st.MaxContentTokens, r = limit("max_content_tokens", DefaultMaxContentTokens); r != nil {
			return r
		}
		fallthrough
	default:
		if st.MaxUses, r = limit("max_uses", DefaultMaxUses); r != nil {
			return r
		}
	}
	def := in.body[v.s:v.e]
	if imposed != nil {
		// The tool's own bytes with the limits added before its closing
		// brace; the object has members (type, name), so a comma leads.
		def = append(append(slices.Clip(def[:len(def)-1]), imposed...), '}')
		in.edits = append(in.edits, edit{v, def})
	}
	dec := stdjson.NewDecoder(bytes.NewReader(def))
	dec.UseNumber()
	if err := dec.Decode(&st.Input); err != nil {
		return refuse(ReasonMalformed, "%s: could not be read", at)
	}
	in.ServerTools = append(in.ServerTools, st)
	return nil
}
