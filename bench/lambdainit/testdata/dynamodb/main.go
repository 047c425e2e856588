// Command dynamodb is the floor of the size benchmark: hello's function
// plus the AWS SDK's DynamoDB client making the two calls every function
// makes, so that what a function links beyond the SDK can be told from
// what the SDK itself costs.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func main() {
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	lambda.Start(func(ctx context.Context, key string) (string, error) {
		got, err := db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String("bench"),
			Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
		})
		if err != nil {
			return "", err
		}
		_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("bench"), Item: got.Item})
		return "hello", err
	})
}
