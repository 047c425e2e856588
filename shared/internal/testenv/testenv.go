// Package testenv starts the real local servers tests run against: a
// minidyn DynamoDB server and a fresh table for each test.
package testenv

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/store"
)

var tables atomic.Int64

// DynamoDB starts a minidyn server for one test and stops it at cleanup.
// Tests do not share a server: minidyn's CreateTable races with requests
// on other tables.
func DynamoDB(t testing.TB) *devstack.DynamoDB {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start minidyn: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Store returns a store over a new, empty table of its own.
func Store(t testing.TB, opts ...func(*dynamodb.Options)) *store.Store {
	t.Helper()
	st, _ := StoreOn(t, opts...)
	return st
}

// StoreOn is Store, also returning the server for failure emulation.
func StoreOn(t testing.TB, opts ...func(*dynamodb.Options)) (*store.Store, *devstack.DynamoDB) {
	t.Helper()
	db := DynamoDB(t)
	name := unsafe.ReplaceAllString(t.Name(), "_")
	if len(name) > 200 {
		name = name[:200]
	}
	table := fmt.Sprintf("t%d-%s", tables.Add(1), name)
	st := store.New(devstack.DynamoClient(db.URL, opts...), table)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	return st, db
}

// LoopbackCIDRs lets a test's control plane reach the upstreams and model
// stand-ins it starts on 127.0.0.1, as `fluidbox dev` does.
var LoopbackCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
