package budget

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNoUsage reports a response that does not carry a usable `usage` object.
var ErrNoUsage = errors.New("budget: no usage in response")

// MaxSSELine caps one line (and one event's data) that StreamUsage buffers. Anthropic's events
// are small (a delta carries a few tokens), so a longer line means something other than a
// Messages stream is passing through; StreamUsage then stops tracking rather than grow.
const MaxSSELine = 1 << 20

// wireUsage is the `usage` object as sent: every field may be absent or null, and in a
// message_delta each present field is the cumulative value so far.
type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

// applyTo overwrites the fields of u that w carries; it reports false for a negative count.
func (w *wireUsage) applyTo(u *Usage) bool {
	for _, f := range []struct {
		src *int64
		dst *int64
	}{
		{w.InputTokens, &u.InputTokens},
		{w.OutputTokens, &u.OutputTokens},
		{w.CacheReadInputTokens, &u.CacheReadInputTokens},
		{w.CacheCreationInputTokens, &u.CacheCreationInputTokens},
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
	var resp struct {
		Type  string     `json:"type"`
		Usage *wireUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return Usage{}, fmt.Errorf("%w: %w", ErrNoUsage, err)
	}
	if resp.Type == "error" {
		return Usage{}, fmt.Errorf("%w: the response is an error", ErrNoUsage)
	}
	if resp.Usage == nil || resp.Usage.InputTokens == nil || resp.Usage.OutputTokens == nil {
		return Usage{}, fmt.Errorf("%w: usage.input_tokens and usage.output_tokens are required", ErrNoUsage)
	}
	var u Usage
	if !resp.Usage.applyTo(&u) {
		return Usage{}, fmt.Errorf("budget: usage in response: %w", ErrNegative)
	}
	return u, nil
}

// StreamUsage follows the usage of a streaming Messages response as its server-sent events
// pass through: write every byte of the stream to it, in any chunking, then ask Usage.
//
// It tracks message_start.message.usage (input, cache and the first output count) and the
// model, then each message_delta.usage, whose present fields are cumulative and replace the
// earlier values. It never fails a Write, so it can sit behind an io.MultiWriter or
// io.TeeReader; what it could not follow shows in Usage's ok and in Complete. Memory is
// bounded by MaxSSELine. It is not safe for concurrent use.
type StreamUsage struct {
	line    []byte // the current, unterminated line
	data    []byte // the current event's data field
	hasData bool
	afterCR bool // the previous byte ended a line with '\r': a following '\n' is part of it

	lost    bool // a line or event over MaxSSELine, or an event that did not parse
	started bool // message_start carried usage
	delta   bool // a message_delta carried usage
	stopped bool // message_stop
	errored bool // an error event
	model   string
	usage   Usage
}

// NewStreamUsage returns a StreamUsage ready for the first byte of a stream.
func NewStreamUsage() *StreamUsage { return &StreamUsage{} }

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
		s.processLine(s.line)
		s.line = s.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (s *StreamUsage) appendLine(b []byte) {
	if len(s.line)+len(b) > MaxSSELine {
		s.stopTracking()
		return
	}
	s.line = append(s.line, b...)
}

// stopTracking gives up on the stream and frees its buffers: usage can no longer be trusted.
func (s *StreamUsage) stopTracking() {
	s.lost = true
	s.line, s.data = nil, nil
}

// processLine applies one SSE line (https://html.spec.whatwg.org/multipage/server-sent-events.html).
func (s *StreamUsage) processLine(line []byte) {
	if len(line) == 0 {
		if s.hasData {
			s.dispatch(s.data)
		}
		s.data, s.hasData = s.data[:0], false
		return
	}
	if line[0] == ':' {
		return // comment
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	if string(field) != "data" {
		return // event, id, retry: the JSON's "type" says what the event is
	}
	if len(s.data)+len(value)+1 > MaxSSELine {
		s.stopTracking()
		return
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
		Usage *wireUsage `json:"usage"`
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

// Complete reports whether the stream ran to message_stop with final usage from a
// message_delta, no error event, and nothing lost: Usage is then the upstream's final count.
func (s *StreamUsage) Complete() bool {
	return s.started && s.delta && s.stopped && !s.errored && !s.lost
}
