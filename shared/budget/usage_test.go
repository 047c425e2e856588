package budget

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type streamWant struct {
	usage    Usage
	ok       bool
	complete bool
	model    string
}

// The transcripts copy the event shapes of Anthropic's "Streaming Messages" documentation
// (https://platform.claude.com/docs/en/build-with-claude/streaming) and of the SDKs'
// MessageDeltaUsage, whose input and cache fields are cumulative and nullable.
var streamTranscripts = map[string]streamWant{
	"text.sse":     {Usage{InputTokens: 25, OutputTokens: 15}, true, true, "claude-sonnet-4-5-20250929"},
	"tool_use.sse": {Usage{InputTokens: 472, OutputTokens: 89}, true, true, "claude-opus-4-5-20251101"},
	// Two message_deltas: the second's null input_tokens keeps the earlier value.
	"cumulative_crlf.sse": {Usage{InputTokens: 12, OutputTokens: 42, CacheReadInputTokens: 4096, CacheCreationInputTokens: 2048}, true, true, "claude-haiku-4-5-20251001"},
	"overloaded.sse":      {Usage{InputTokens: 100, OutputTokens: 1}, true, false, "claude-sonnet-4-5"},
	"no_start.sse":        {Usage{}, false, false, ""},
	"cr_multiline.sse":    {Usage{InputTokens: 3, OutputTokens: 9}, true, true, "claude-opus-4-5"},
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func streamResult(s *StreamUsage) streamWant {
	u, ok := s.Usage()
	return streamWant{u, ok, s.Complete(), s.Model()}
}

// TestStreamUsageEverySplit feeds each transcript in two writes split at every byte offset,
// and byte by byte: the result must not depend on where the network cut the stream.
func TestStreamUsageEverySplit(t *testing.T) {
	t.Parallel()
	for name, want := range streamTranscripts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data := readTestdata(t, name)
			for i := 0; i <= len(data); i++ {
				s := NewStreamUsage()
				for _, part := range [][]byte{data[:i], data[i:]} {
					if n, err := s.Write(part); n != len(part) || err != nil {
						t.Fatalf("Write = %d, %v, want %d, nil", n, err, len(part))
					}
				}
				if diff := cmp.Diff(want, streamResult(s), cmp.AllowUnexported(streamWant{})); diff != "" {
					t.Fatalf("split at %d: mismatch (-want +got):\n%s", i, diff)
				}
			}
			s := NewStreamUsage()
			for i := range data {
				s.Write(data[i : i+1])
			}
			if diff := cmp.Diff(want, streamResult(s), cmp.AllowUnexported(streamWant{})); diff != "" {
				t.Fatalf("byte by byte: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamUsagePartialStream(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "tool_use.sse")
	cut := bytes.Index(data, []byte("event: message_delta"))
	s := NewStreamUsage()
	s.Write(data[:cut])
	u, ok := s.Usage()
	if !ok || u.InputTokens != 472 || u.OutputTokens != 2 || s.Complete() {
		t.Errorf("cut before message_delta: Usage() = %+v, %v, Complete() = %v, want the message_start counts, ok, incomplete", u, ok, s.Complete())
	}
	// An event without its terminating blank line is not dispatched (SSE rules).
	s = NewStreamUsage()
	s.Write([]byte(`data: {"type":"message_start","message":{"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n"))
	if _, ok := s.Usage(); ok {
		t.Errorf("Usage() ok before the event's blank line")
	}
}

// TestStreamUsageProduced: content after message_start is what makes a
// cut stream's output count unbounded; a ping or a bare message_start is not.
func TestStreamUsageProduced(t *testing.T) {
	t.Parallel()
	data := readTestdata(t, "tool_use.sse")
	start := bytes.Index(data, []byte("event: content_block_start"))
	cut := bytes.Index(data, []byte("event: message_delta"))
	if start < 0 || cut < start {
		t.Fatal("tool_use.sse has no content before message_delta")
	}
	s := NewStreamUsage()
	s.Write(data[:start])
	s.Write([]byte("event: ping\ndata: {\"type\":\"ping\"}\n\n"))
	if s.Produced() {
		t.Error("Produced() after message_start and a ping, want false")
	}
	s.Write(data[start:cut])
	if !s.Produced() {
		t.Error("Produced() after content blocks, want true")
	}
	// A content event too long to hold is content too.
	s = NewStreamUsage()
	s.Write(data[:start])
	s.Write([]byte(`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + strings.Repeat("x", MaxSSELine+1) + "\"}}\n\n"))
	if !s.Produced() {
		t.Error("Produced() after an over-long content_block_delta, want true")
	}
}

func TestStreamUsageStopsTracking(t *testing.T) {
	t.Parallel()
	start := readTestdata(t, "text.sse")
	tests := []struct {
		name string
		tail string
	}{
		{"line over the cap", "data: " + strings.Repeat("x", MaxSSELine) + "\n\n"},
		{"event over the cap in many lines", strings.Repeat("data: "+strings.Repeat("y", 1000)+"\n", MaxSSELine/1000+1) + "\n"},
		{"unreadable event", "data: {not json\n\n"},
		{"event without a type", "data: {}\n\n"},
		{"negative count", `data: {"type":"message_delta","usage":{"output_tokens":-5}}` + "\n\n"},
		{"fractional count", `data: {"type":"message_delta","usage":{"output_tokens":1.5}}` + "\n\n"},
	}
	for _, tt := range tests {
		s := NewStreamUsage()
		s.Write(start)
		s.Write([]byte(tt.tail))
		if u, ok := s.Usage(); ok || s.Complete() {
			t.Errorf("%s: Usage() = %+v, %v, Complete() = %v, want not ok, incomplete", tt.name, u, ok, s.Complete())
		}
		if len(s.line) != 0 || cap(s.data) > MaxSSELine+1 {
			t.Errorf("%s: buffers kept after tracking stopped: line %d, data cap %d", tt.name, len(s.line), cap(s.data))
		}
		// Further writes are accepted and ignored.
		if n, err := s.Write(start); n != len(start) || err != nil {
			t.Errorf("%s: Write after stop = %d, %v", tt.name, n, err)
		}
	}
}

func TestUsageFromBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    Usage
		wantErr error
	}{
		{"documented response", string(readTestdata(t, "body.json")),
			Usage{InputTokens: 2095, OutputTokens: 503, CacheReadInputTokens: 2051, CacheCreationInputTokens: 2051}, nil},
		{"no cache fields", `{"type":"message","usage":{"input_tokens":10,"output_tokens":3}}`, Usage{InputTokens: 10, OutputTokens: 3}, nil},
		{"null cache fields", `{"usage":{"input_tokens":10,"output_tokens":3,"cache_read_input_tokens":null}}`, Usage{InputTokens: 10, OutputTokens: 3}, nil},
		{"error body", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Usage{}, ErrNoUsage},
		{"no usage", `{"type":"message"}`, Usage{}, ErrNoUsage},
		{"missing output", `{"usage":{"input_tokens":10}}`, Usage{}, ErrNoUsage},
		{"not json", `<html>`, Usage{}, ErrNoUsage},
		{"negative", `{"usage":{"input_tokens":-1,"output_tokens":3}}`, Usage{}, ErrNegative},
	}
	for _, tt := range tests {
		got, err := UsageFromBody([]byte(tt.body))
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("%s: UsageFromBody() = %+v, %v, want %+v, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzStreamUsage: no panic, and the result never depends on how the bytes were chunked.
func FuzzStreamUsage(f *testing.F) {
	for name := range streamTranscripts {
		f.Add(readTestdata(f, name), uint16(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		whole := NewStreamUsage()
		whole.Write(data)
		chunked := NewStreamUsage()
		step := int(chunk)%64 + 1
		for i := 0; i < len(data); i += step {
			chunked.Write(data[i:min(i+step, len(data))])
		}
		if a, b := streamResult(whole), streamResult(chunked); a != b {
			t.Fatalf("whole %+v != chunked by %d %+v", a, step, b)
		}
		if u, ok := whole.Usage(); ok {
			if err := u.Validate(); err != nil {
				t.Fatalf("Usage() = %+v, ok: %v", u, err)
			}
		}
	})
}

// TestStreamUsageLongLines: a content event of 2 MiB on one line (a web fetch result) is
// skipped without being held and the usage still reconciles exactly; a long usage event is
// read whole; every split of the stream gives the same answer.
func TestStreamUsageLongLines(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("z", 2<<20)
	start := `event: message_start` + "\n" + `data: {"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":7,"output_tokens":1,"cache_creation_input_tokens":40,"cache_creation":{"ephemeral_1h_input_tokens":30}}}}` + "\n\n"
	srv := `data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_fetch","input":{}}}` + "\n\n"
	fetched := `event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"web_fetch_tool_result","content":"` + big + `"}}` + "\n\n"
	delta := `data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"` + big + `"},` + "\n" + `data: "more":1}` + "\n\n"
	longUsage := `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","pad":"` + big + `"},"usage":{"output_tokens":99,"server_tool_use":{"web_fetch_requests":1}}}` + "\n\n"
	stop := `data: {"type":"message_stop"}` + "\n\n"
	data := []byte(start + srv + fetched + delta + longUsage + stop)
	want := Usage{InputTokens: 7, OutputTokens: 99, CacheCreationInputTokens: 40, CacheCreation1hInputTokens: 30, WebFetchRequests: 1}
	for _, step := range []int{len(data), 1 << 20, 65536, 4093} {
		s := NewStreamUsage()
		for i := 0; i < len(data); i += step {
			s.Write(data[i:min(i+step, len(data))])
		}
		u, ok := s.Usage()
		if !ok || !s.Complete() || u != want {
			t.Errorf("chunks of %d: Usage() = %+v, %v, Complete() = %v; want %+v, complete", step, u, ok, s.Complete(), want)
		}
		if n := s.ServerToolUses()["web_fetch"]; n != 1 {
			t.Errorf("chunks of %d: %d web_fetch server_tool_use blocks, want 1", step, n)
		}
		if cap(s.data) > MaxSSELine+1 || cap(s.line) > MaxSSELine+1 {
			t.Errorf("chunks of %d: a large event's buffer was kept (data %d, line %d)", step, cap(s.data), cap(s.line))
		}
	}
	// A usage event whose type cannot be read from its start gives up, never guesses.
	s := NewStreamUsage()
	s.Write([]byte(start + `data: {"usage":{"output_tokens":1},"type":"message_delta","pad":"` + big + `"}` + "\n\n" + stop))
	if _, ok := s.Usage(); ok {
		t.Error("an event over the cap whose type is not its first member was trusted")
	}
}
