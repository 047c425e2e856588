package infra

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// TestAlarmsHaveRunbooks: every alarm of the template has its line in
// docs/runbook.md, and the runbook names no alarm the template lacks.
func TestAlarmsHaveRunbooks(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	raw, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if id, ok := strings.CutPrefix(line, "- **"); ok {
			id, _, _ = strings.Cut(id, "**")
			lines[id] = true
		}
	}
	alarms := resources(l.doc, "AWS::CloudWatch::Alarm")
	for _, id := range sortedKeys(alarms) {
		if !lines[id] {
			t.Errorf("alarm %s has no runbook line in docs/runbook.md", id)
		}
		if d, _ := props(alarms[id])["AlarmDescription"].(string); d == "" {
			t.Errorf("alarm %s has no AlarmDescription", id)
		}
	}
	for _, id := range sortedKeys(lines) {
		if alarms[id] == nil {
			t.Errorf("docs/runbook.md has a line for %s, which is not an alarm of the template", id)
		}
	}
	for _, want := range []string{"ApiServerErrorAlarm", "TableThrottleAlarm", "HaltedRunsAlarm", "ExportFailureAlarm"} {
		if alarms[want] == nil {
			t.Errorf("template has no %s", want)
		}
	}
}

// TestTelemetryEndpoint: only the functions that link the OTLP exporter
// (gate, approvals, broker; docs/telemetry.md) get the OtlpEndpoint
// parameter, whose default (empty) exports nothing.
func TestTelemetryEndpoint(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	params, _ := l.doc["Parameters"].(map[string]any)
	p, _ := params["OtlpEndpoint"].(map[string]any)
	if p == nil || p["Default"] != "" {
		t.Fatalf("OtlpEndpoint parameter = %v, want one defaulting to empty (off)", p)
	}
	want := map[string]bool{"GateFunction": true, "ApprovalsFunction": true, "BrokerFunction": true}
	fns := resources(l.doc, "AWS::Serverless::Function")
	for _, id := range sortedKeys(fns) {
		env, _ := props(fns[id])["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		got := vars["OTEL_EXPORTER_OTLP_ENDPOINT"]
		switch {
		case want[id] && got != "REF:OtlpEndpoint":
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %v, want !Ref OtlpEndpoint", id, got)
		case !want[id] && got != nil:
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT = %v, but it does not link the exporter", id, got)
		}
	}
}

// TestDashboard: the dashboard's body is JSON once CloudFormation has
// substituted it, and its alarm widget shows every alarm of the template.
func TestDashboard(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	d := resources(l.doc, "AWS::CloudWatch::Dashboard")["Dashboard"]
	if d == nil {
		t.Fatal("template has no Dashboard")
	}
	body, _ := props(d)["DashboardBody"].(string)
	body = regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllString(strings.TrimPrefix(body, "SUB:"), "$1")
	var v struct {
		Widgets []struct {
			Type       string `json:"type"`
			Properties struct {
				Alarms []string `json:"alarms"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("DashboardBody is not JSON: %v\n%s", err, body)
	}
	shown := map[string]bool{}
	for _, w := range v.Widgets {
		for _, a := range w.Properties.Alarms {
			shown[strings.TrimSuffix(a, ".Arn")] = true
		}
	}
	for _, id := range sortedKeys(resources(l.doc, "AWS::CloudWatch::Alarm")) {
		if !shown[id] {
			t.Errorf("the dashboard's alarm widget does not show %s", id)
		}
	}
}

// TestCloudWatchMetricsWired: every function gets the stack's metrics
// namespace, the halted-runs alarm reads the metric the model proxy writes
// there (telemetry.MetricRunsHalted) and fires on one halt, the launcher's
// alarm likewise on one run the launch function ended
// (telemetry.MetricRunsEndedByLauncher), and the dashboard shows decisions,
// denials by source, pending approvals, spend, halts and those runs from
// that namespace.
func TestCloudWatchMetricsWired(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	const ns = "fluidbox/${AWS::StackName}"
	if got := dig(l.doc, "Globals", "Function", "Environment", "Variables", "FLUIDBOX_METRICS_NAMESPACE"); got != "SUB:"+ns {
		t.Errorf("Globals' FLUIDBOX_METRICS_NAMESPACE = %v, want !Sub %s", got, ns)
	}
	for id, metric := range map[string]string{"HaltedRunsAlarm": telemetry.MetricRunsHalted, "LauncherEndedRunsAlarm": telemetry.MetricRunsEndedByLauncher} {
		a := props(resources(l.doc, "AWS::CloudWatch::Alarm")[id])
		if a["Namespace"] != "SUB:"+ns || a["MetricName"] != metric || a["Statistic"] != "Sum" ||
			a["ComparisonOperator"] != "GreaterThanThreshold" || asString(a["Threshold"]) != "0" || a["Dimensions"] != nil {
			t.Errorf("%s = %v, want the Sum of %s in %s, without dimensions, over 0", id, a, metric, ns)
		}
	}
	body, _ := props(resources(l.doc, "AWS::CloudWatch::Dashboard")["Dashboard"])["DashboardBody"].(string)
	for _, want := range []string{
		`{` + ns + `,Decision} MetricName=\"` + telemetry.MetricDecisions + `\"`,
		`{` + ns + `,Decision,Source} MetricName=\"` + telemetry.MetricDecisions + `\" Decision=\"deny\"`,
		`"` + ns + `", "` + telemetry.MetricPendingApprovals + `"`,
		`"` + telemetry.MetricBudgetSpent + `"`,
		`"` + telemetry.MetricBudgetReserved + `"`,
		`{` + ns + `,Reason} MetricName=\"` + telemetry.MetricRunsHalted + `\"`,
		`{` + ns + `,Reason} MetricName=\"` + telemetry.MetricRunsEndedByLauncher + `\"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	if telemetry.DimDecision != "Decision" || telemetry.DimSource != "Source" || telemetry.DimReason != "Reason" {
		t.Error("the dashboard's searches name dimensions the metrics no longer carry")
	}
}
