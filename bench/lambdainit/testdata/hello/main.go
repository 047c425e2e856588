// Command hello is the baseline of the init benchmark: the smallest
// aws-lambda-go function, built the way make build builds ours.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context) (string, error) { return "hello", nil })
}
