package telemetry

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

// TestActsHaveNoPayloadFields: the structs that become attributes hold
// strings, integers and times only (no any, bytes, maps or raw JSON), and
// no field is named for a payload, so a tool input, a result, a prompt or a
// token has nowhere to go.
func TestActsHaveNoPayloadFields(t *testing.T) {
	t.Parallel()
	allowed := map[reflect.Kind]bool{reflect.String: true, reflect.Int64: true}
	timeType := reflect.TypeOf(time.Time{})
	banned := []string{"input", "result", "prompt", "token", "secret", "credential", "content", "body", "reason", "text"}
	for _, v := range []any{Decision{}, Brokered{}, ModelRequest{}, ApprovalWait{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !allowed[f.Type.Kind()] && f.Type != timeType {
				t.Errorf("%s.%s is a %s: only strings, int64 and times may become attributes", typ.Name(), f.Name, f.Type)
			}
			name := strings.ToLower(f.Name)
			for _, b := range banned {
				if strings.Contains(name, b) && !strings.HasSuffix(name, "tokens") {
					t.Errorf("%s.%s is named for a payload (%s)", typ.Name(), f.Name, b)
				}
			}
		}
	}
}

// TestValueBounded: every string is cut to MaxValueLen bytes on a rune
// boundary and made valid UTF-8.
func TestValueBounded(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "run-1", strings.Repeat("a", 1000), strings.Repeat("é", 100), "\xff\xfe" + strings.Repeat("x", 200)} {
		got := value(in)
		if len(got) > MaxValueLen || !utf8.ValidString(got) {
			t.Errorf("value(%q) = %q (%d bytes), want valid UTF-8 of at most %d", in, got, len(got), MaxValueLen)
		}
		if len(in) <= MaxValueLen && utf8.ValidString(in) && got != in {
			t.Errorf("value(%q) = %q, want it unchanged", in, got)
		}
	}
}

// TestNilIsOff: every method of a nil Telemetry records nothing and does
// not panic, and Extract leaves the context as it was.
func TestNilIsOff(t *testing.T) {
	t.Parallel()
	var tel *Telemetry
	ctx := context.Background()
	now := time.Now()
	tel.Decided(ctx, now, Decision{Run: "r"})
	tel.BrokeredCall(ctx, now, Brokered{Run: "r"})
	tel.ModelRequested(ctx, now, ModelRequest{Run: "r", Status: 200})
	tel.ApprovalSettled(ctx, ApprovalWait{RequestedAt: now, SettledAt: now})
	tel.RunHalted(ctx, "unasked")
	tel.RunEndedByLauncher(ctx, "failed")
	tel.BudgetReserved(ctx, 1)
	tel.BudgetSpent(ctx, 1)
	c, end := tel.StartRequest(ctx, "GET /healthz")
	end(200)
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if c != ctx || tel.Extract(ctx, h) != ctx {
		t.Error("a nil Telemetry changed the context")
	}
}

// TestExtractTraceparent: a runner's traceparent becomes the remote parent;
// a malformed one is ignored.
func TestExtractTraceparent(t *testing.T) {
	t.Parallel()
	tel := &Telemetry{}
	ctx := tel.Extract(context.Background(), http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("Extract(traceparent) = %v, want the runner's span as remote parent", sc)
	}
	// tracestate never crosses, and an unsampled parent cannot switch
	// fluidbox's spans off.
	ctx = tel.Extract(context.Background(), http.Header{
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, "Tracestate": {"canary=SECRETCANARY"}})
	if sc := trace.SpanContextFromContext(ctx); sc.TraceState().Len() != 0 || !sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("Extract(unsampled, tracestate) = %v, want the ids, sampled, no tracestate", sc)
	}
	for _, bad := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if sc := trace.SpanContextFromContext(tel.Extract(context.Background(), http.Header{"Traceparent": {bad}})); sc.IsValid() {
			t.Errorf("Extract(%q) = %v, want no parent", bad, sc)
		}
	}
}
