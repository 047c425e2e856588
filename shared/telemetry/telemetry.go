// Package telemetry is fluidbox's OpenTelemetry: the spans and metrics of
// the control plane's acts (a permission decision, a brokered call, a model
// request, an approval wait), and the W3C trace context a runner sends.
// It and its subpackage otlp are the only importers of OpenTelemetry.
//
// What it guarantees:
//   - Only ids, names, verdicts, sources, rule ids, outcomes, timings and
//     numbers become attributes. There is no function that takes an
//     attribute key or an arbitrary value: each act is a struct of this
//     package (Decision, Brokered, ModelRequest, ApprovalWait) whose fields
//     are identifiers and numbers, and no field can hold a tool input, a
//     tool result, a prompt or a token (telemetry_test.go checks the field
//     types). Every string is cut to MaxValueLen bytes of valid UTF-8, so a
//     hostile id cannot smuggle a payload's worth of text either.
//   - Off costs nothing: a nil *Telemetry, or one built from OpenTelemetry's
//     no-op providers, records nothing and exports nothing. Every method is
//     safe on nil, so code that decides need not know whether it is on.
//   - CloudWatch metrics (WithCloudWatch) are written as Embedded Metric
//     Format lines of the function's log: the decisions by decision and
//     source, halted runs, budget reserved and spent, pending approvals.
//     Their dimensions are words (a decision, a source, a halt code), never
//     an id, checked character by character.
//   - Telemetry never decides: its methods return nothing that could change
//     an answer, and a failing exporter only loses spans.
package telemetry

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/vocab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of every span and metric.
const Scope = "github.com/fluidbox/fluidbox"

// MaxValueLen bounds every string attribute: ids, names and rule ids are
// short, so anything longer is cut rather than exported whole.
const MaxValueLen = 128

// Attribute keys. They are what dashboards and queries name: never rename one.
const (
	KeyRun        = "fluidbox.run.id"
	KeyCall       = "fluidbox.tool_call.id"
	KeyTool       = "fluidbox.tool.name"
	KeyDecision   = "fluidbox.decision"
	KeySource     = "fluidbox.source"
	KeyRule       = "fluidbox.rule.id"
	KeyApproval   = "fluidbox.approval.id"
	KeyConnection = "fluidbox.connection.id"
	KeyOutcome    = "fluidbox.outcome"
	KeyModel      = "fluidbox.model"
	KeyTokenKind  = "fluidbox.token.kind"
	KeyReason     = "fluidbox.halt.reason"
	KeyRoute      = "http.route"
	KeyStatus     = "http.response.status_code"
)

// Telemetry records the control plane's acts. Build one with New; nil is
// off.
type Telemetry struct {
	tracer     trace.Tracer
	propagator propagation.TraceContext

	decisions    metric.Int64Counter
	approvalWait metric.Float64Histogram
	brokered     metric.Float64Histogram
	reserved     metric.Int64Counter
	spent        metric.Int64Counter
	tokens       metric.Int64Counter
	halted       metric.Int64Counter
	responses    metric.Int64Counter

	// emf, when set (WithCloudWatch), also writes the decisions, halts
	// and budget as CloudWatch metrics.
	emf *emf
}

// New builds the instruments on tp and mp (the otlp package's providers,
// or OpenTelemetry's no-op ones).
func New(tp trace.TracerProvider, mp metric.MeterProvider) (*Telemetry, error) {
	m := mp.Meter(Scope)
	t := &Telemetry{tracer: tp.Tracer(Scope)}
	var err error
	for _, c := range []struct {
		dst        *metric.Int64Counter
		name, unit string
		desc       string
	}{
		{&t.decisions, "fluidbox.decisions", "{decision}", "Permission decisions recorded, by decision and source."},
		{&t.reserved, "fluidbox.budget.reserved", "u[USD]", "Budget reserved by admissions, in micro-USD."},
		{&t.spent, "fluidbox.budget.spent", "u[USD]", "Budget spent by reconciled model requests, in micro-USD."},
		{&t.tokens, "fluidbox.model.tokens", "{token}", "Model tokens of reconciled requests, by kind (input, output)."},
		{&t.halted, "fluidbox.runs.halted", "{run}", "Runs the model proxy halted, by reason."},
		{&t.responses, "fluidbox.http.responses", "{response}", "HTTP responses by route and status code (503 is the control plane's fail-closed answer)."},
	} {
		if *c.dst, err = m.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc)); err != nil {
			return nil, err
		}
	}
	for _, h := range []struct {
		dst              *metric.Float64Histogram
		name, unit, desc string
	}{
		{&t.approvalWait, "fluidbox.approval.wait", "s", "Time from an approval's request to its decision or expiry."},
		{&t.brokered, "fluidbox.broker.duration", "s", "Latency of brokered tool calls, upstream included."},
	} {
		if *h.dst, err = m.Float64Histogram(h.name, metric.WithUnit(h.unit), metric.WithDescription(h.desc)); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// value bounds s: at most MaxValueLen bytes, cut on a rune boundary, with
// invalid UTF-8 replaced.
func value(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxValueLen {
		return s
	}
	cut := MaxValueLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// str is a bounded string attribute, or none for "".
func str(attrs []attribute.KeyValue, key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, attribute.String(key, value(v)))
}

// Extract returns ctx carrying the runner's W3C traceparent, so a runner's
// turn, its decision and its brokered call are one trace. The runner is
// untrusted, so only the ids cross: tracestate (free text that the SDK
// would export with every span) is dropped, and the sampled flag is set,
// so a sandbox cannot switch off the spans of its own calls. A malformed
// header is ignored: the request starts a new trace.
func (t *Telemetry) Extract(ctx context.Context, h http.Header) context.Context {
	if t == nil {
		return ctx
	}
	tp := h.Get("Traceparent")
	if tp == "" {
		return ctx
	}
	parent := trace.SpanContextFromContext(t.propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
	if !parent.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: parent.TraceID(), SpanID: parent.SpanID(), TraceFlags: trace.FlagsSampled, Remote: true,
	}))
}

// StartRequest starts the server span of one HTTP request on route (the
// route table's pattern, never the raw path); end records its status.
func (t *Telemetry) StartRequest(ctx context.Context, route string) (context.Context, func(status int)) {
	if t == nil {
		return ctx, func(int) {}
	}
	if route == "" {
		route = "unmatched"
	}
	ctx, span := t.tracer.Start(ctx, value(route), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(KeyRoute, value(route))))
	return ctx, func(status int) {
		span.SetAttributes(attribute.Int(KeyStatus, status))
		span.End()
		t.responses.Add(ctx, 1, metric.WithAttributes(attribute.String(KeyRoute, value(route)), attribute.Int(KeyStatus, status)))
	}
}

// Decision is one permission decision as it is exported.
type Decision struct {
	Run, Call, Tool string
	// Decision is allow, deny or pending; Source and Rule say which stage
	// and which rule decided.
	Decision     vocab.Decision
	Source, Rule string
	Approval     string
}

// Decided records d as a span from start to now and counts it.
func (t *Telemetry) Decided(ctx context.Context, start time.Time, d Decision) {
	if t == nil {
		return
	}
	attrs := str(nil, KeyRun, d.Run)
	attrs = str(attrs, KeyCall, d.Call)
	attrs = str(attrs, KeyTool, d.Tool)
	attrs = str(attrs, KeyDecision, string(d.Decision))
	attrs = str(attrs, KeySource, d.Source)
	attrs = str(attrs, KeyRule, d.Rule)
	attrs = str(attrs, KeyApproval, d.Approval)
	t.span(ctx, "fluidbox.permission.decide", start, time.Now(), attrs)
	counted := str(str(nil, KeyDecision, string(d.Decision)), KeySource, d.Source)
	t.decisions.Add(ctx, 1, metric.WithAttributes(counted...))
	t.emf.put(MetricDecisions, "Count", 1, map[string]string{DimDecision: string(d.Decision), DimSource: d.Source}, [][]string{{DimDecision, DimSource}, {DimDecision}})
}

// Brokered is one brokered tool call.
type Brokered struct {
	Run, Call, Tool, Connection string
	// Outcome is ok, error (the upstream's tool error) or a failure's
	// class; never the upstream's text.
	Outcome string
}

// BrokeredCall records b as a span from start to now and its latency.
func (t *Telemetry) BrokeredCall(ctx context.Context, start time.Time, b Brokered) {
	if t == nil {
		return
	}
	end := time.Now()
	attrs := str(nil, KeyRun, b.Run)
	attrs = str(attrs, KeyCall, b.Call)
	attrs = str(attrs, KeyTool, b.Tool)
	attrs = str(attrs, KeyConnection, b.Connection)
	attrs = str(attrs, KeyOutcome, b.Outcome)
	t.span(ctx, "fluidbox.broker.call", start, end, attrs)
	t.brokered.Record(ctx, end.Sub(start).Seconds(), metric.WithAttributes(str(str(nil, KeyConnection, b.Connection), KeyOutcome, b.Outcome)...))
}

// ModelRequest is one request through the model proxy, once settled.
type ModelRequest struct {
	Run, Model string
	// Status is the HTTP status the upstream (or fluidbox) answered.
	Status                    int64
	InputTokens, OutputTokens int64
}

// ModelRequested records m as a span from start to now, and its tokens.
func (t *Telemetry) ModelRequested(ctx context.Context, start time.Time, m ModelRequest) {
	if t == nil {
		return
	}
	attrs := str(nil, KeyRun, m.Run)
	attrs = str(attrs, KeyModel, m.Model)
	attrs = append(attrs, attribute.Int64(KeyStatus, m.Status),
		attribute.Int64("fluidbox.model.input_tokens", m.InputTokens), attribute.Int64("fluidbox.model.output_tokens", m.OutputTokens))
	t.span(ctx, "fluidbox.model.request", start, time.Now(), attrs)
	model := str(nil, KeyModel, m.Model)
	if m.InputTokens > 0 {
		t.tokens.Add(ctx, m.InputTokens, metric.WithAttributes(append(model, attribute.String(KeyTokenKind, "input"))...))
	}
	if m.OutputTokens > 0 {
		t.tokens.Add(ctx, m.OutputTokens, metric.WithAttributes(append(model, attribute.String(KeyTokenKind, "output"))...))
	}
}

// OutcomeOK is a brokered call whose tool answered without error.
const OutcomeOK = "ok"

// ApprovalWait is one approval from its request to its settling.
type ApprovalWait struct {
	Run, Call, Approval string
	// Outcome is the approval's final status (approved_once,
	// approved_session, denied, expired).
	Outcome                vocab.ApprovalStatus
	RequestedAt, SettledAt time.Time
}

// ApprovalSettled records a as a span covering the wait, and its length.
func (t *Telemetry) ApprovalSettled(ctx context.Context, a ApprovalWait) {
	if t == nil || a.RequestedAt.IsZero() || a.SettledAt.Before(a.RequestedAt) {
		return
	}
	attrs := str(nil, KeyRun, a.Run)
	attrs = str(attrs, KeyCall, a.Call)
	attrs = str(attrs, KeyApproval, a.Approval)
	attrs = str(attrs, KeyOutcome, string(a.Outcome))
	t.span(ctx, "fluidbox.approval.wait", a.RequestedAt, a.SettledAt, attrs)
	t.approvalWait.Record(ctx, a.SettledAt.Sub(a.RequestedAt).Seconds(), metric.WithAttributes(str(nil, KeyOutcome, string(a.Outcome))...))
}

// RunHalted counts a run the model proxy halted; reason is the halt's
// code (unasked, input_mismatch, denied_result), never its message.
func (t *Telemetry) RunHalted(ctx context.Context, reason string) {
	if t == nil {
		return
	}
	t.halted.Add(ctx, 1, metric.WithAttributes(str(nil, KeyReason, reason)...))
	t.emf.put(MetricRunsHalted, "Count", 1, map[string]string{DimReason: reason}, [][]string{{}, {DimReason}})
}

// BudgetReserved counts micro-USD an admission reserved.
func (t *Telemetry) BudgetReserved(ctx context.Context, microUSD int64) {
	if t == nil || microUSD <= 0 {
		return
	}
	t.reserved.Add(ctx, microUSD)
	t.emf.put(MetricBudgetReserved, "None", microUSD, nil, [][]string{{}})
}

// BudgetSpent counts micro-USD a reconciliation booked as spent.
func (t *Telemetry) BudgetSpent(ctx context.Context, microUSD int64) {
	if t == nil || microUSD <= 0 {
		return
	}
	t.spent.Add(ctx, microUSD)
	t.emf.put(MetricBudgetSpent, "None", microUSD, nil, [][]string{{}})
}

func (t *Telemetry) span(ctx context.Context, name string, start, end time.Time, attrs []attribute.KeyValue) {
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	s.End(trace.WithTimestamp(end))
}
