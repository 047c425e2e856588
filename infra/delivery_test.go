package infra

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The DynamoDB stream keeps a record 24 hours; re-driving a stream batch
// notify gave up on reads it from there.
const streamRetentionSeconds = 24 * 3600

// num reads a template number (json.Number, or a string CloudFormation
// would coerce); ok is false when v is neither.
func num(v any) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(asString(v)))
	return n, err == nil
}

func asString(v any) string {
	if v == nil {
		return ""
	}
	return asStrings(v)[0]
}

// queueOf is the logical id of the SQS queue an ARN placeholder names
// (GETATT:<id>.Arn), if the template has that queue.
func queueOf(l *loaded, arn any) (string, map[string]any) {
	s, _ := arn.(string)
	id, ok := strings.CutPrefix(s, "GETATT:")
	if !ok {
		return "", nil
	}
	id, ok = strings.CutSuffix(id, ".Arn")
	if !ok {
		return "", nil
	}
	q, ok := resources(l.doc, "AWS::SQS::Queue")[id]
	if !ok {
		return "", nil
	}
	return id, props(q)
}

// TestQueuesEncryptedAndWatched: every queue is encrypted at rest with
// SQS-managed keys (a KMS key of the template's would need kms:Decrypt on
// whoever reads or writes it, and only the broker may hold that), and
// every queue nothing drains (a dead end for failures) has an alarm on its
// depth.
func TestQueuesEncryptedAndWatched(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	queues := resources(l.doc, "AWS::SQS::Queue")
	if len(queues) == 0 {
		t.Fatal("template has no SQS queue; failed deliveries would be lost")
	}
	drained := map[string]bool{}
	for _, m := range resources(l.doc, "AWS::Lambda::EventSourceMapping") {
		if id, _ := queueOf(l, props(m)["EventSourceArn"]); id != "" {
			drained[id] = true
		}
	}
	watched := map[string]bool{}
	for _, a := range resources(l.doc, "AWS::CloudWatch::Alarm") {
		p := props(a)
		if p["Namespace"] != "AWS/SQS" || p["MetricName"] != "ApproximateNumberOfMessagesVisible" {
			continue
		}
		for _, d := range asList(p["Dimensions"]) {
			if v, _ := d["Value"].(string); d["Name"] == "QueueName" && strings.HasPrefix(v, "GETATT:") {
				watched[strings.TrimSuffix(strings.TrimPrefix(v, "GETATT:"), ".QueueName")] = true
			}
		}
		if th, ok := num(p["Threshold"]); !ok || th != 0 || p["ComparisonOperator"] != "GreaterThanThreshold" {
			t.Errorf("alarm on %v: Threshold %v %v, want any message (> 0)", p["Dimensions"], p["Threshold"], p["ComparisonOperator"])
		}
	}
	for _, id := range sortedKeys(queues) {
		p := props(queues[id])
		if p["SqsManagedSseEnabled"] != true || p["KmsMasterKeyId"] != nil {
			t.Errorf("%s: SqsManagedSseEnabled = %v, KmsMasterKeyId = %v; want SQS-managed encryption", id, p["SqsManagedSseEnabled"], p["KmsMasterKeyId"])
		}
		if !drained[id] && !watched[id] {
			t.Errorf("%s: nothing drains it and no alarm watches its depth; what lands there is lost silently", id)
		}
	}
}

// TestSlackDeliveryDurable: a bus notification the Slack function fails on
// is retried by Lambda at most twice, then lands on an encrypted retry
// queue the function itself drains (partial batch failures reported), whose
// redelivery pace suits the function's timeout, whose retention outlasts
// its receive limit, and whose dead-letter queue keeps longer than it does
// (retention counts from the first enqueue).
func TestSlackDeliveryDurable(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	var cfg map[string]any
	for id, m := range resources(l.doc, "AWS::Lambda::EventInvokeConfig") {
		if props(m)["FunctionName"] != "REF:SlackFunction" {
			continue
		}
		if cfg != nil {
			t.Fatalf("%s: a second EventInvokeConfig for SlackFunction", id)
		}
		cfg = props(m)
	}
	if cfg == nil {
		t.Fatal("no AWS::Lambda::EventInvokeConfig for SlackFunction: Lambda's default two retries, then the event is dropped")
	}
	if dig(props(resources(l.doc, "AWS::Serverless::Function")["SlackFunction"]), "EventInvokeConfig") != nil {
		t.Error("SlackFunction sets EventInvokeConfig as well; SAM's form adds a policy the IAM tests cannot see")
	}
	if cfg["Qualifier"] != "$LATEST" {
		t.Errorf("EventInvokeConfig Qualifier = %v, want $LATEST (the function has no alias)", cfg["Qualifier"])
	}
	if n, ok := num(cfg["MaximumRetryAttempts"]); !ok || n < 0 || n > 2 {
		t.Errorf("MaximumRetryAttempts = %v, want 0..2", cfg["MaximumRetryAttempts"])
	}
	if n, ok := num(cfg["MaximumEventAgeInSeconds"]); !ok || n < 60 || n > 21600 {
		t.Errorf("MaximumEventAgeInSeconds = %v, want set, 60..21600", cfg["MaximumEventAgeInSeconds"])
	}
	retryID, retry := queueOf(l, dig(cfg, "DestinationConfig", "OnFailure", "Destination"))
	if retry == nil {
		t.Fatalf("SlackFunction's on-failure destination = %v, want a queue of the template", dig(cfg, "DestinationConfig", "OnFailure", "Destination"))
	}
	var mapping map[string]any
	for _, m := range resources(l.doc, "AWS::Lambda::EventSourceMapping") {
		if props(m)["EventSourceArn"] == "GETATT:"+retryID+".Arn" {
			mapping = props(m)
		}
	}
	if mapping == nil || mapping["FunctionName"] != "REF:SlackFunction" {
		t.Fatalf("%s is drained by %v, want SlackFunction", retryID, mapping)
	}
	if !slices.Contains(asStrings(mapping["FunctionResponseTypes"]), "ReportBatchItemFailures") {
		t.Errorf("%s's mapping lacks ReportBatchItemFailures: one failure would redeliver the whole batch", retryID)
	}
	timeout, ok := num(props(resources(l.doc, "AWS::Serverless::Function")["SlackFunction"])["Timeout"])
	if !ok {
		t.Fatal("SlackFunction sets no Timeout")
	}
	vis, _ := num(retry["VisibilityTimeout"])
	if vis < 6*timeout {
		t.Errorf("%s VisibilityTimeout = %v, want at least six times SlackFunction's %d s", retryID, retry["VisibilityTimeout"], timeout)
	}
	receives, _ := num(dig(retry, "RedrivePolicy", "maxReceiveCount"))
	keep, _ := num(retry["MessageRetentionPeriod"])
	if receives < 1 || keep < receives*vis {
		t.Errorf("%s keeps %d s but may be received %d times %d s apart; a message would expire before it reaches the dead-letter queue", retryID, keep, receives, vis)
	}
	dlqID, dlq := queueOf(l, dig(retry, "RedrivePolicy", "deadLetterTargetArn"))
	if dlq == nil {
		t.Fatalf("%s has no dead-letter queue of the template", retryID)
	}
	if dkeep, _ := num(dlq["MessageRetentionPeriod"]); dkeep <= keep {
		t.Errorf("%s keeps %d s, no longer than %s's %d s: a message moved there late would expire at once", dlqID, dkeep, retryID, keep)
	}
}

// TestNotifyStreamFailures: a stream batch notify gives up on is named on
// an encrypted queue, the function bisects a failing batch, and the record
// age limit leaves time to re-drive from the stream; notify may send to
// that queue and nothing else of SQS.
func TestNotifyStreamFailures(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	var p map[string]any
	for _, m := range resources(l.doc, "AWS::Lambda::EventSourceMapping") {
		if props(m)["FunctionName"] == "REF:NotifyFunction" {
			p = props(m)
		}
	}
	if p == nil {
		t.Fatal("no mapping feeds NotifyFunction")
	}
	id, q := queueOf(l, dig(p, "DestinationConfig", "OnFailure", "Destination"))
	if q == nil {
		t.Fatalf("NotifyStream's on-failure destination = %v, want a queue of the template", dig(p, "DestinationConfig", "OnFailure", "Destination"))
	}
	if p["BisectBatchOnFunctionError"] != true {
		t.Error("NotifyStream does not bisect a failing batch")
	}
	if n, ok := num(p["MaximumRetryAttempts"]); !ok || n < 1 {
		t.Errorf("MaximumRetryAttempts = %v, want a bound of at least one retry", p["MaximumRetryAttempts"])
	}
	age, ok := num(p["MaximumRecordAgeInSeconds"])
	if !ok || age < 60 || age > streamRetentionSeconds/2 {
		t.Errorf("MaximumRecordAgeInSeconds = %v, want at most half the stream's 24 h, so a dropped record can still be re-driven", p["MaximumRecordAgeInSeconds"])
	}
	fns := resources(l.doc, "AWS::Serverless::Function")
	for _, fn := range sortedKeys(fns) {
		sts, _ := functionStatements(fn, fns[fn])
		for _, st := range sts {
			for _, a := range asStrings(st.fields["Action"]) {
				if !strings.HasPrefix(strings.ToLower(a), "sqs:") {
					continue
				}
				res := asStrings(st.fields["Resource"])
				switch fn {
				case "NotifyFunction":
					if !strings.EqualFold(a, "sqs:SendMessage") || !slices.Equal(res, []string{"GETATT:" + id + ".Arn"}) {
						t.Errorf("NotifyFunction holds %s on %v, want sqs:SendMessage on %s only", a, res, id)
					}
				case "SlackFunction":
					// TestSlackPrivileges.
				case "ExportFunction":
					// TestExportPrivileges.
				default:
					t.Errorf("%s holds %s on %v; only notify, slack and export use queues", fn, a, res)
				}
			}
		}
	}
}
