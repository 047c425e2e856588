package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// A claimed request digest is single-use and carries the table's TTL
// attribute as a number (DynamoDB ignores a TTL attribute of any other
// type, and the item would then stay for ever).
func TestClaimRequestTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, db := testenv.StoreOn(t)
	const digest = "3f1c"
	const expires int64 = 1772366700
	if err := st.ClaimRequest(ctx, digest, at(0), expires); err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimRequest(ctx, digest, at(1), expires+1); !errors.Is(err, store.ErrReplayed) {
		t.Fatalf("second claim = %v, want ErrReplayed", err)
	}
	out, err := devstack.DynamoClient(db.URL).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(st.Table()),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "SLACKREQ#" + digest},
			"sk": &types.AttributeValueMemberS{Value: "HEAD"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item[store.TTLAttribute].(*types.AttributeValueMemberN)
	if !ok || n.Value != strconv.FormatInt(expires, 10) {
		t.Errorf("item %s = %#v, want the number %d (the first claim's)", store.TTLAttribute, out.Item[store.TTLAttribute], expires)
	}
}

// TestSlackMessages: one worker holds the claim to post an approval's
// message; a claim left unfinished before the stale mark is taken over, a
// posted message never is; a failed post's claim is dropped for a retry.
func TestSlackMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.GetSlackMessage(ctx, "apr_1")
	wantErr(t, "message never claimed", err, store.ErrNotFound)

	must(t, st.ClaimSlackMessage(ctx, "apr_1", at(time.Minute), at(0)))
	wantErr(t, "a second claim", st.ClaimSlackMessage(ctx, "apr_1", at(time.Minute), at(0)), store.ErrSlackMessageClaimed)
	// Stale only when claimed strictly before the mark.
	wantErr(t, "a claim at the stale mark", st.ClaimSlackMessage(ctx, "apr_1", at(2*time.Minute), at(time.Minute)), store.ErrSlackMessageClaimed)
	must(t, st.ClaimSlackMessage(ctx, "apr_1", at(3*time.Minute), at(time.Minute+time.Nanosecond)))
	m, err := st.GetSlackMessage(ctx, "apr_1")
	if err != nil || m.ApprovalID != "apr_1" || m.ClaimedAt != at(3*time.Minute) || m.TS != "" {
		t.Fatalf("taken-over claim = %+v, %v", m, err)
	}

	posted := store.SlackMessage{ApprovalID: "apr_1", Channel: "C1", TS: "1700000000.000100", Status: string(vocab.ApprovalPending), ClaimedAt: m.ClaimedAt}
	must(t, st.PutSlackMessage(ctx, posted))
	if got, err := st.GetSlackMessage(ctx, "apr_1"); err != nil || got != posted {
		t.Fatalf("posted = %+v, %v; want %+v", got, err, posted)
	}
	wantErr(t, "a stale claim of a posted message", st.ClaimSlackMessage(ctx, "apr_1", at(time.Hour), at(time.Hour)), store.ErrSlackMessageClaimed)
	posted.Status = string(vocab.ApprovedOnce)
	must(t, st.PutSlackMessage(ctx, posted)) // replaces: the status the message now shows
	if got, _ := st.GetSlackMessage(ctx, "apr_1"); got.Status != string(vocab.ApprovedOnce) || got.TS != posted.TS {
		t.Errorf("after the update = %+v", got)
	}

	must(t, st.ClaimSlackMessage(ctx, "apr_2", at(0), at(0)))
	must(t, st.DeleteSlackMessage(ctx, "apr_2"))
	_, err = st.GetSlackMessage(ctx, "apr_2")
	wantErr(t, "a dropped claim", err, store.ErrNotFound)
	must(t, st.ClaimSlackMessage(ctx, "apr_2", at(time.Second), at(0))) // a retry posts
	must(t, st.DeleteSlackMessage(ctx, "apr_none"))                     // nothing to drop is no error
	if got, _ := st.GetSlackMessage(ctx, "apr_1"); got.TS != posted.TS {
		t.Errorf("dropping another approval's claim touched apr_1: %+v", got)
	}

	// Workers racing for one message, fresh and then (the first round's
	// claim gone stale) again: one wins each time.
	for round, stale := range []string{at(0), at(time.Minute + time.Nanosecond)} {
		won := wins(t, 32, store.ErrSlackMessageClaimed, func(_ int) error {
			return st.ClaimSlackMessage(ctx, "apr_race", at(time.Duration(round+1)*time.Minute), stale)
		})
		if won != 1 {
			t.Errorf("round %d: %d claims won, want 1", round, won)
		}
	}
}
