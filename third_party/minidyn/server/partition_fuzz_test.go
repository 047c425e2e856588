package server

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

var (
	fuzzOnce   sync.Once
	fuzzClient *Client
)

// FuzzQueryPartitionMatchesWholeTable runs random Queries twice: as asked,
// which a partition read answers, and with the key condition written
// "(c) OR (c)", which means the same but is not a shape the partition
// read recognises, so the whole-table search (v0.8.2's) answers it. The
// items and the LastEvaluatedKey must be the same. (Queries with a
// FilterExpression and a Limit are left out: there v0.8.2 counted other
// partitions' items toward the limit, see PATCHES.md.)
func FuzzQueryPartitionMatchesWholeTable(f *testing.F) {
	for seed := int64(0); seed < 8; seed++ {
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, seed int64) {
		fuzzOnce.Do(func() { fuzzClient = scaleServer(t, 300).client })

		rng := rand.New(rand.NewSource(seed))
		in := randomQuery(rng)
		want := *in
		want.KeyConditionExpression = aws.String("(" + *in.KeyConditionExpression + ") OR (" + *in.KeyConditionExpression + ")")

		ctx := context.Background()
		got, gotErr := fuzzClient.Query(ctx, in)
		whole, wholeErr := fuzzClient.Query(ctx, &want)
		if (gotErr != nil) != (wholeErr != nil) {
			t.Fatalf("%s: partition read error %v, whole-table search error %v", describe(in), gotErr, wholeErr)
		}
		if gotErr != nil {
			return
		}
		if !reflect.DeepEqual(got.Items, whole.Items) || !reflect.DeepEqual(got.LastEvaluatedKey, whole.LastEvaluatedKey) {
			t.Fatalf("%s:\npartition read %d items, last %v\nwhole-table search %d items, last %v",
				describe(in), len(got.Items), got.LastEvaluatedKey, len(whole.Items), whole.LastEvaluatedKey)
		}
	})
}

func describe(in *QueryInput) string {
	esk := ""
	if in.ExclusiveStartKey != nil {
		esk = fmt.Sprintf(" after %v/%v", *in.ExclusiveStartKey["pk"].S, *in.ExclusiveStartKey["sk"].S)
	}

	return fmt.Sprintf("Query index=%q %q values=%v limit=%d forward=%v%s", aws.ToString(in.IndexName), *in.KeyConditionExpression,
		in.ExpressionAttributeValues, aws.ToInt32(in.Limit), aws.ToBool(in.ScanIndexForward), esk)
}

// randomQuery is a Query over scaleServer's table: a table partition or an
// index partition, a sort key condition or none, either order, a limit or
// none, a start key or none, a filter when there is no limit.
func randomQuery(rng *rand.Rand) *QueryInput {
	pick := func(options ...string) string { return options[rng.Intn(len(options))] }
	in := &QueryInput{
		TableName:                 aws.String(scaleTable),
		ExpressionAttributeValues: map[string]*AttributeValue{},
		ScanIndexForward:          aws.Bool(rng.Intn(2) == 0),
	}

	hash, sort := "pk", "sk"
	hashValue := sv(fmt.Sprintf("P%05d", rng.Intn(32))) // a few past the table's 30 partitions
	sortValue := func() *AttributeValue { return sv(fmt.Sprintf("S%02d", rng.Intn(11))) }
	if rng.Intn(3) == 0 {
		in.IndexName = aws.String("gsi")
		hash, sort = "gpk", "gsk"
		hashValue = sv(pick("G", "H", "I"))
		sortValue = func() *AttributeValue { return sv(fmt.Sprintf("%05d", rng.Intn(300))) }
	}

	cond := pick(hash+" = :h", ":h = "+hash, "#h = :h")
	if cond == "#h = :h" {
		in.ExpressionAttributeNames = map[string]string{"#h": hash}
	}
	in.ExpressionAttributeValues[":h"] = hashValue

	switch rng.Intn(5) {
	case 0:
	case 1:
		cond += " AND " + sort + " " + pick("<", "<=", ">", ">=", "=") + " :s"
		in.ExpressionAttributeValues[":s"] = sortValue()
	case 2:
		cond += " AND " + sort + " BETWEEN :s AND :t"
		in.ExpressionAttributeValues[":s"], in.ExpressionAttributeValues[":t"] = sortValue(), sortValue()
	case 3:
		cond += " AND begins_with(" + sort + ", :s)"
		in.ExpressionAttributeValues[":s"] = sv(pick("S0", "S1", "0", "001"))
	default:
		cond = pick("(", "") + cond
		if cond[0] == '(' {
			cond += ")"
		}
	}
	in.KeyConditionExpression = aws.String(cond)

	if rng.Intn(2) == 0 {
		in.Limit = aws.Int32(int32(1 + rng.Intn(4)))
	} else if rng.Intn(2) == 0 {
		in.FilterExpression = aws.String("attribute_exists(#d)")
		if in.ExpressionAttributeNames == nil {
			in.ExpressionAttributeNames = map[string]string{}
		}
		in.ExpressionAttributeNames["#d"] = "data"
	}

	if rng.Intn(3) == 0 {
		n := rng.Intn(300)
		in.ExclusiveStartKey = map[string]*AttributeValue{
			"pk": sv(fmt.Sprintf("P%05d", n/10)), "sk": sv(fmt.Sprintf("S%02d", n%10)),
		}
		if in.IndexName != nil && n%10 == 3 {
			in.ExclusiveStartKey["gpk"] = sv([]string{"G", "H"}[n%20/10])
			in.ExclusiveStartKey["gsk"] = sv(fmt.Sprintf("%05d", n))
		}
	}

	return in
}
