package devstack

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/truora/minidyn/server"

	"github.com/fluidbox/fluidbox/shared/store"
)

// The emulator's speed must not depend on how much a test wrote before:
// these benchmarks run the same transaction and the same queries against
// tables of 1k, 10k and 30k items: runs of 30 items each as the store lays
// them out, every run's head in one partition of the index and twenty
// pending approvals in another, so that each query returns as much at
// every size. They talk to
// minidyn's own handler, not through ddbchaos, so that they measure the
// emulator alone. third_party/minidyn/PATCHES.md says how to run them
// against the pristine module for comparison.

const (
	benchItemsPerRun = 30
	benchPending     = 20
	// benchRun is the run the benchmarks write and read: it exists at
	// every size and holds no approval.
	benchRun = 27
)

var benchSizes = []int{1_000, 10_000, 30_000}

// benchTable is one minidyn server whose table grows through benchSizes:
// sub-benchmarks run in order, and each tops the table up to its size.
type benchTable struct {
	db    *dynamodb.Client
	name  string
	items int
}

func newBenchTable(b *testing.B) *benchTable {
	b.Helper()
	ts := httptest.NewServer(server.NewServer())
	b.Cleanup(ts.Close)
	t := &benchTable{db: DynamoClient(ts.URL), name: "bench"}
	if err := store.New(t.db, t.name).CreateTable(context.Background()); err != nil {
		b.Fatal(err)
	}
	return t
}

func benchPK(run int) string { return fmt.Sprintf("RUN#bench%06d", run) }

// fill writes items until the table holds n, 25 to a BatchWriteItem.
func (t *benchTable) fill(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	for t.items < n {
		var reqs []types.WriteRequest
		for ; len(reqs) < 25 && t.items < n; t.items++ {
			run, k := t.items/benchItemsPerRun, t.items%benchItemsPerRun
			item := map[string]types.AttributeValue{
				"pk":      &types.AttributeValueMemberS{Value: benchPK(run)},
				"sk":      &types.AttributeValueMemberS{Value: fmt.Sprintf("EV#%020d", k)},
				"payload": &types.AttributeValueMemberS{Value: "an event envelope of a realistic size, more or less"},
			}
			if k == 0 {
				item["sk"] = &types.AttributeValueMemberS{Value: "HEAD"}
				item["last_seq"] = &types.AttributeValueMemberN{Value: "0"}
				item["gsi1pk"] = &types.AttributeValueMemberS{Value: "RUN"}
				item["gsi1sk"] = &types.AttributeValueMemberS{Value: benchPK(run)}
			}
			if k == 1 && run < benchPending {
				item["sk"] = &types.AttributeValueMemberS{Value: "APR#call"}
				item["gsi1pk"] = &types.AttributeValueMemberS{Value: "PENDING"}
				item["gsi1sk"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("2026-01-01T00:00:00Z#%06d", run)}
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		out, err := t.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{t.name: reqs},
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.UnprocessedItems) > 0 {
			b.Fatalf("BatchWriteItem left %d items unprocessed", len(out.UnprocessedItems[t.name]))
		}
	}
}

func forEachSize(b *testing.B, bench func(b *testing.B, t *benchTable)) {
	t := newBenchTable(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			t.fill(b, n)
			bench(b, t)
		})
	}
}

// BenchmarkMinidynTransactWriteItems is a ledger append's shape: a
// conditional update of the run's head and a put, in one run that exists.
// The put overwrites one of a few keys so the table does not grow with b.N.
func BenchmarkMinidynTransactWriteItems(b *testing.B) {
	forEachSize(b, func(b *testing.B, t *benchTable) {
		ctx := context.Background()
		pk := &types.AttributeValueMemberS{Value: benchPK(benchRun)}
		for i := 0; b.Loop(); i++ {
			_, err := t.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
				TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{
						TableName: aws.String(t.name),
						Key: map[string]types.AttributeValue{
							"pk": pk, "sk": &types.AttributeValueMemberS{Value: "HEAD"},
						},
						UpdateExpression:          aws.String("SET last_seq = last_seq + :one"),
						ConditionExpression:       aws.String("attribute_exists(pk)"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
					}},
					{Put: &types.Put{
						TableName: aws.String(t.name),
						Item: map[string]types.AttributeValue{
							"pk":      pk,
							"sk":      &types.AttributeValueMemberS{Value: fmt.Sprintf("BENCH#%02d", i%16)},
							"payload": &types.AttributeValueMemberS{Value: "x"},
						},
					}},
				},
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMinidynQuery reads one run's partition, as the timeline and a
// run's first decision do.
func BenchmarkMinidynQuery(b *testing.B) {
	forEachSize(b, func(b *testing.B, t *benchTable) {
		ctx := context.Background()
		for b.Loop() {
			out, err := t.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(t.name),
				KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :ev)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: benchPK(benchRun)}, ":ev": &types.AttributeValueMemberS{Value: "EV#"}},
				ConsistentRead:            aws.Bool(true),
			})
			if err != nil {
				b.Fatal(err)
			}
			if out.Count != benchItemsPerRun-1 {
				b.Fatalf("Query returned %d items, want %d", out.Count, benchItemsPerRun-1)
			}
		}
	})
}

// BenchmarkMinidynQueryIndex lists pending approvals through the index.
func BenchmarkMinidynQueryIndex(b *testing.B) {
	forEachSize(b, func(b *testing.B, t *benchTable) {
		ctx := context.Background()
		for b.Loop() {
			out, err := t.db.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(t.name),
				IndexName:                 aws.String("gsi1"),
				KeyConditionExpression:    aws.String("gsi1pk = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "PENDING"}},
				Limit:                     aws.Int32(50),
			})
			if err != nil {
				b.Fatal(err)
			}
			if out.Count != benchPending {
				b.Fatalf("index Query returned %d items, want %d", out.Count, benchPending)
			}
		}
	})
}
