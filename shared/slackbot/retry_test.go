package slackbot_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// failureRecord is what Lambda puts on an asynchronous invocation's
// on-failure destination once its retries are exhausted: the invocation
// as made (requestPayload) and how it ended.
func failureRecord(t *testing.T, ev events.EventBridgeEvent, errMsg string) string {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{
		"version":   "1.0",
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"requestContext": map[string]any{
			"requestId":              "c0ffee00-0000-4000-8000-000000000001",
			"functionArn":            "arn:aws:lambda:eu-west-1:123456789012:function:fluidbox-SlackFunction:$LATEST",
			"condition":              "RetriesExhausted",
			"approximateInvokeCount": 3,
		},
		"requestPayload":  json.RawMessage(payload),
		"responseContext": map[string]any{"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
		"responsePayload": map[string]any{"errorMessage": errMsg, "errorType": "wrapError"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func requested(approvalID string) events.EventBridgeEvent {
	d, _ := json.Marshal(notify.Detail{ApprovalID: approvalID, Status: vocab.ApprovalPending})
	return events.EventBridgeEvent{Version: "0", ID: "ev-" + approvalID, DetailType: string(notify.Requested), Source: notify.Source, Detail: d}
}

// invoke sends payload to the Slack function's entry point as Lambda
// would (raw JSON) and returns the response as Lambda would serialise it.
func invoke(t *testing.T, s *stack, payload any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.notifier.Invoke(context.Background(), raw)
	b, _ := json.Marshal(out)
	return string(b), err
}

// TestRetryQueueAfterSlackOutage: Slack is down longer than Lambda's
// asynchronous retries last, so the approval.requested notification ends
// on the retry queue as Lambda's failure record. Drained while Slack is
// still down, the message is reported failed (SQS delivers it again);
// once Slack is back it is posted, exactly once, showing the approval as
// it stands. A message on the queue that is no failure record is dropped
// rather than retried forever.
func TestRetryQueueAfterSlackOutage(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nil)
	s.slack.fail.Store(true)
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	// The dev server's in-process retries give up first, so what follows
	// is the AWS path alone.
	waitFor(t, "the in-process retries to give up", func() bool { return strings.Contains(s.logs.String(), "giving up on a message") })

	ev := requested(apr)
	// The bus's invocation, and Lambda's retries of it, fail.
	if _, err := invoke(t, s, ev); err == nil {
		t.Fatal("notification with Slack down succeeded; Lambda would not retry it")
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", EventSource: "aws:sqs", Body: failureRecord(t, ev, "slackbot: post message of "+apr+": slack server error: 500 Internal Server Error"),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}},
		{MessageId: "m-junk", EventSource: "aws:sqs", Body: `{"not":"a failure record"}`},
	}}
	out, err := invoke(t, s, batch)
	if err != nil {
		t.Fatalf("retry batch with Slack down: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("retry batch answer %s: %v", out, err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-1" {
		t.Fatalf("batch item failures with Slack down = %+v, want only m-1 (delivered again); m-junk dropped", resp.BatchItemFailures)
	}
	if p, _, _, _ := s.slack.snapshot(); len(p) != 0 {
		t.Fatalf("posts with Slack down = %d", len(p))
	}

	// Slack is back; SQS delivers m-1 again.
	s.slack.fail.Store(false)
	batch.Records = batch.Records[:1]
	batch.Records[0].Attributes["ApproximateReceiveCount"] = "2"
	out, err = invoke(t, s, batch)
	if err != nil || !strings.Contains(out, `"batchItemFailures":[]`) {
		t.Fatalf("retry batch with Slack back = %s, %v; want no failures", out, err)
	}
	posts, _, _, _ := s.slack.snapshot()
	if len(posts) != 1 || posts[0].Channel != channel || !strings.Contains(blocksText(posts[0].Blocks), "rm a") {
		t.Fatalf("posts once Slack is back = %+v, want the approval's message", posts)
	}
	// A duplicate delivery (SQS is at least once) changes nothing.
	if out, err := invoke(t, s, batch); err != nil || !strings.Contains(out, `"batchItemFailures":[]`) {
		t.Fatalf("duplicate delivery = %s, %v", out, err)
	}
	if posts, _, _, _ := s.slack.snapshot(); len(posts) != 1 {
		t.Errorf("posts after a duplicate delivery = %d, want 1", len(posts))
	}
	if !strings.Contains(s.logs.String(), "retry queue message is no failed notification") {
		t.Error("the dropped message was not logged")
	}
}
