package slackbot_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/notify"
)

// TestHaltMessage: a run.halted notification posts one message, without
// buttons, naming the run, the call and the reason, in the run's channel;
// a second delivery of the same notification posts nothing more.
func TestHaltMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nil)
	id, _ := s.run()
	detail, _ := json.Marshal(notify.HaltDetail{SessionID: id, ToolCallID: "toolu_01X", Reason: "unasked", HaltedAt: "2030-01-01T00:05:00.000000000Z"})
	ev := events.EventBridgeEvent{Source: notify.Source, DetailType: string(notify.RunHalted), Detail: detail}
	for range 2 {
		if err := s.notifier.HandleEvent(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	posts, _, _, _ := s.slack.snapshot()
	if len(posts) != 1 {
		t.Fatalf("%d messages posted, want 1", len(posts))
	}
	raw, _ := json.Marshal(posts[0].Blocks)
	for _, want := range []string{"Run halted", id, "toolu_01X", "unasked", "never asked"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("message %s does not say %q", raw, want)
		}
	}
	if strings.Contains(string(raw), `"type":"actions"`) || posts[0].Channel != channel {
		t.Errorf("message in %s with buttons: %s", posts[0].Channel, raw)
	}
}
