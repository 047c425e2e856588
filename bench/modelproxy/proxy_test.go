package modelproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bytedance/sonic"

	"github.com/fluidbox/fluidbox/shared/modelproxy"
)

// requestSize is the size of the benchmarked request.
const requestSize = 100 << 10

// betas are the anthropic-beta values Claude Code 2.1.332 sends.
const betas = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,per-turn-control-2026-07-01,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,effort-2025-11-24"

// request is Claude Code's captured request after a tool call, grown to
// requestSize with more tool turns of the same shape (a Bash call and its
// output), so the inspector reads as many blocks as a real conversation.
func request(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "shared", "modelproxy", "testdata", "claude-code-2.1.332-tool-result.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		tb.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		tb.Fatal(err)
	}
	output := strings.Repeat("drwxr-xr-x 2 user user 4096 Dec  1 12:00 src\n", 20)
	for i := 0; ; i++ {
		top["messages"], _ = json.Marshal(msgs)
		out, err := json.Marshal(top)
		if err != nil {
			tb.Fatal(err)
		}
		if len(out) >= requestSize {
			return out
		}
		id := fmt.Sprintf("toolu_%04d", i)
		use, _ := json.Marshal(map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "Listing the directory."},
			map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": "ls -la src", "description": "List src"}},
		}})
		res, _ := json.Marshal(map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": id, "content": output, "is_error": false},
		}})
		msgs = append(msgs, use, res)
	}
}

// stream is a short streamed answer, as the upstream sends one.
const stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-5-5\",\"content\":[],\"usage\":{\"input_tokens\":30000,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":12}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// forwarder is a loopback upstream behind a plain httputil.ReverseProxy,
// both on 127.0.0.1, and a client for it.
type forwarder struct {
	url, upstream string
	client        *http.Client
}

func newForwarder(tb testing.TB) *forwarder {
	tb.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	tb.Cleanup(upstream.Close)
	target, err := url.Parse(upstream.URL)
	if err != nil {
		tb.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // a stream is flushed as it comes, as the model proxy does
	front := httptest.NewServer(rp)
	tb.Cleanup(front.Close)
	return &forwarder{url: front.URL + "/v1/messages?beta=true", upstream: upstream.URL, client: front.Client()}
}

func (f *forwarder) forward(tb testing.TB, body []byte) {
	req, err := http.NewRequest(http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Beta", betas)
	resp, err := f.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(stream)) {
		tb.Fatalf("forwarded: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
}

func inspect(tb testing.TB, h http.Header, body []byte) {
	in, ref := modelproxy.Inspect(body, h, "beta=true")
	if ref != nil {
		tb.Fatalf("refused: %s", ref.Message)
	}
	if _, err := in.Body(body); err != nil {
		tb.Fatal(err)
	}
}

func header() http.Header {
	h := http.Header{}
	h.Set("Anthropic-Beta", betas)
	return h
}

// BenchmarkInspect100KB is the inspector alone on the 100 KB request.
func BenchmarkInspect100KB(b *testing.B) {
	body, h := request(b), header()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		inspect(b, h, body)
	}
}

// BenchmarkReverseProxy100KB is the same request forwarded by a plain
// httputil.ReverseProxy to the loopback upstream, its answer read whole.
func BenchmarkReverseProxy100KB(b *testing.B) {
	body, f := request(b), newForwarder(b)
	f.forward(b, body) // the connections are open before timing starts
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		f.forward(b, body)
	}
}

// BenchmarkSonicValid100KB is the floor: a SIMD syntax check of the same
// request, nothing more (no duplicate keys, no field read).
func BenchmarkSonicValid100KB(b *testing.B) {
	body := request(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		valid(b, sonic.Valid, body)
	}
}

func valid(tb testing.TB, check func([]byte) bool, body []byte) {
	if !check(body) {
		tb.Fatal("the request is not valid JSON")
	}
}

// BenchmarkInspectShare does the inspection, the two syntax checks and the
// forwarding in each iteration, in turn so that all see the same machine,
// and reports each check's time as a share of the forwarding's latency:
// inspect-%, the figure the model proxy's design aims to hold under 5%
// (nothing turns inspection off), sonic-valid-% and json-valid-%, what
// reading the body once for its syntax alone costs.
func BenchmarkInspectShare(b *testing.B) {
	body, h, f := request(b), header(), newForwarder(b)
	f.forward(b, body)
	var inspecting, sonicValid, jsonValid, forwarding time.Duration
	for b.Loop() {
		t0 := time.Now()
		inspect(b, h, body)
		t1 := time.Now()
		valid(b, sonic.Valid, body)
		t2 := time.Now()
		valid(b, json.Valid, body)
		t3 := time.Now()
		f.forward(b, body)
		inspecting += t1.Sub(t0)
		sonicValid += t2.Sub(t1)
		jsonValid += t3.Sub(t2)
		forwarding += time.Since(t3)
	}
	b.ReportMetric(float64(inspecting.Nanoseconds())/float64(b.N), "inspect-ns/op")
	b.ReportMetric(float64(forwarding.Nanoseconds())/float64(b.N), "forward-ns/op")
	b.ReportMetric(100*float64(inspecting)/float64(forwarding), "inspect-%")
	b.ReportMetric(100*float64(sonicValid)/float64(forwarding), "sonic-valid-%")
	b.ReportMetric(100*float64(jsonValid)/float64(forwarding), "json-valid-%")
}
