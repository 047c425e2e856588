// Package devstack runs fluidbox's local stand-ins for AWS: minidyn's
// DynamoDB-API server on loopback, behind a layer that refuses what
// DynamoDB refuses and can fail requests the way DynamoDB fails them
// (shared/internal/ddbchaos), and SDK clients for local endpoints. The dev
// server and the tests use it; no Lambda function imports it.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/truora/minidyn/server"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/store"
)

// DynamoDB is minidyn's DynamoDB server listening on a loopback address.
type DynamoDB struct {
	// Server is minidyn's handler, for failure emulation in tests.
	Server *server.Server
	// Layer is the validator and fault injector in front of Server: every
	// request goes through it.
	Layer *ddbchaos.Layer
	// URL is the endpoint to give the SDK.
	URL string
	srv *http.Server
}

// StartDynamoDB serves minidyn on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port).
func StartDynamoDB(addr string) (*DynamoDB, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("devstack: dynamodb address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("devstack: dynamodb address %q is not loopback", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devstack: listen %s: %w", addr, err)
	}
	d := &DynamoDB{Server: server.NewServer(), URL: "http://" + ln.Addr().String()}
	d.Layer = ddbchaos.New(d.Server, ddbchaos.Chaos{})
	d.srv = &http.Server{Handler: d.Layer, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

// Close stops the server.
func (d *DynamoDB) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return d.srv.Close()
	}
	return nil
}

// DynamoClient returns an SDK client for a local DynamoDB endpoint, with
// static credentials and the retry policy of every fluidbox client
// (store.RetryConflicts); opts apply after it. minidyn sends no CRC
// header, so response checksum validation is off.
func DynamoClient(endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:                          "us-east-1",
		Credentials:                     credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint:                    aws.String(endpoint),
		DisableValidateResponseChecksum: true,
	}, append([]func(*dynamodb.Options){store.RetryConflicts}, opts...)...)
}

// ParseChaos reads a chaos specification ("conflict=0.2,throttle=0.05";
// see ddbchaos.ParseChaos) for Layer.SetChaos.
func ParseChaos(s string) (ddbchaos.Chaos, error) { return ddbchaos.ParseChaos(s) }

// DynamoStats are the counts of StartDynamoDB's validating layer, which a
// GET of DynamoStatsPath on its URL answers as JSON.
type DynamoStats = ddbchaos.Stats

// DynamoStatsPath is where StartDynamoDB's server answers its counts.
const DynamoStatsPath = ddbchaos.StatsPath
