package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Namespace is the CloudWatch namespace of fluidbox's metrics unless
// FLUIDBOX_METRICS_NAMESPACE names another (the template names the
// stack's, fluidbox/<stack>, so two stacks in one account keep theirs
// apart).
const Namespace = "fluidbox"

// CloudWatch metric names. Alarms and the dashboard name them: never
// rename one.
const (
	MetricDecisions           = "Decisions"
	MetricRunsHalted          = "RunsHalted"
	MetricBudgetReserved      = "BudgetReservedMicroUSD"
	MetricBudgetSpent         = "BudgetSpentMicroUSD"
	MetricPendingApprovals    = "PendingApprovals"
	MetricRunsEndedByLauncher = "RunsEndedByLauncher"
)

// CloudWatch dimension names.
const (
	DimDecision = "Decision"
	DimSource   = "Source"
	DimReason   = "Reason"
)

// emf writes CloudWatch Embedded Metric Format: one JSON object a line,
// which Lambda's log delivery turns into metrics with no API call and no
// permission. Each line is built from the metric's name, a number and
// dimension values checked by dimension, nothing else.
type emf struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	now       func() time.Time
}

// WithCloudWatch returns t also recording as CloudWatch metrics (emf.go's
// Metric* names), written to w in Embedded Metric Format: on Lambda, w is
// the function's standard output, its log. The namespace is
// FLUIDBOX_METRICS_NAMESPACE's, read through getenv, or Namespace. t may be
// nil (OpenTelemetry off): the result then records CloudWatch metrics
// only.
func WithCloudWatch(t *Telemetry, w io.Writer, getenv func(string) string) *Telemetry {
	var c Telemetry
	if t != nil {
		c = *t
	} else {
		off, err := New(tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider())
		if err != nil {
			// The no-op providers make every instrument without error.
			panic(err)
		}
		c = *off
	}
	ns := getenv("FLUIDBOX_METRICS_NAMESPACE")
	if ns == "" {
		ns = Namespace
	}
	c.emf = &emf{w: w, namespace: ns, now: time.Now}
	return &c
}

// maxDimLen bounds a dimension value; dimension values are words of this
// package's callers (decisions, sources, halt codes), never ids.
const maxDimLen = 32

// dim is v as a dimension value: a lower-case word of letters, digits and
// underscores, at most maxDimLen bytes, or "other". A dimension is a
// CloudWatch metric of its own (and a cost), so only known words pass.
func dim(v string) string {
	if v == "" || len(v) > maxDimLen {
		return "other"
	}
	for _, c := range v {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return "other"
		}
	}
	return v
}

// put writes one metric's value with its dimensions; sets lists the
// dimension sets CloudWatch aggregates it by (each a subset of dims' keys).
func (e *emf) put(name, unit string, v int64, dims map[string]string, sets [][]string) {
	if e == nil {
		return
	}
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp": e.now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  e.namespace,
				"Dimensions": sets,
				"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
			}},
		},
		name: v,
	}
	for k, d := range dims {
		line[k] = dim(d)
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A failed write loses a data point; telemetry never decides.
	_, _ = e.w.Write(append(b, '\n'))
}

// PendingApprovals records how many approvals wait for a person, as a
// CloudWatch gauge (the sweep counts them every five minutes).
func (t *Telemetry) PendingApprovals(_ context.Context, n int64) {
	if t == nil {
		return
	}
	t.emf.put(MetricPendingApprovals, "Count", n, nil, [][]string{{}})
}

// RunEndedByLauncher counts a run the AWS launcher's Finish ended because
// its runner had not (it never started, died, or outlived its timeout), as
// a CloudWatch metric; reason is the end reason (failed, timeout).
func (t *Telemetry) RunEndedByLauncher(_ context.Context, reason string) {
	if t == nil {
		return
	}
	t.emf.put(MetricRunsEndedByLauncher, "Count", 1, map[string]string{DimReason: reason}, [][]string{{}, {DimReason}})
}
