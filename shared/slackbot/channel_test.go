package slackbot_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestTriggerChannel: a run a trigger created is announced in the
// trigger's slack_channel; a trigger without one, a trigger deleted since
// and a run no trigger made use FLUIDBOX_SLACK_CHANNEL.
func TestTriggerChannel(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nil)
	ctx := context.Background()
	for _, tr := range []store.Trigger{
		{ID: "trg_prs", Repository: "acme/app", SlackChannel: "CPRS0001", CreatedAt: "2026-12-01T00:00:00Z"},
		{ID: "trg_plain", Repository: "acme/lib", CreatedAt: "2026-12-01T00:00:00Z"},
	} {
		if err := s.st.PutTrigger(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, trigger, want string
	}{
		{"the trigger's channel", "trg_prs", "CPRS0001"},
		{"a trigger without one", "trg_plain", channel},
		{"a trigger deleted since", "trg_gone", channel},
		{"no trigger", "", channel},
	}
	for i, c := range cases {
		runID, tok := s.run()
		if c.trigger != "" {
			s.setTrigger(runID, c.trigger)
		}
		s.pending(runID, tok, "c1", "rm a")
		waitFor(t, c.name, func() bool { p, _, _, _ := s.slack.snapshot(); return len(p) == i+1 })
		posts, _, _, _ := s.slack.snapshot()
		if got := posts[i].Channel; got != c.want {
			t.Errorf("%s: posted to %q, want %q", c.name, got, c.want)
		}
	}
}

// setTrigger records on run runID's head that trigger id created it, as a
// GitHub delivery does (the webhook's own tests cover how).
func (s *stack) setTrigger(runID, id string) {
	s.t.Helper()
	_, err := devstack.DynamoClient(s.dbURL).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(s.st.Table()),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RUN#" + runID},
			"sk": &types.AttributeValueMemberS{Value: "HEAD"},
		},
		UpdateExpression: aws.String("SET github = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"trigger_id":   &types.AttributeValueMemberS{Value: id},
			"repository":   &types.AttributeValueMemberS{Value: "acme/app"},
			"pull_request": &types.AttributeValueMemberN{Value: "7"},
		}}},
	})
	if err != nil {
		s.t.Fatal(err)
	}
}
