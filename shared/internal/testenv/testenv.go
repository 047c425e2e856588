// Package testenv starts the real local servers tests run against: a
// minidyn DynamoDB server and a fresh table for each test. Every request
// to the table goes through ddbchaos's validator; a test whose code sent
// anything DynamoDB would refuse fails, even if that code swallowed the
// ValidationException.
package testenv

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/store"
)

var tables atomic.Int64

// ChaosEnv names the environment variable that runs every test's DynamoDB
// under chaos (ddbchaos.ParseChaos's form, e.g. "conflict=0.2,throttle=0.05"):
// the chaos job (make test-chaos) sets it.
const ChaosEnv = "FLUIDBOX_TEST_CHAOS"

// Chaos is the chaos the environment asks for; none when ChaosEnv is
// unset. A malformed value fails the test.
func Chaos(t testing.TB) ddbchaos.Chaos {
	t.Helper()
	c, err := ddbchaos.ParseChaos(os.Getenv(ChaosEnv))
	if err != nil {
		t.Fatalf("%s: %v", ChaosEnv, err)
	}
	return c
}

// Calm turns db's random chaos off, for a test that counts requests or
// injects failures of its own; it says so in the test's log.
func Calm(t testing.TB, db *devstack.DynamoDB) {
	t.Helper()
	if !Chaos(t).Zero() {
		t.Logf("runs without %s chaos: it counts or injects DynamoDB failures itself", ChaosEnv)
	}
	db.Layer.SetChaos(ddbchaos.Chaos{})
}

// DynamoDB starts a minidyn server for one test and stops it at cleanup,
// failing the test if the validator refused any of its requests. Under
// ChaosEnv its requests fail as that says. Tests do not share a server:
// minidyn's CreateTable races with requests on other tables.
func DynamoDB(t testing.TB) *devstack.DynamoDB {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start minidyn: %v", err)
	}
	db.Layer.SetChaos(Chaos(t))
	t.Cleanup(func() {
		_ = db.Close()
		CheckRefused(t, db)
		if c := Chaos(t); !c.Zero() {
			st := db.Layer.Stats()
			t.Logf("ddbchaos %s: %d requests, %d failed by chaos", c, st.Requests, st.Faulted)
		}
	})
	return db
}

// CheckRefused fails t for every request of db the validator refused.
func CheckRefused(t testing.TB, db *devstack.DynamoDB) {
	t.Helper()
	for _, r := range db.Layer.Refused() {
		t.Errorf("DynamoDB on AWS refuses this request: %s", r)
	}
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

// MinuteStart is a clock that runs at the real rate but starts one second
// into a minute, so a test counting against a per-minute window (the run's
// request limit) has 59 s before the window turns over, wherever in the
// minute it happens to start.
func MinuteStart() func() time.Time {
	start := time.Now()
	shifted := start.Truncate(time.Minute).Add(time.Second)
	return func() time.Time { return shifted.Add(time.Since(start)) }
}
