package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"
)

// TestDescribeTableWhileWriting: DescribeTable reads the table's item
// count while puts add items. v0.8.2 read it without the client's lock,
// a data race that -race reports.
func TestDescribeTableWhileWriting(t *testing.T) {
	c := scaleServer(t, 10).client
	ctx := context.Background()

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				_, err := c.PutItem(ctx, &PutItemInput{TableName: aws.String(scaleTable),
					Item: map[string]*AttributeValue{"pk": sv(fmt.Sprintf("W%d", g)), "sk": sv(fmt.Sprintf("%03d", i))}})
				require.NoError(t, err)
			}
		})
		wg.Go(func() {
			for range 25 {
				_, err := c.DescribeTable(ctx, &DescribeTableInput{TableName: aws.String(scaleTable)})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
}
