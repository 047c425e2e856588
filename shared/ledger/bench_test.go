package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
)

// benchTableItems is the table size both benchmarks start from: minidyn
// snapshots whole tables per transaction, so rates depend on it.
const benchTableItems = 1000

// BenchmarkAppend: one ledger append (counter update + one event) per op.
func BenchmarkAppend(b *testing.B) {
	st, db := testenv.StoreOn(b)
	fill(b, devstack.DynamoClient(db.URL), st.Table())
	newRun(b, st, "ses_bench")
	l := ledger.New(st, time.Now)
	env := requested(b, "bench")
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.Append(context.Background(), "ses_bench", func(store.Head) (store.Batch, error) {
			return store.Batch{Events: []redact.Envelope{env}}, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkRawTransactWriteItems is the floor: the same two-item
// transaction (conditional counter update, conditional put of an item of
// the event's shape) written directly with the SDK, with none of the
// ledger's work around it. The run head in BenchmarkAppend is larger than
// the bare counter here, which is part of what the comparison measures.
func BenchmarkRawTransactWriteItems(b *testing.B) {
	st, db := testenv.StoreOn(b)
	client := devstack.DynamoClient(db.URL)
	fill(b, client, st.Table())
	ctx := context.Background()
	seq := 0
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(st.Table()),
		Item:      map[string]types.AttributeValue{"pk": s("RAW"), "sk": s("HEAD"), "last_seq": &types.AttributeValueMemberN{Value: "0"}},
	}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		seq++
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				TableName:           aws.String(st.Table()),
				Key:                 map[string]types.AttributeValue{"pk": s("RAW"), "sk": s("HEAD")},
				UpdateExpression:    aws.String("SET last_seq = :n"),
				ConditionExpression: aws.String("last_seq = :prev"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":n":    &types.AttributeValueMemberN{Value: fmt.Sprint(seq)},
					":prev": &types.AttributeValueMemberN{Value: fmt.Sprint(seq - 1)},
				},
			}},
			{Put: &types.Put{
				TableName: aws.String(st.Table()),
				Item: map[string]types.AttributeValue{
					"pk": s("RAW"), "sk": s(fmt.Sprintf("EV#%020d", seq)),
					"seq":  &types.AttributeValueMemberN{Value: fmt.Sprint(seq)},
					"type": s("tool.requested"), "at": s(time.Now().UTC().Format(time.RFC3339Nano)),
					"data": s(`{"tool_call_id":"bench","tool_name":"Bash","input_digest":""}`),
				},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}},
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func fill(b *testing.B, client *dynamodb.Client, table string) {
	b.Helper()
	for i := range benchTableItems {
		_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item:      map[string]types.AttributeValue{"pk": s(fmt.Sprintf("FILL#%d", i)), "sk": s("X"), "data": s("filler")},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
