package server

import (
	"context"
	"fmt"
	"math/rand"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// A transaction or a Query must cost the same whatever else the table
// holds. Allocations stand in for time: they are deterministic, and the
// whole-table copy of a transaction or the per-item evaluation of a
// Query allocate for every stored item.

const scaleTable = "scale"

func scaleServer(t *testing.T, items int) *Server {
	t.Helper()

	srv := NewServer()
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	client := newTestDynamoClient(t, ts.URL)
	ctx := context.Background()
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(scaleTable),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("gpk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("gsk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{
			IndexName: aws.String("gsi"),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: aws.String("gpk"), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: aws.String("gsk"), KeyType: ddbtypes.KeyTypeRange},
			},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll},
		}},
	})
	require.NoError(t, err)

	// Partitions of ten items; one item in ten is in the index, half of
	// them under the index partition "G", half under "H".
	for n := 0; n < items; n++ {
		item := map[string]ddbtypes.AttributeValue{
			"pk":   &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("P%05d", n/10)},
			"sk":   &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("S%02d", n%10)},
			"data": &ddbtypes.AttributeValueMemberS{Value: "some data"},
		}
		if n%10 == 3 {
			item["gpk"] = &ddbtypes.AttributeValueMemberS{Value: []string{"G", "H"}[n%20/10]}
			item["gsk"] = &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("%05d", n)}
		}
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(scaleTable), Item: item})
		require.NoError(t, err)
	}

	return srv
}

func sv(s string) *AttributeValue { return &AttributeValue{S: aws.String(s)} }

// allocsAt reports the allocations of op on a table of each size.
func allocsAt(t *testing.T, sizes []int, op func(t *testing.T, c *Client)) []float64 {
	t.Helper()

	allocs := make([]float64, len(sizes))
	for i, n := range sizes {
		c := scaleServer(t, n).client
		allocs[i] = testing.AllocsPerRun(50, func() { op(t, c) })
	}

	return allocs
}

func requireFlat(t *testing.T, what string, allocs []float64) {
	t.Helper()

	t.Logf("%s: %.0f allocations on a table of 100 items, %.0f on 3,000", what, allocs[0], allocs[1])

	// A little slack for slices growing; a cost per stored item is far above it.
	if allocs[1] > allocs[0]*1.1+10 {
		t.Errorf("%s: %.0f allocations on a table of 100 items, %.0f on 3,000: the cost grows with the table", what, allocs[0], allocs[1])
	}
}

var scaleSizes = []int{100, 3000}

func TestTransactWriteItemsCostDoesNotGrowWithTable(t *testing.T) {
	ctx := context.Background()
	n := 0
	transact := func(fail bool) func(t *testing.T, c *Client) {
		return func(t *testing.T, c *Client) {
			n++
			cond := "attribute_exists(pk)"
			if fail {
				cond = "attribute_not_exists(pk)" // the item exists: the transaction is cancelled and undone
			}
			_, err := c.TransactWriteItems(ctx, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{
				{Put: &Put{TableName: aws.String(scaleTable), Item: map[string]*AttributeValue{
					"pk": sv("P00007"), "sk": sv(fmt.Sprintf("T%d", n%4)), "data": sv("x"),
				}}},
				{Update: &Update{
					TableName:                 aws.String(scaleTable),
					Key:                       map[string]*AttributeValue{"pk": sv("P00007"), "sk": sv("S00")},
					UpdateExpression:          aws.String("SET #d = :d"),
					ConditionExpression:       aws.String(cond),
					ExpressionAttributeNames:  map[string]string{"#d": "data"},
					ExpressionAttributeValues: map[string]*AttributeValue{":d": sv("y")},
				}},
			}})
			if fail != (err != nil) {
				t.Fatalf("TransactWriteItems (cancelled %v) = %v", fail, err)
			}
		}
	}

	requireFlat(t, "committed transaction", allocsAt(t, scaleSizes, transact(false)))
	requireFlat(t, "cancelled transaction", allocsAt(t, scaleSizes, transact(true)))
}

func TestQueryCostDoesNotGrowWithTable(t *testing.T) {
	ctx := context.Background()

	requireFlat(t, "table Query", allocsAt(t, scaleSizes, func(t *testing.T, c *Client) {
		out, err := c.Query(ctx, &QueryInput{
			TableName:                 aws.String(scaleTable),
			KeyConditionExpression:    aws.String("#pk = :pk AND sk > :s"),
			ExpressionAttributeNames:  map[string]string{"#pk": "pk"},
			ExpressionAttributeValues: map[string]*AttributeValue{":pk": sv("P00007"), ":s": sv("S04")},
		})
		require.NoError(t, err)
		require.Len(t, out.Items, 5)
	}))

	requireFlat(t, "index Query", allocsAt(t, scaleSizes, func(t *testing.T, c *Client) {
		out, err := c.Query(ctx, &QueryInput{
			TableName:                 aws.String(scaleTable),
			IndexName:                 aws.String("gsi"),
			KeyConditionExpression:    aws.String("gpk = :g"),
			ExpressionAttributeValues: map[string]*AttributeValue{":g": sv("H")}, // after every "G" in the index
			Limit:                     aws.Int32(5),
		})
		require.NoError(t, err)
		require.Len(t, out.Items, 5)
	}))
}

// TestRandomWritesKeepQueriesExact writes at random (puts, updates that
// add or remove the index keys, deletes, transactions of which some are
// cancelled half-way) and checks after every step that each partition's
// Query, forwards and backwards, each index partition's Query, and a Scan
// of the index return exactly what a plain map of the committed items
// says.
func TestRandomWritesKeepQueriesExact(t *testing.T) {
	ts := httptest.NewServer(NewServer())
	t.Cleanup(ts.Close)

	client := newTestDynamoClient(t, ts.URL)
	ctx := context.Background()
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(scaleTable),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("gpk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("gsk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{
			IndexName: aws.String("gsi"),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: aws.String("gpk"), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: aws.String("gsk"), KeyType: ddbtypes.KeyTypeRange},
			},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
		}},
	})
	require.NoError(t, err)

	type row = scaleRow

	model := map[[2]string]row{}
	rng := rand.New(rand.NewSource(1))
	pick := func(n int, prefix string) string { return fmt.Sprintf("%s%d", prefix, rng.Intn(n)) }
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	key := func(r row) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": s(r.pk), "sk": s(r.sk)}
	}
	table := aws.String(scaleTable)

	// write returns one random write and what it does to the model.
	write := func() (ddbtypes.TransactWriteItem, func()) {
		r := row{pk: pick(4, "p"), sk: pick(6, "s")}
		k := [2]string{r.pk, r.sk}
		switch rng.Intn(4) {
		case 0: // a put, in the index or not
			item := key(r)
			if rng.Intn(2) == 0 {
				r.gpk, r.gsk = pick(3, "g"), pick(5, "k")
				item["gpk"], item["gsk"] = s(r.gpk), s(r.gsk)
			}
			return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: table, Item: item}}, func() { model[k] = r }
		case 1: // an update that brings the item into the index (creating it if need be)
			gpk, gsk := pick(3, "g"), pick(5, "k")
			return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{
					TableName: table, Key: key(r), UpdateExpression: aws.String("SET gpk = :g, gsk = :k"),
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":g": s(gpk), ":k": s(gsk)},
				}}, func() {
					r.gpk, r.gsk = gpk, gsk
					model[k] = r
				}
		case 2: // an update that takes the item out of the index
			return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{
					TableName: table, Key: key(r), UpdateExpression: aws.String("REMOVE gpk, gsk"),
				}}, func() {
					r.gpk, r.gsk = "", ""
					model[k] = r
				}
		default:
			return ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: table, Key: key(r)}}, func() { delete(model, k) }
		}
	}

	for step := 0; step < 250; step++ {
		var items []ddbtypes.TransactWriteItem
		var effects []func()
		seen := map[string]bool{}
		for len(items) < 1+rng.Intn(4) {
			item, effect := write()
			var k map[string]ddbtypes.AttributeValue
			switch {
			case item.Put != nil:
				k = item.Put.Item
			case item.Update != nil:
				k = item.Update.Key
			default:
				k = item.Delete.Key
			}
			id := k["pk"].(*ddbtypes.AttributeValueMemberS).Value + "/" + k["sk"].(*ddbtypes.AttributeValueMemberS).Value
			if seen[id] {
				continue
			}
			seen[id] = true
			items, effects = append(items, item), append(effects, effect)
		}
		cancel := rng.Intn(3) == 0
		if cancel {
			// A condition that cannot hold, last: everything before it was
			// written and must be undone.
			items = append(items, ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
				TableName: table, Key: key(row{pk: "never", sk: "never"}), ConditionExpression: aws.String("attribute_exists(pk)"),
			}})
		}
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if cancel {
			var tce *ddbtypes.TransactionCanceledException
			require.ErrorAs(t, err, &tce, "step %d", step)
		} else {
			require.NoError(t, err, "step %d", step)
			for _, effect := range effects {
				effect()
			}
		}

		checkAgainstModel(t, client, step, model)
	}
}

// scaleRow is an item of TestRandomWritesKeepQueriesExact's model; gpk ""
// means not in the index.
type scaleRow struct{ pk, sk, gpk, gsk string }

func checkAgainstModel(t *testing.T, client *dynamodb.Client, step int, model map[[2]string]scaleRow) {
	t.Helper()

	ctx := context.Background()
	parts, indexParts := map[string][]string{}, map[string][]string{}
	var indexed []string
	for _, r := range model {
		parts[r.pk] = append(parts[r.pk], r.pk+"/"+r.sk)
		if r.gpk != "" {
			// The index orders by its key, then the table's.
			ik := r.gpk + "." + r.gsk + "|" + r.pk + "." + r.sk
			indexParts[r.gpk] = append(indexParts[r.gpk], ik)
			indexed = append(indexed, ik)
		}
	}

	got := func(items []map[string]ddbtypes.AttributeValue, index bool) []string {
		out := []string{}
		for _, it := range items {
			v := func(n string) string {
				if s, ok := it[n].(*ddbtypes.AttributeValueMemberS); ok {
					return s.Value
				}
				return "<none>"
			}
			if index {
				out = append(out, v("gpk")+"."+v("gsk")+"|"+v("pk")+"."+v("sk"))
			} else {
				out = append(out, v("pk")+"/"+v("sk"))
			}
		}
		return out
	}

	for _, p := range []string{"p0", "p1", "p2", "p3"} {
		want := slices.Sorted(slices.Values(parts[p]))
		for _, forward := range []bool{true, false} {
			out, err := client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(scaleTable),
				KeyConditionExpression:    aws.String("pk = :p"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: p}},
				ScanIndexForward:          aws.Bool(forward),
			})
			require.NoError(t, err)
			w := slices.Clone(want)
			if !forward {
				slices.Reverse(w)
			}
			require.Equal(t, strings.Join(w, " "), strings.Join(got(out.Items, false), " "), "step %d: Query %s forward=%v", step, p, forward)
		}
	}

	for _, g := range []string{"g0", "g1", "g2"} {
		out, err := client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(scaleTable),
			IndexName:                 aws.String("gsi"),
			KeyConditionExpression:    aws.String("gpk = :g"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":g": &ddbtypes.AttributeValueMemberS{Value: g}},
		})
		require.NoError(t, err)
		require.Equal(t, strings.Join(slices.Sorted(slices.Values(indexParts[g])), " "), strings.Join(got(out.Items, true), " "), "step %d: index Query %s", step, g)
	}

	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(scaleTable), IndexName: aws.String("gsi")})
	require.NoError(t, err)
	require.Equal(t, strings.Join(slices.Sorted(slices.Values(indexed)), " "), strings.Join(got(out.Items, true), " "), "step %d: index Scan", step)
}

// TestConcurrentTransactionsAndQueries runs committed and cancelled
// transactions and Queries from many goroutines at once (run it with
// -race): each goroutine owns a partition and must always read back
// exactly the items its committed transactions wrote.
func TestConcurrentTransactionsAndQueries(t *testing.T) {
	srv := scaleServer(t, 200)
	ctx := context.Background()

	const workers, rounds = 32, 20

	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			errs <- func() error {
				pk := fmt.Sprintf("W%02d", w)
				for r := 0; r < rounds; r++ {
					cancel := r%3 == 2
					items := []TransactWriteItem{{Put: &Put{TableName: aws.String(scaleTable), Item: map[string]*AttributeValue{
						"pk": sv(pk), "sk": sv(fmt.Sprintf("R%02d", r)), "gpk": sv("G"), "gsk": sv(pk),
					}}}}
					if cancel {
						items = append(items, TransactWriteItem{ConditionCheck: &ConditionCheck{
							TableName: aws.String(scaleTable), Key: map[string]*AttributeValue{"pk": sv(pk), "sk": sv("none")},
							ConditionExpression: aws.String("attribute_exists(pk)"),
						}})
					}
					_, err := srv.client.TransactWriteItems(ctx, &TransactWriteItemsInput{TransactItems: items})
					if cancel != (err != nil) {
						return fmt.Errorf("%s round %d: TransactWriteItems = %v", pk, r, err)
					}

					out, err := srv.client.Query(ctx, &QueryInput{
						TableName:                 aws.String(scaleTable),
						KeyConditionExpression:    aws.String("pk = :pk"),
						ExpressionAttributeValues: map[string]*AttributeValue{":pk": sv(pk)},
					})
					if err != nil {
						return err
					}
					if want := r + 1 - (r+1)/3; len(out.Items) != want {
						return fmt.Errorf("%s round %d: Query returned %d items, want %d", pk, r, len(out.Items), want)
					}
				}
				return nil
			}()
		}()
	}

	for w := 0; w < workers; w++ {
		require.NoError(t, <-errs)
	}
}

// TestQueryPagesPastAStartKeyThatLeft pages through a partition of the
// table and of the index one item at a time, deleting (table) or taking
// out of the index (index) each item as it is read, as a sweep does: every
// item is read once, because a page starts after its ExclusiveStartKey's
// place whether or not that item is still there.
func TestQueryPagesPastAStartKeyThatLeft(t *testing.T) {
	srv := scaleServer(t, 200) // partition P00006 of 10 items (one in G); index partition H of 10
	ctx := context.Background()

	walk := func(in *QueryInput, leave func(item map[string]*AttributeValue)) []string {
		var seen []string
		for {
			out, err := srv.client.Query(ctx, in)
			require.NoError(t, err)
			for _, item := range out.Items {
				seen = append(seen, *item["pk"].S+"/"+*item["sk"].S)
				leave(item)
			}
			if len(out.LastEvaluatedKey) == 0 {
				return seen
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	key := func(item map[string]*AttributeValue) map[string]*AttributeValue {
		return map[string]*AttributeValue{"pk": item["pk"], "sk": item["sk"]}
	}

	seen := walk(&QueryInput{
		TableName:                 aws.String(scaleTable),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]*AttributeValue{":pk": sv("P00006")},
		Limit:                     aws.Int32(1),
	}, func(item map[string]*AttributeValue) {
		_, err := srv.client.DeleteItem(ctx, &DeleteItemInput{TableName: aws.String(scaleTable), Key: key(item)})
		require.NoError(t, err)
	})
	require.Len(t, seen, 10, "table walk read %v", seen)

	seen = walk(&QueryInput{
		TableName:                 aws.String(scaleTable),
		IndexName:                 aws.String("gsi"),
		KeyConditionExpression:    aws.String("gpk = :g"),
		ExpressionAttributeValues: map[string]*AttributeValue{":g": sv("H")},
		Limit:                     aws.Int32(1),
	}, func(item map[string]*AttributeValue) {
		_, err := srv.client.UpdateItem(ctx, &UpdateItemInput{
			TableName: aws.String(scaleTable), Key: key(item), UpdateExpression: aws.String("REMOVE gpk, gsk"),
		})
		require.NoError(t, err)
	})
	require.Len(t, seen, 10, "index walk read %v", seen)
}

// TestQueryCostDoesNotGrowWithPartition: a Query whose key condition
// names a range of the range key reads that range, not its whole
// partition (patch 7): a run's partition in fluidbox holds every event and
// call record of the run, and its Queries ask for a few of them.
func TestQueryCostDoesNotGrowWithPartition(t *testing.T) {
	ctx := context.Background()
	onePartition := func(t *testing.T, items int) *Client {
		t.Helper()

		srv := scaleServer(t, 0)
		for n := 0; n < items; n++ {
			item := map[string]*AttributeValue{"pk": sv("BIG"), "sk": sv(fmt.Sprintf("E%05d", n)), "data": sv("some data")}
			if n%10 == 3 {
				item["gpk"], item["gsk"] = sv("G"), sv(fmt.Sprintf("%05d", n))
			}
			_, err := srv.client.PutItem(ctx, &PutItemInput{TableName: aws.String(scaleTable), Item: item})
			require.NoError(t, err)
		}

		return srv.client
	}
	allocs := func(op func(t *testing.T, c *Client)) []float64 {
		out := make([]float64, len(scaleSizes))
		for i, n := range scaleSizes {
			c := onePartition(t, n)
			out[i] = testing.AllocsPerRun(50, func() { op(t, c) })
		}

		return out
	}
	query := func(in *QueryInput, want int) func(t *testing.T, c *Client) {
		return func(t *testing.T, c *Client) {
			out, err := c.Query(ctx, in)
			require.NoError(t, err)
			require.Len(t, out.Items, want)
		}
	}

	requireFlat(t, "begins_with in a partition", allocs(query(&QueryInput{
		TableName:                 aws.String(scaleTable),
		KeyConditionExpression:    aws.String("pk = :p AND begins_with(sk, :s)"),
		ExpressionAttributeValues: map[string]*AttributeValue{":p": sv("BIG"), ":s": sv("E0002")},
	}, 10)))
	requireFlat(t, "BETWEEN in a partition, backwards", allocs(query(&QueryInput{
		TableName:                 aws.String(scaleTable),
		KeyConditionExpression:    aws.String("pk = :p AND #s BETWEEN :a AND :b"),
		ExpressionAttributeNames:  map[string]string{"#s": "sk"},
		ExpressionAttributeValues: map[string]*AttributeValue{":p": sv("BIG"), ":a": sv("E00040"), ":b": sv("E00044")},
		ScanIndexForward:          aws.Bool(false),
	}, 5)))
	requireFlat(t, "> in an index partition", allocs(query(&QueryInput{
		TableName:                 aws.String(scaleTable),
		IndexName:                 aws.String("gsi"),
		KeyConditionExpression:    aws.String("gpk = :g AND gsk < :x"),
		ExpressionAttributeValues: map[string]*AttributeValue{":g": sv("G"), ":x": sv("00050")},
	}, 5)))
}
