package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/fluidbox/fluidbox/shared/devstack"
)

// dynamodb serves minidyn's DynamoDB-API server on its own, so that a
// `fluidbox dev` pointed at it (AWS_ENDPOINT_URL_DYNAMODB) keeps its table
// across restarts of the control plane.
func dynamodb(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dynamodb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "loopback address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := devstack.StartDynamoDB(*addr)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "DynamoDB API (minidyn, in memory) on %s\n", db.URL)
	fmt.Fprintf(stdout, "  AWS_ENDPOINT_URL_DYNAMODB=%s make run\npress Ctrl-C to stop\n", db.URL)
	<-ctx.Done()
	return nil
}
