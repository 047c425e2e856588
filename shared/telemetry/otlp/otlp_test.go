package otlp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/otlpreceiver"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/telemetry/otlp"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestEnabled: export is on only with an OTLP endpoint, and
// OTEL_SDK_DISABLED=true turns it off whatever else is set.
func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "false"}, true},
	} {
		if got := otlp.Enabled(env(c.env)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
	p, err := otlp.FromEnv(context.Background(), env(nil), "gate")
	if err != nil || p != nil || p.Telemetry() != nil || p.Flush(context.Background()) != nil {
		t.Errorf("FromEnv(no endpoint) = %v, %v; want nil (off), which flushes nothing", p, err)
	}
}

// TestExport: a decision, an approval wait and a brokered call reach an
// OTLP/HTTP receiver as spans with their attributes, and as metrics.
func TestExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rcv := otlpreceiver.Start(t)
	p, err := otlp.New(ctx, rcv.URL, "fluidbox-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(ctx) })
	tel := p.Telemetry()
	start := time.Now().Add(-time.Second)
	tel.Decided(ctx, start, telemetry.Decision{Run: "run-1", Call: "c-1", Tool: "Bash", Decision: vocab.Deny, Source: "policy", Rule: "no-push"})
	tel.ApprovalSettled(ctx, telemetry.ApprovalWait{Run: "run-1", Call: "c-2", Approval: "apr-1", Outcome: vocab.ApprovalDenied, RequestedAt: start, SettledAt: start.Add(3 * time.Second)})
	tel.BrokeredCall(ctx, start, telemetry.Brokered{Run: "run-1", Call: "c-3", Tool: "mcp__jira__echo", Connection: "con-1", Outcome: telemetry.OutcomeOK})
	tel.RunHalted(ctx, "unasked")
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"fluidbox.permission.decide": {telemetry.KeyRun: "run-1", telemetry.KeyCall: "c-1", telemetry.KeyTool: "Bash", telemetry.KeyDecision: "deny", telemetry.KeySource: "policy", telemetry.KeyRule: "no-push"},
		"fluidbox.approval.wait":     {telemetry.KeyRun: "run-1", telemetry.KeyApproval: "apr-1", telemetry.KeyOutcome: "denied"},
		"fluidbox.broker.call":       {telemetry.KeyTool: "mcp__jira__echo", telemetry.KeyConnection: "con-1", telemetry.KeyOutcome: "ok"},
	}
	got := map[string]bool{}
	for _, s := range rcv.Spans() {
		attrs := otlpreceiver.Attrs(s.Attributes)
		for k, v := range want[s.Name] {
			if attrs[k] != v {
				t.Errorf("span %s: %s = %q, want %q", s.Name, k, attrs[k], v)
			}
		}
		got[s.Name] = true
		if s.Name == "fluidbox.approval.wait" {
			if d := time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano); d != 3*time.Second {
				t.Errorf("approval wait span lasts %v, want 3s", d)
			}
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("no %s span was exported", name)
		}
	}
	ms := rcv.Metrics()
	dec := ms["fluidbox.decisions"]
	if dec == nil || len(dec.GetSum().GetDataPoints()) != 1 || dec.GetSum().DataPoints[0].GetAsInt() != 1 {
		t.Fatalf("fluidbox.decisions = %v, want one point of 1", dec)
	}
	if a := otlpreceiver.Attrs(dec.GetSum().DataPoints[0].Attributes); a[telemetry.KeyDecision] != "deny" || a[telemetry.KeySource] != "policy" || len(a) != 2 {
		t.Errorf("fluidbox.decisions attributes = %v, want decision and source only", a)
	}
	if h := ms["fluidbox.approval.wait"].GetHistogram(); h == nil || h.DataPoints[0].GetSum() != 3 {
		t.Errorf("fluidbox.approval.wait = %v, want a sum of 3 s", h)
	}
	if h := ms["fluidbox.broker.duration"].GetHistogram(); h == nil || h.DataPoints[0].GetCount() != 1 {
		t.Errorf("fluidbox.broker.duration = %v, want one call", h)
	}
	if h := ms["fluidbox.runs.halted"].GetSum(); h == nil || h.DataPoints[0].GetAsInt() != 1 || otlpreceiver.Attrs(h.DataPoints[0].Attributes)[telemetry.KeyReason] != "unasked" {
		t.Errorf("fluidbox.runs.halted = %v, want one run halted as unasked", h)
	}
	if !strings.Contains(rcv.Dump(), "fluidbox-test") {
		t.Error("the export does not name the service")
	}
}

// BenchmarkDecided: what recording one decision (a span and a count) adds
// to an answer, off (nil) and on (batched to a loopback receiver).
func BenchmarkDecided(b *testing.B) {
	d := telemetry.Decision{Run: "ses_bench", Call: "c-1", Tool: "Bash", Decision: vocab.Deny, Source: "policy", Rule: "no-push"}
	b.Run("off", func(b *testing.B) {
		var tel *telemetry.Telemetry
		ctx := context.Background()
		for b.Loop() {
			tel.Decided(ctx, time.Now(), d)
		}
	})
	b.Run("on", func(b *testing.B) {
		ctx := context.Background()
		p, err := otlp.New(ctx, otlpreceiver.Start(b).URL, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Shutdown(ctx) })
		tel := p.Telemetry()
		b.ReportAllocs()
		for b.Loop() {
			tel.Decided(ctx, time.Now(), d)
		}
	})
}
