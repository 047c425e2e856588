// Command control is the Lambda function for runs, policies and capability
// bundles. It holds DynamoDB permissions only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/function"
)

func main() {
	if err := function.ServeHTTP(context.Background(), os.Getenv); err != nil {
		slog.Error("control: start", "err", err)
		os.Exit(1)
	}
}
