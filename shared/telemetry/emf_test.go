package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/vocab"
)

func noEnv(string) string { return "" }

// emfLine is one Embedded Metric Format line as CloudWatch reads it.
type emfLine struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	fields map[string]any
}

// parseEMF reads lines as CloudWatch does, failing t on any line that is
// not valid EMF: each metric's value a number and each dimension's value a
// string at the top level.
func parseEMF(t *testing.T, out, namespace string) []emfLine {
	t.Helper()
	var lines []emfLine
	for l := range strings.Lines(out) {
		var e emfLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if err := json.Unmarshal([]byte(l), &e.fields); err != nil {
			t.Fatal(err)
		}
		if e.AWS.Timestamp == 0 || len(e.AWS.CloudWatchMetrics) != 1 || e.AWS.CloudWatchMetrics[0].Namespace != namespace {
			t.Errorf("%q: not an EMF line of namespace %s", l, namespace)
			continue
		}
		d := e.AWS.CloudWatchMetrics[0]
		for _, m := range d.Metrics {
			if _, ok := e.fields[m.Name].(float64); !ok {
				t.Errorf("%q: metric %s has no number", l, m.Name)
			}
		}
		for _, set := range d.Dimensions {
			for _, k := range set {
				if _, ok := e.fields[k].(string); !ok {
					t.Errorf("%q: dimension %s has no string", l, k)
				}
			}
		}
		lines = append(lines, e)
	}
	return lines
}

// TestCloudWatchMetrics: decisions (by decision and source), halts (by
// reason, and in all), budget, pending approvals and runs the launcher
// ended (by reason, and in all) each write one valid
// EMF line; a dimension value that is not a known word's shape (an id,
// text, a long string) is written as "other", never as given.
func TestCloudWatchMetrics(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tel := WithCloudWatch(nil, &buf, noEnv)
	ctx := context.Background()
	tel.Decided(ctx, time.Now(), Decision{Run: "ses_1", Call: "c1", Tool: "Bash", Decision: vocab.Deny, Source: "policy", Rule: "no-push"})
	tel.Decided(ctx, time.Now(), Decision{Run: "ses_1", Call: "c2", Tool: "Bash", Decision: vocab.Allow, Source: "mcp__jira__Echo CANARY"})
	tel.RunHalted(ctx, "input_mismatch")
	tel.BudgetReserved(ctx, 1500)
	tel.BudgetSpent(ctx, 1200)
	tel.PendingApprovals(ctx, 3)
	tel.RunEndedByLauncher(ctx, "timeout")
	lines := parseEMF(t, buf.String(), Namespace)
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7:\n%s", len(lines), buf.String())
	}
	want := []map[string]any{
		{MetricDecisions: 1.0, DimDecision: "deny", DimSource: "policy"},
		{MetricDecisions: 1.0, DimDecision: "allow", DimSource: "other"},
		{MetricRunsHalted: 1.0, DimReason: "input_mismatch"},
		{MetricBudgetReserved: 1500.0},
		{MetricBudgetSpent: 1200.0},
		{MetricPendingApprovals: 3.0},
		{MetricRunsEndedByLauncher: 1.0, DimReason: "timeout"},
	}
	for i, w := range want {
		got := lines[i].fields
		delete(got, "_aws")
		if len(got) != len(w) {
			t.Errorf("line %d = %v, want %v", i, got, w)
			continue
		}
		for k, v := range w {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, got[k], v)
			}
		}
	}
	for _, id := range []string{"ses_1", "c1", "c2", "Bash", "no-push", "CANARY"} {
		if strings.Contains(buf.String(), id) {
			t.Errorf("the metrics hold %q: ids, names and text are never a metric's", id)
		}
	}
	if sets := lines[0].AWS.CloudWatchMetrics[0].Dimensions; len(sets) != 2 || strings.Join(sets[0], ",") != "Decision,Source" || strings.Join(sets[1], ",") != "Decision" {
		t.Errorf("decision dimension sets = %v, want [Decision Source] [Decision]", sets)
	}
}

// TestDimensionWords: only short lower-case words pass as dimension values.
func TestDimensionWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"deny": "deny", "approval_limit": "approval_limit", "": "other", "Deny": "other", "a b": "other",
		"ses_abc/def": "other", strings.Repeat("a", 33): "other", "x\u00e9": "other", "rule-1": "other",
	} {
		if got := dim(in); got != want {
			t.Errorf("dim(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCloudWatchKeepsOpenTelemetry: adding CloudWatch (in the namespace
// FLUIDBOX_METRICS_NAMESPACE names) to a Telemetry leaves
// the original as it was (no EMF), and a nil Telemetry stays off.
func TestCloudWatchKeepsOpenTelemetry(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	base := WithCloudWatch(nil, &bytes.Buffer{}, noEnv)
	base.emf = nil
	both := WithCloudWatch(base, &buf, func(string) string { return "fluidbox/prod" })
	base.Decided(context.Background(), time.Now(), Decision{Decision: vocab.Allow, Source: "policy"})
	if buf.Len() != 0 {
		t.Errorf("the original Telemetry wrote EMF: %s", buf.String())
	}
	both.Decided(context.Background(), time.Now(), Decision{Decision: vocab.Allow, Source: "policy"})
	if len(parseEMF(t, buf.String(), "fluidbox/prod")) != 1 {
		t.Errorf("the Telemetry with CloudWatch wrote %q, want one line", buf.String())
	}
	var off *Telemetry
	off.PendingApprovals(context.Background(), 1)
}
