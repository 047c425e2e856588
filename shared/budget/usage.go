package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNoUsage reports a response that does not carry a usable `usage` object.
var ErrNoUsage = errors.New("budget: no usage in response")

// MaxSSELine is how much of one event's data StreamUsage buffers before it decides, from the
// event's leading "type", whether it needs the rest. An event that cannot carry usage
// (content_block_delta, content_block_start: a web fetch or MCP result can be megabytes on one
// line) is skipped past the cap without being held; one that can (message_start,
// message_delta, error) is held whole, up to MaxUsageEvent. Only an event whose type cannot be
// read from its first MaxSSELine bytes, or a usage event over MaxUsageEvent, stops tracking.
const MaxSSELine = 1 << 20

// MaxUsageEvent bounds one usage-bearing event held in memory: the bound of a whole
// non-streaming response.
const MaxUsageEvent = 64 << 20

// usageEvents are the event types that may carry usage or end the stream's accounting.
func usageEvent(typ string) bool {
	switch typ {
	case "message_start", "message_delta", "message_stop", "error", "content_block_start":
		return true
	}
	return false
}

// wireUsage is the `usage` object as sent: every field may be absent or null, and in a
// message_delta each present field is the cumulative value so far.
type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	ServerToolUse *struct {
		WebSearchRequests *int64 `json:"web_search_requests"`
		WebFetchRequests  *int64 `json:"web_fetch_requests"`
	} `json:"server_tool_use"`
}

// applyTo overwrites the fields of u that w carries; it reports false for a negative count.
func (w *wireUsage) applyTo(u *Usage) bool {
	var oneHour, search, fetch *int64
	if w.CacheCreation != nil {
		oneHour = w.CacheCreation.Ephemeral1h
	}
	if w.ServerToolUse != nil {
		search, fetch = w.ServerToolUse.WebSearchRequests, w.ServerToolUse.WebFetchRequests
	}
	for _, f := range []struct {
		src *int64
		dst *int64
	}{
		{w.InputTokens, &u.InputTokens},
		{w.OutputTokens, &u.OutputTokens},
		{w.CacheReadInputTokens, &u.CacheReadInputTokens},
		{w.CacheCreationInputTokens, &u.CacheCreationInputTokens},
		{oneHour, &u.CacheCreation1hInputTokens},
		{search, &u.WebSearchRequests},
		{fetch, &u.WebFetchRequests},
	} {
		if f.src == nil {
			continue
		}
		if *f.src < 0 {
			return false
		}
		*f.dst = *f.src
	}
	return true
}

// UsageFromBody extracts the usage of a non-streaming Messages response,
// `{"type":"message",...,"usage":{"input_tokens":..,"output_tokens":..}}`. An error response,
// a body without usage, or one without input_tokens and output_tokens wraps ErrNoUsage; a
// negative count wraps ErrNegative.
func UsageFromBody(body []byte) (Usage, error) {
	u, _, _, err := ResponseFromBody(body)
	return u, err
}

// ResponseFromBody is UsageFromBody that also returns the response's model and how many
// server_tool_use blocks it holds, by tool name (web_search, web_fetch, ...).
func ResponseFromBody(body []byte) (Usage, string, map[string]int64, error) {
	var resp struct {
		Type    string     `json:"type"`
		Model   string     `json:"model"`
		Usage   *wireUsage `json:"usage"`
		Content []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"content"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return Usage{}, "", nil, fmt.Errorf("%w: %w", ErrNoUsage, err)
	}
	if resp.Type == "error" {
		return Usage{}, "", nil, fmt.Errorf("%w: the response is an error", ErrNoUsage)
	}
	if resp.Usage == nil || resp.Usage.InputTokens == nil || resp.Usage.OutputTokens == nil {
		return Usage{}, resp.Model, nil, fmt.Errorf("%w: usage.input_tokens and usage.output_tokens are required", ErrNoUsage)
	}
	var u Usage
	if !resp.Usage.applyTo(&u) {
		return Usage{}, resp.Model, nil, fmt.Errorf("budget: usage in response: %w", ErrNegative)
	}
	var uses map[string]int64
	for _, b := range resp.Content {
		if b.Type == "server_tool_use" {
			if uses == nil {
				uses = map[string]int64{}
			}
			uses[b.Name]++
		}
	}
	return u, resp.Model, uses, nil
}

// StreamUsage follows the usage of a streaming Messages response as its server-sent events
// pass through: write every byte of the stream to it, in any chunking, then ask Usage.
//
// It tracks message_start.message.usage (input, cache and the first output count) and the
// model, then each message_delta.usage, whose present fields are cumulative and replace the
// earlier values, and counts the server_tool_use blocks the stream opens. It never fails a
// Write, so it can sit behind an io.MultiWriter or io.TeeReader; what it could not follow
// shows in Usage's ok and in Complete. Lines have no length cap: an event that cannot carry
// usage is skipped past MaxSSELine without being held (see MaxSSELine). It is not safe for
// concurrent use.
type StreamUsage struct {
	line    []byte // the current, unterminated line
	data    []byte // the current event's data field
	hasData bool
	afterCR bool // the previous byte ended a line with '\r': a following '\n' is part of it
	// skipLine: the rest of the current line is dropped unread; skipEvent: so is the rest of
	// the current event (its type says it carries no usage). limit is what the current event
	// may be held up to: MaxSSELine until its type is known to need more.
	skipLine  bool
	skipEvent bool
	limit     int
	uses      map[string]int64

	lost    bool // a line or event over MaxSSELine, or an event that did not parse
	started bool // message_start carried usage
	delta   bool // a message_delta carried usage
	stopped bool // message_stop
	errored bool // an error event
	// produced: a content block started or grew after message_start, so
	// output the final message_delta would count may have been billed.
	produced bool
	model    string
	usage    Usage
}

// NewStreamUsage returns a StreamUsage ready for the first byte of a stream.
func NewStreamUsage() *StreamUsage { return &StreamUsage{limit: MaxSSELine} }

// Write consumes the next bytes of the stream. It always returns len(p), nil.
func (s *StreamUsage) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !s.lost {
		if s.afterCR {
			s.afterCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.appendLine(p)
			break
		}
		s.appendLine(p[:i])
		if s.lost {
			break
		}
		s.afterCR = p[i] == '\r'
		if s.skipLine {
			s.skipLine = false
		} else {
			s.processLine(s.line)
		}
		s.line = s.line[:0]
		if cap(s.line) > MaxSSELine {
			s.line = nil // do not keep a large event's buffer for the rest of the stream
		}
		p = p[i+1:]
	}
	return n, nil
}

func (s *StreamUsage) appendLine(b []byte) {
	if s.skipLine {
		return
	}
	if s.skipEvent {
		// The lines of a skipped event are never read; only whether a line is
		// empty (the event's end) matters.
		if len(s.line) == 0 && len(b) > 0 {
			s.line = append(s.line, ':')
		}
		return
	}
	if room := s.limit - len(s.data) - len(s.line); len(b) > room {
		// Take what fits, so the decision sees the event's start, then decide.
		s.line = append(s.line, b[:max(room, 0)]...)
		b = b[max(room, 0):]
		s.overLimit()
		if s.lost || s.skipLine {
			return
		}
		if len(s.data)+len(s.line)+len(b) > s.limit {
			s.stopTracking()
			return
		}
	}
	s.line = append(s.line, b...)
}

// overLimit decides what to do with an event that reached its limit: skip the rest of it if
// its type says it carries no usage, hold it up to MaxUsageEvent if it may, and give up if the
// type cannot be read or the event is over even that.
func (s *StreamUsage) overLimit() {
	field, value := splitField(s.line)
	if string(field) != "data" {
		s.skipLine = true // event:, id:, retry: and comments are never read
		s.line = s.line[:0]
		return
	}
	if s.limit >= MaxUsageEvent {
		s.stopTracking()
		return
	}
	prefix := value
	if s.hasData {
		prefix = s.data
	}
	typ, ok := leadingType(prefix)
	switch {
	case !ok:
		s.stopTracking()
	case usageEvent(typ):
		s.limit = MaxUsageEvent
	default:
		s.skipLine, s.skipEvent = true, true
		s.line, s.data = s.line[:0], s.data[:0]
		s.produced = s.produced || (s.started && typ != "ping")
	}
}

// leadingType reads the "type" member that opens an event's JSON data, from however much of
// the data has arrived.
func leadingType(prefix []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	if tok, err := dec.Token(); err != nil || tok != "type" {
		return "", false
	}
	tok, err := dec.Token()
	typ, isString := tok.(string)
	return typ, err == nil && isString && typ != ""
}

func splitField(line []byte) (field, value []byte) {
	field = line
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	return field, value
}

// stopTracking gives up on the stream and frees its buffers: usage can no longer be trusted.
func (s *StreamUsage) stopTracking() {
	s.lost = true
	s.line, s.data = nil, nil
}

// processLine applies one SSE line (https://html.spec.whatwg.org/multipage/server-sent-events.html).
func (s *StreamUsage) processLine(line []byte) {
	if len(line) == 0 {
		if s.hasData && !s.skipEvent {
			s.dispatch(s.data)
		}
		s.data, s.hasData, s.skipEvent, s.limit = s.data[:0], false, false, MaxSSELine
		if cap(s.data) > MaxSSELine {
			s.data = nil // do not keep a large event's buffer for the rest of the stream
		}
		return
	}
	if line[0] == ':' || s.skipEvent {
		return // a comment, or more of an event being skipped
	}
	field, value := splitField(line)
	if string(field) != "data" {
		return // event, id, retry: the JSON's "type" says what the event is
	}
	if s.hasData {
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, value...)
	s.hasData = true
}

func (s *StreamUsage) dispatch(data []byte) {
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Model string     `json:"model"`
			Usage *wireUsage `json:"usage"`
		} `json:"message"`
		Usage        *wireUsage `json:"usage"`
		ContentBlock *struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"content_block"`
	}
	if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" {
		// An event we cannot read may be the one that carried the final counts.
		s.stopTracking()
		return
	}
	switch ev.Type {
	case "message_start":
		if ev.Message == nil {
			return
		}
		s.model = ev.Message.Model
		if ev.Message.Usage != nil {
			var u Usage
			if !ev.Message.Usage.applyTo(&u) {
				s.stopTracking()
				return
			}
			s.usage, s.started = u, true
		}
	case "message_delta":
		if ev.Usage != nil {
			if !ev.Usage.applyTo(&s.usage) {
				s.stopTracking()
				return
			}
			s.delta = true
		}
	case "content_block_start", "content_block_delta":
		s.produced = s.produced || s.started
		if ev.ContentBlock != nil && ev.ContentBlock.Type == "server_tool_use" {
			if s.uses == nil {
				s.uses = map[string]int64{}
			}
			s.uses[ev.ContentBlock.Name]++
		}
	case "message_stop":
		s.stopped = true
	case "error":
		s.errored = true
	}
}

// Usage returns the usage seen so far. ok is false when no message_start usage was seen or
// when tracking stopped (an over-long line or an unreadable event); the caller then settles
// pessimistically. With ok true but Complete false, the output count is a lower bound.
func (s *StreamUsage) Usage() (Usage, bool) {
	if !s.started || s.lost {
		return Usage{}, false
	}
	return s.usage, true
}

// Model returns the model named by message_start, or "".
func (s *StreamUsage) Model() string { return s.model }

// ServerToolUses returns how many server_tool_use blocks the stream opened, by tool name.
func (s *StreamUsage) ServerToolUses() map[string]int64 { return s.uses }

// Produced reports whether, after message_start, the stream started or grew a content block
// (or carried an event too large to read that is not a ping): output was then generated that
// only the final message_delta counts, so with Complete false Usage's output count is not a
// bound on what was billed.
func (s *StreamUsage) Produced() bool { return s.produced }

// Errored reports whether the stream carried an error event: the upstream
// said it stopped.
func (s *StreamUsage) Errored() bool { return s.errored }

// Complete reports whether the stream ran to message_stop with final usage from a
// message_delta, no error event, and nothing lost: Usage is then the upstream's final count.
func (s *StreamUsage) Complete() bool {
	return s.started && s.delta && s.stopped && !s.errored && !s.lost
}
