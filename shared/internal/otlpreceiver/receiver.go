// Package otlpreceiver is an OTLP/HTTP receiver on loopback for tests: it
// decodes what an exporter posts to /v1/traces and /v1/metrics with the
// OTLP protobuf definitions (go.opentelemetry.io/proto/otlp) and keeps it,
// so a test reads the spans and data points a real exporter sent.
package otlpreceiver

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps every export request it was sent.
type Receiver struct {
	URL string

	mu      sync.Mutex
	traces  []*coltrace.ExportTraceServiceRequest
	metrics []*colmetrics.ExportMetricsServiceRequest
}

// Start serves a receiver on 127.0.0.1 until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: r}}
	srv.Start()
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	var msg, reply proto.Message
	switch req.URL.Path {
	case "/v1/traces":
		m := &coltrace.ExportTraceServiceRequest{}
		msg, reply = m, &coltrace.ExportTraceServiceResponse{}
		defer func() { r.mu.Lock(); r.traces = append(r.traces, m); r.mu.Unlock() }()
	case "/v1/metrics":
		m := &colmetrics.ExportMetricsServiceRequest{}
		msg, reply = m, &colmetrics.ExportMetricsServiceResponse{}
		defer func() { r.mu.Lock(); r.metrics = append(r.metrics, m); r.mu.Unlock() }()
	default:
		http.NotFound(w, req)
		return
	}
	if err := proto.Unmarshal(body, msg); err != nil {
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	out, _ := proto.Marshal(reply)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns every span received, in arrival order.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, req := range r.traces {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

// Metrics returns every metric received by name (the last export's wins:
// the SDK's cumulative export carries the whole count).
func (r *Receiver) Metrics() map[string]*metricspb.Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*metricspb.Metric{}
	for _, req := range r.metrics {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					out[m.Name] = m
				}
			}
		}
	}
	return out
}

// Dump is everything received as JSON text, for a canary sweep to read.
func (r *Receiver) Dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, m := range r.traces {
		b.WriteString(protojson.Format(m))
		b.WriteByte('\n')
	}
	for _, m := range r.metrics {
		b.WriteString(protojson.Format(m))
		b.WriteByte('\n')
	}
	return b.String()
}

// Attrs is a span's or data point's attributes as strings.
func Attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = fmt.Sprint(v.IntValue)
		default:
			out[kv.Key] = kv.Value.String()
		}
	}
	return out
}
