package ddbchaos_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
)

func denied(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException"
}

// TestEnforce: a request signed as a role the layer enforces is allowed
// only as AWS would allow it — by action, by resource (the table, or its
// index), inside a transaction or not, and by leading key — and each
// refusal is recorded; other signers are not checked.
func TestEnforce(t *testing.T) {
	db, setup, table := newTable(t)
	ctx := context.Background()
	arn := ddbchaos.TableARN(table)
	db.Layer.Enforce("role", ddbchaos.Policy{Statements: []ddbchaos.Statement{
		{Actions: []string{"dynamodb:GetItem", "dynamodb:query"}, Resources: []string{arn}},
		{Actions: []string{"dynamodb:PutItem", "dynamodb:ConditionCheckItem"}, Resources: []string{arn}, EnclosingOperations: []string{"TransactWriteItems"}},
		{Actions: []string{"dynamodb:PutItem", "dynamodb:DeleteItem"}, Resources: []string{arn}, LeadingKeys: []string{"MSG#*"}},
		{Actions: []string{"dynamodb:Query"}, Resources: []string{arn + "/index/gsi1"}, LeadingKeys: []string{"PENDING"}},
	}})
	role := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(db.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("role", "x", "")})
	tbl := aws.String(table)
	put := func(pk string) *dynamodb.PutItemInput {
		return &dynamodb.PutItemInput{TableName: tbl, Item: item(pk, "HEAD", nil)}
	}
	txPut := func(pks ...string) *dynamodb.TransactWriteItemsInput {
		in := &dynamodb.TransactWriteItemsInput{}
		for _, pk := range pks {
			in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Put: &types.Put{TableName: tbl, Item: item(pk, "HEAD", nil)}})
		}
		return in
	}
	query := func(index, pk string) *dynamodb.QueryInput {
		in := &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: aws.String("#k = :v"),
			ExpressionAttributeNames:  map[string]string{"#k": "pk"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(pk)}}
		if index != "" {
			in.IndexName, in.ExpressionAttributeNames["#k"] = aws.String(index), "gsi1pk"
		}
		return in
	}
	cases := []struct {
		name  string
		call  func() error
		allow bool
	}{
		{"a plain put outside the leading keys", func() error { _, err := role.PutItem(ctx, put("USER#a")); return err }, false},
		{"a plain put inside them", func() error { _, err := role.PutItem(ctx, put("MSG#a")); return err }, true},
		{"the same put in a transaction", func() error { _, err := role.TransactWriteItems(ctx, txPut("USER#a")); return err }, true},
		{"a transaction with an item the role may not update", func() error {
			in := txPut("USER#b")
			in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Update: &types.Update{TableName: tbl, Key: item("MSG#b", "HEAD", nil), UpdateExpression: aws.String("SET n = :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}})
			_, err := role.TransactWriteItems(ctx, in)
			return err
		}, false},
		{"an update, held by no statement", func() error {
			_, err := role.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: tbl, Key: item("MSG#a", "HEAD", nil), UpdateExpression: aws.String("SET n = :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}})
			return err
		}, false},
		{"a delete inside the leading keys", func() error {
			_, err := role.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: tbl, Key: item("MSG#a", "HEAD", nil)})
			return err
		}, true},
		{"a get", func() error {
			_, err := role.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: item("USER#a", "HEAD", nil)})
			return err
		}, true},
		{"a batch get, its own action", func() error {
			_, err := role.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {Keys: []map[string]types.AttributeValue{item("USER#a", "HEAD", nil)}}}})
			return err
		}, false},
		{"a query of the table", func() error { _, err := role.Query(ctx, query("", "USER#a")); return err }, true},
		{"a query of the index, on the partition allowed", func() error { _, err := role.Query(ctx, query("gsi1", "PENDING")); return err }, true},
		{"a query of the index, on another partition", func() error { _, err := role.Query(ctx, query("gsi1", "MEMBER")); return err }, false},
		{"a scan, of the table's own resource but no statement's action", func() error { _, err := role.Scan(ctx, &dynamodb.ScanInput{TableName: tbl}); return err }, false},
		{"a control-plane call", func() error {
			_, err := role.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: tbl})
			return err
		}, false},
	}
	want := 0
	for _, c := range cases {
		err := c.call()
		switch {
		case c.allow && err != nil:
			t.Errorf("%s: %v, want it allowed", c.name, err)
		case !c.allow && !denied(err):
			t.Errorf("%s: %v, want AccessDeniedException", c.name, err)
		case !c.allow:
			want++
		}
	}
	if got := db.Layer.Refused(); len(got) != want || !strings.Contains(got[0], "AccessDenied") {
		t.Errorf("recorded %d refusals, want %d: %q", len(got), want, got)
	}
	// A denied transaction wrote nothing; other signers are not checked.
	if _, err := setup.PutItem(ctx, put("USER#c")); err != nil {
		t.Errorf("an unchecked signer's put: %v", err)
	}
	out, err := setup.GetItem(ctx, &dynamodb.GetItemInput{TableName: tbl, Key: item("USER#b", "HEAD", nil)})
	if err != nil || out.Item != nil {
		t.Errorf("the denied transaction's item = %v, %v; want none", out.Item, err)
	}
}
