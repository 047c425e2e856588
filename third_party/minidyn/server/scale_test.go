package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// A Query must cost the same whatever else the table holds. Allocations
// stand in for time: they are deterministic, and the per-item evaluation
// of a Query allocates for every stored item.

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
