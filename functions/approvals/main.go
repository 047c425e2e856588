// Command approvals is the Lambda function for humans deciding approvals:
// list, get, decide, and a run's approvals and session grants. It holds
// DynamoDB permissions only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/function"
)

func main() {
	if err := function.ServeHTTP(context.Background(), os.Getenv); err != nil {
		slog.Error("approvals: start", "err", err)
		os.Exit(1)
	}
}
