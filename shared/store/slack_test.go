package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
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
