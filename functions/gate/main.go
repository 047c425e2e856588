// Command gate is the Lambda function that answers the runner: permission
// requests and budget admissions. It holds DynamoDB permissions only, no KMS.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/function"
)

func main() {
	if err := function.ServeHTTP(context.Background(), os.Getenv); err != nil {
		slog.Error("gate: start", "err", err)
		os.Exit(1)
	}
}
