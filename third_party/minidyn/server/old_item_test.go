package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// TestTransactPutReturnsTheOldItem: a Put of a transaction whose
// condition fails returns, with ReturnValuesOnConditionCheckFailure
// ALL_OLD, the item it was evaluated on in its cancellation reason, as
// DynamoDB does; without it, or when no item was there, none.
func TestTransactPutReturnsTheOldItem(t *testing.T) {
	srv := scaleServer(t, 10)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client := newTestDynamoClient(t, ts.URL)
	ctx := context.Background()

	put := func(sk string, rv ddbtypes.ReturnValuesOnConditionCheckFailure) *ddbtypes.TransactionCanceledException {
		t.Helper()
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{ConditionCheck: &ddbtypes.ConditionCheck{
				TableName:           aws.String(scaleTable),
				Key:                 map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "P00000"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "S01"}},
				ConditionExpression: aws.String("attribute_exists(pk)"),
			}},
			{Put: &ddbtypes.Put{
				TableName:                           aws.String(scaleTable),
				Item:                                map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "P00000"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}, "data": &ddbtypes.AttributeValueMemberS{Value: "new"}},
				ConditionExpression:                 aws.String("attribute_not_exists(pk) OR #d = :x"),
				ExpressionAttributeNames:            map[string]string{"#d": "data"},
				ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":x": &ddbtypes.AttributeValueMemberS{Value: "never"}},
				ReturnValuesOnConditionCheckFailure: rv,
			}},
		}})
		var tce *ddbtypes.TransactionCanceledException
		if err == nil || !errors.As(err, &tce) {
			return nil
		}
		require.Len(t, tce.CancellationReasons, 2)
		require.Equal(t, "None", aws.ToString(tce.CancellationReasons[0].Code))
		require.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[1].Code))
		return tce
	}

	tce := put("S02", ddbtypes.ReturnValuesOnConditionCheckFailureAllOld)
	require.NotNil(t, tce, "a Put on an existing item must be cancelled")
	old := tce.CancellationReasons[1].Item
	require.Equal(t, &ddbtypes.AttributeValueMemberS{Value: "some data"}, old["data"])
	require.Equal(t, &ddbtypes.AttributeValueMemberS{Value: "S02"}, old["sk"])

	tce = put("S03", ddbtypes.ReturnValuesOnConditionCheckFailureNone)
	require.NotNil(t, tce)
	require.Nil(t, tce.CancellationReasons[1].Item)

	// The cancelled Put changed nothing.
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(scaleTable),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "P00000"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "S02"}}})
	require.NoError(t, err)
	require.Equal(t, &ddbtypes.AttributeValueMemberS{Value: "some data"}, got.Item["data"])

	// Where no item is, the condition holds and the Put is written.
	require.Nil(t, put("S99", ddbtypes.ReturnValuesOnConditionCheckFailureAllOld))
}
