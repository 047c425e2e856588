package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestReserveRequests: one conditional counter per window, never past its
// limit however many reserve at once, saying what it holds when it
// refuses, carrying the table's TTL as a number.
func TestReserveRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, db := testenv.StoreOn(t)
	k := store.RateKey("ses_1", 1772366700)
	must(t, st.ReserveRequests(ctx, k, 2, 5, 1772366800))
	must(t, st.ReserveRequests(ctx, k, 2, 5, 1772366800))
	err := st.ReserveRequests(ctx, k, 2, 5, 1772366800)
	var counted *store.CountedError
	if !errors.As(err, &counted) || counted.Count != 4 || !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("2 more of 5 past 4 = %v, want a CountedError of 4 (ErrConditionFailed)", err)
	}
	must(t, st.ReserveRequests(ctx, k, 1, 5, 1772366800)) // what is left
	wantErr(t, "the sixth of 5", st.ReserveRequests(ctx, k, 1, 5, 1772366800), store.ErrConditionFailed)
	if err := st.ReserveRequests(ctx, store.RateKey("ses_new", 1), 6, 5, 2); err == nil || errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("reserving more than the limit = %v, want refused before any write", err)
	}
	must(t, st.ReserveRequests(ctx, store.RateKey("ses_1", 1772366760), 1, 1, 1772366860))
	must(t, st.ReserveRequests(ctx, store.RateKey("ses_2", 1772366700), 1, 1, 1772366800))
	out, err := devstack.DynamoClient(db.URL).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(st.Table()),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k.PK}, "sk": &types.AttributeValueMemberS{Value: k.SK}},
	})
	must(t, err)
	if n, ok := out.Item["n"].(*types.AttributeValueMemberN); !ok || n.Value != "5" {
		t.Errorf("count = %#v, want 5 (a refused reservation counts nothing)", out.Item["n"])
	}
	if e, ok := out.Item[store.TTLAttribute].(*types.AttributeValueMemberN); !ok || e.Value != "1772366800" {
		t.Errorf("%s = %#v, want the number 1772366800", store.TTLAttribute, out.Item[store.TTLAttribute])
	}

	// Dozens reserving at once into one window: never past the limit.
	race := store.RateKey("ses_race", 1772366700)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			err := st.ReserveRequests(ctx, race, 3, 31, 1772366800)
			switch {
			case err == nil:
				passed.Add(3)
			case !errors.Is(err, store.ErrConditionFailed):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 30 {
		t.Errorf("%d of 144 reserved under a limit of 31 in threes, want 30", passed.Load())
	}
}
