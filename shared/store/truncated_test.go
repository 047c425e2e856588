package store_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
)

// TestTruncatedReadAskedAgain: a read answered 200 with a body cut short
// (the connection closed mid-answer) is asked again; a write so answered
// is not, since it may have applied.
func TestTruncatedReadAskedAgain(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	full := `{"Item":{"pk":{"S":"RUN#r"},"sk":{"S":"HEAD"}}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := asked.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutItem") || n == 1 {
			// Promise the whole answer, send half: the server then
			// closes the connection.
			w.Header().Set("Content-Length", strconv.Itoa(len(full)))
			_, _ = w.Write([]byte(full[:len(full)/2]))
			return
		}
		_, _ = w.Write([]byte(full))
	}))
	t.Cleanup(srv.Close)
	db := devstack.DynamoClient(srv.URL)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#r"}, "sk": &types.AttributeValueMemberS{Value: "HEAD"}}
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key})
	if err != nil || len(out.Item) != 2 || asked.Load() != 2 {
		b, _ := json.Marshal(out)
		t.Fatalf("GetItem = %s, %v after %d requests; want the item after 2", b, err, asked.Load())
	}
	asked.Store(0)
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key}); err == nil || asked.Load() != 1 {
		t.Errorf("PutItem = %v after %d requests; want its error after 1", err, asked.Load())
	}
}
