package main

import (
	"context"
	"fmt"
	"io"

	"github.com/fluidbox/fluidbox/shared/devstack"
)

// dynamodb serves minidyn's DynamoDB-API server on its own, so that a
// `fluidbox dev` pointed at it (AWS_ENDPOINT_URL_DYNAMODB) keeps its table
// across restarts of the control plane, and so that several `fluidbox dev`
// processes can share one table as Lambda instances do. It refuses what
// DynamoDB refuses; --chaos makes it fail a share of requests the way
// DynamoDB does under contention ("conflict=0.2,throttle=0.05").
func dynamodb(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dynamodb", stderr, "dynamodb [--addr A] [--chaos SPEC]")
	addr := fs.String("addr", "127.0.0.1:8000", "loopback address to listen on")
	spec := fs.String("chaos", "", "fail requests as DynamoDB does under contention: conflict=SHARE (transactions cancelled for TransactionConflict), itemconflict=SHARE (single-item TransactionConflictException), throttle=SHARE, latency=DURATION, hold=DURATION (a transaction takes all of latency and holds its items for the last hold of it; others meeting them are cancelled with TransactionConflict), seed=N; e.g. latency=20ms,hold=18ms,conflict=0.2")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	chaos, err := devstack.ParseChaos(*spec)
	if err != nil {
		return usagef("--chaos: %v", err)
	}
	db, err := devstack.StartDynamoDB(*addr)
	if err != nil {
		return err
	}
	defer db.Close()
	db.Layer.SetChaos(chaos)
	fmt.Fprintf(stdout, "DynamoDB API (minidyn, in memory) on %s\n", db.URL)
	if !chaos.Zero() {
		fmt.Fprintf(stdout, "  chaos: %s\n", chaos)
	}
	fmt.Fprintf(stdout, "  requests served so far: curl %s%s\n", db.URL, devstack.DynamoStatsPath)
	fmt.Fprintf(stdout, "  AWS_ENDPOINT_URL_DYNAMODB=%s make run\npress Ctrl-C to stop\n", db.URL)
	<-ctx.Done()
	if st := db.Layer.Stats(); st.Requests > 0 {
		fmt.Fprintf(stdout, "%d requests, %d refused as invalid, %d failed by chaos (%d on held items)\n", st.Requests, st.Refused, st.Faulted, st.Conflicts)
	}
	return nil
}
