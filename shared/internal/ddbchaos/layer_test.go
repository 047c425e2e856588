package ddbchaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/store"
)

// newTable is the layer over minidyn with fluidbox's table, and a client
// that does not retry (so each fault is seen once).
func newTable(t *testing.T) (*devstack.DynamoDB, *dynamodb.Client, string) {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	client := devstack.DynamoClient(db.URL, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	st := store.New(client, "t")
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, client, "t"
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func item(pk, sk string, extra map[string]types.AttributeValue) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk)}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func validationMessage(t *testing.T, err error) string {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Fatalf("want a ValidationException, got %v", err)
	}
	return api.ErrorMessage()
}

// TestRefusesWhatDynamoDBRefuses sends one request per rule through the
// real SDK and wants DynamoDB's refusal for each, and nothing stored.
func TestRefusesWhatDynamoDBRefuses(t *testing.T) {
	db, client, table := newTable(t)
	ctx := context.Background()
	big := strings.Repeat("x", 400*1024)
	put := func(it map[string]types.AttributeValue) func() error {
		return func() error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
			return err
		}
	}
	cases := []struct {
		name, want string
		send       func() error
	}{
		{"item over 400 KB", "Item size has exceeded", put(item("a", "b", map[string]types.AttributeValue{"d": s(big)}))},
		{"sort key over 1024 bytes", "range keys has exceeded", put(item("a", strings.Repeat("k", 1025), nil))},
		{"partition key over 2048 bytes", "hashkey has exceeded", put(item(strings.Repeat("k", 2049), "b", nil))},
		{"empty sort key", "empty string value", put(item("a", "", nil))},
		{"empty index key", "secondary index key", put(item("a", "b", map[string]types.AttributeValue{"gsi1pk": s("")}))},
		{"empty string set", "may not be empty", put(item("a", "b", map[string]types.AttributeValue{"tags": &types.AttributeValueMemberSS{Value: []string{}}}))},
		{"empty map", "empty map", put(item("a", "b", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}))},
		{"empty list", "empty list", put(item("a", "b", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}}))},
		{"reserved word", "reserved keyword; reserved keyword: status", func() error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: item("a", "b", nil),
				UpdateExpression: aws.String("SET status = :s"), ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("x")}})
			return err
		}},
		{"unused value", "unused in expressions: keys: {:unused}", func() error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "b", nil),
				ConditionExpression:       aws.String("attribute_not_exists(pk)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":unused": s("x")}})
			return err
		}},
		{"undefined name", "attribute name used in the document path is not defined; attribute name: #n", func() error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "b", nil),
				ConditionExpression: aws.String("attribute_not_exists(#n)")})
			return err
		}},
		{"empty names", "ExpressionAttributeNames must not be empty", func() error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "b", nil),
				ConditionExpression: aws.String("attribute_not_exists(pk)"), ExpressionAttributeNames: map[string]string{}})
			return err
		}},
		{"key attribute updated", "part of the key", func() error {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: item("a", "b", nil),
				UpdateExpression: aws.String("SET sk = :s"), ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("x")}})
			return err
		}},
		{"consistent read on a GSI", "Consistent reads are not supported", func() error {
			_, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String("gsi1"), ConsistentRead: aws.Bool(true),
				KeyConditionExpression: aws.String("gsi1pk = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("x")}})
			return err
		}},
		{"two actions on one item", "multiple operations on one item", func() error {
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: item("a", "b", nil)}},
				{Delete: &types.Delete{TableName: aws.String(table), Key: item("a", "b", nil)}},
			}})
			return err
		}},
		{"over 100 actions", "less than or equal to 100", func() error {
			var items []types.TransactWriteItem
			for i := range 101 {
				items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item("a", strings.Repeat("s", i+1), nil)}})
			}
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}},
		{"over 4 MB", "exceeds the maximum allowed size of 4 MB", func() error {
			var items []types.TransactWriteItem
			for i := range 11 {
				items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table),
					Item: item("a", strings.Repeat("s", i+1), map[string]types.AttributeValue{"d": s(big[:399*1024])})}})
			}
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if msg := validationMessage(t, c.send()); !strings.Contains(msg, c.want) {
				t.Fatalf("message %q does not say %q", msg, c.want)
			}
		})
	}
	if got := len(db.Layer.Refused()); got != len(cases) {
		t.Fatalf("layer recorded %d refusals, want %d", got, len(cases))
	}
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 0 {
		t.Fatalf("refused requests stored %d items", len(out.Items))
	}
}

// TestUpdateOverItemLimit: an update that grows an item past 400 KB is
// refused and leaves the item as it was.
func TestUpdateOverItemLimit(t *testing.T) {
	_, client, table := newTable(t)
	ctx := context.Background()
	half := strings.Repeat("x", 250*1024)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", "b", map[string]types.AttributeValue{"d1": s(half)})}); err != nil {
		t.Fatal(err)
	}
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: item("a", "b", nil),
		UpdateExpression: aws.String("SET d2 = :d"), ExpressionAttributeValues: map[string]types.AttributeValue{":d": s(half)}})
	validationMessage(t, err)
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("a", "b", nil), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Item["d2"]; ok {
		t.Fatal("the refused update was applied")
	}
}

// TestFaults: each kind of fault reaches the SDK as the typed error AWS's
// answer produces, names the matching item, and nothing is written.
func TestFaults(t *testing.T) {
	db, client, table := newTable(t)
	ctx := context.Background()
	tx := func() error {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item("RUN#1", "HEAD", nil)}},
			{Put: &types.Put{TableName: aws.String(table), Item: item("RUN#1", "EV#2", nil)}},
		}})
		return err
	}
	for _, kind := range []ddbchaos.Kind{ddbchaos.Conflict, ddbchaos.ThrottleCancel} {
		in := db.Layer.Inject(ddbchaos.Fault{Op: "TransactWriteItems", Match: ddbchaos.KeyHas("EV#2"), Kind: kind})
		var tce *types.TransactionCanceledException
		if err := tx(); !errors.As(err, &tce) {
			t.Fatalf("%s: want TransactionCanceledException, got %v", kind, err)
		}
		if len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "None" || aws.ToString(tce.CancellationReasons[1].Code) != string(kind) {
			t.Fatalf("%s: reasons %+v", kind, tce.CancellationReasons)
		}
		if in.Fired() != 1 {
			t.Fatalf("%s: fired %d times", kind, in.Fired())
		}
	}
	// A fault that matches nothing does not fire.
	miss := db.Layer.Inject(ddbchaos.Fault{Op: "TransactWriteItems", Match: ddbchaos.KeyHas("RUN#2"), Kind: ddbchaos.Conflict})
	if err := tx(); err != nil {
		t.Fatal(err)
	}
	if miss.Fired() != 0 {
		t.Fatal("a fault for another key fired")
	}
	single := []struct {
		kind  ddbchaos.Kind
		check func(error) bool
	}{
		{ddbchaos.ItemConflict, func(err error) bool { var e *types.TransactionConflictException; return errors.As(err, &e) }},
		{ddbchaos.Throughput, func(err error) bool { var e *types.ProvisionedThroughputExceededException; return errors.As(err, &e) }},
		{ddbchaos.Throttling, func(err error) bool {
			var e smithy.APIError
			return errors.As(err, &e) && e.ErrorCode() == "ThrottlingException"
		}},
		{ddbchaos.Internal, func(err error) bool { var e *types.InternalServerError; return errors.As(err, &e) }},
	}
	for _, c := range single {
		db.Layer.Inject(ddbchaos.Fault{Op: "PutItem", Kind: c.kind})
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("X", "Y", nil)})
		if !c.check(err) {
			t.Fatalf("%s: got %v", c.kind, err)
		}
	}
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("X", "Y", nil), ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item != nil {
		t.Fatalf("a faulted write was applied: %v %v", got.Item, err)
	}
}

// TestRandomShare: the share of cancelled transactions follows the chaos
// setting.
func TestRandomShare(t *testing.T) {
	db, client, table := newTable(t)
	db.Layer.SetChaos(ddbchaos.Chaos{Conflict: 0.3, Seed: 7})
	ctx := context.Background()
	const n = 400
	cancelled := 0
	for i := range n {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item("p", strings.Repeat("s", i%50+1)+string(rune('a'+i/50)), nil)}},
		}})
		var tce *types.TransactionCanceledException
		switch {
		case errors.As(err, &tce):
			cancelled++
		case err != nil:
			t.Fatal(err)
		}
	}
	if cancelled < n*20/100 || cancelled > n*40/100 {
		t.Fatalf("%d of %d cancelled under conflict=0.3", cancelled, n)
	}
}

func TestParseChaos(t *testing.T) {
	c, err := ddbchaos.ParseChaos("conflict=0.2,throttle=0.05,itemconflict=0.01,latency=3ms,hold=2ms,seed=9")
	if err != nil {
		t.Fatal(err)
	}
	if c.Conflict != 0.2 || c.Throttle != 0.05 || c.ItemConflict != 0.01 || c.Latency.Milliseconds() != 3 || c.Hold.Milliseconds() != 2 || c.Seed != 9 {
		t.Fatalf("parsed %+v", c)
	}
	if back, _ := ddbchaos.ParseChaos(c.String()); back != c {
		t.Fatalf("round trip %q gave %+v", c.String(), back)
	}
	for _, bad := range []string{"conflict", "conflict=2", "throttle=-1", "nope=1", "latency=1h", "conflict=0.7,throttle=0.5", "hold=2ms", "latency=1ms,hold=2ms", "latency=20ms,hold=-1ms"} {
		if _, err := ddbchaos.ParseChaos(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// cancelReason is the reason code a cancelled transaction gives for its
// action at, or "" when err is not a cancellation.
func cancelReason(err error, at int) string {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || at >= len(tce.CancellationReasons) {
		return ""
	}
	return aws.ToString(tce.CancellationReasons[at].Code)
}

// TestHeldItemsConflict: under the timing model, transactions that meet
// an item another transaction in flight holds are cancelled with
// TransactionConflict on that item, even when both only check it (as
// DynamoDB does), and a cancelled one applies nothing; at least one of a
// burst on one item commits.
func TestHeldItemsConflict(t *testing.T) {
	t.Parallel()
	db, client, table := newTable(t)
	ctx := context.Background()
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("run", "FENCE", nil)}); err != nil {
		t.Fatal(err)
	}
	db.Layer.SetChaos(ddbchaos.Chaos{Latency: 300 * time.Millisecond, Hold: 250 * time.Millisecond})
	const n = 24
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: item("run", "FENCE", nil), ConditionExpression: aws.String("attribute_exists(pk)")}},
				{Put: &types.Put{TableName: aws.String(table), Item: item("run", fmt.Sprintf("CALL#%02d", i), nil)}},
			}})
		})
	}
	close(start)
	wg.Wait()
	committed, conflicts := 0, 0
	for i, err := range errs {
		got, gerr := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("run", fmt.Sprintf("CALL#%02d", i), nil), ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			t.Fatal(gerr)
		}
		switch {
		case err == nil:
			committed++
			if got.Item == nil {
				t.Errorf("transaction %d committed but its item is missing", i)
			}
		case cancelReason(err, 0) == "TransactionConflict":
			conflicts++
			if got.Item != nil {
				t.Errorf("transaction %d was cancelled but its item was written", i)
			}
		default:
			t.Errorf("transaction %d: %v, want success or TransactionConflict on the checked item", i, err)
		}
	}
	if committed == 0 || conflicts == 0 {
		t.Fatalf("%d committed, %d cancelled for conflict of %d racing on one held item; want both", committed, conflicts, n)
	}
	if st := db.Layer.Stats(); st.Conflicts != int64(conflicts) {
		t.Errorf("Stats().Conflicts = %d, want %d", st.Conflicts, conflicts)
	}
}

// TestHeldItemRefusesSingleWrites: a single-item write meeting an item a
// transaction in flight holds is refused with TransactionConflictException
// and applies nothing; a read during the hold sees the item as it was; the
// transaction then commits.
func TestHeldItemRefusesSingleWrites(t *testing.T) {
	t.Parallel()
	db, client, table := newTable(t)
	ctx := context.Background()
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("run", "HEAD", map[string]types.AttributeValue{"v": s("old")})}); err != nil {
		t.Fatal(err)
	}
	// Latency = Hold: single requests take no time, the transaction holds
	// its item for all of its second.
	db.Layer.SetChaos(ddbchaos.Chaos{Latency: time.Second, Hold: time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item("run", "HEAD", map[string]types.AttributeValue{"v": s("txn")})}},
		}})
		done <- err
	}()
	refused := 0
	sawOld, sawTxn, landedAfter := false, false, false
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the holding transaction: %v", err)
			}
			got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("run", "HEAD", nil), ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			// The transaction applied, unless an update that came after
			// it landed on top.
			if v := got.Item["v"].(*types.AttributeValueMemberS).Value; v != "txn" && !landedAfter {
				t.Errorf("after the transaction, v = %q, want txn", v)
			}
			if refused == 0 || !sawOld {
				t.Fatalf("during the hold: %d writes refused, read saw the old item %v; want both", refused, sawOld)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: item("run", "HEAD", nil),
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("single")}})
		var api smithy.APIError
		switch {
		case errors.As(err, &api) && api.ErrorCode() == "TransactionConflictException":
			refused++
			if sawTxn {
				t.Fatal("an update was refused after a read saw the transaction's write: it applied while it still held the item")
			}
		case err != nil:
			t.Fatal(err)
		case refused > 0:
			landedAfter = true
		}
		got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("run", "HEAD", nil), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		switch v := got.Item["v"].(*types.AttributeValueMemberS).Value; v {
		case "old":
			sawOld = true
		case "single":
			// An update that landed before the transaction took the item,
			// or after it let go.
		case "txn":
			// Committed, its answer on the way: from now on nothing may
			// be refused (checked above).
			sawTxn = true
		default:
			t.Fatalf("v = %q", v)
		}
	}
}

// TestStatsOverHTTP: a GET of StatsPath answers the layer's counts, so a
// harness in another process counts the requests a table served.
func TestStatsOverHTTP(t *testing.T) {
	t.Parallel()
	db, client, table := newTable(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("run", fmt.Sprintf("E#%d", i), nil)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("", "E", nil)}); err == nil {
		t.Fatal("an empty partition key was accepted")
	}
	resp, err := http.Get(db.URL + ddbchaos.StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got ddbchaos.Stats
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode %s: %v", ddbchaos.StatsPath, err)
	}
	want := db.Layer.Stats()
	if got != want || got.Refused != 1 || got.Requests < 4 {
		t.Errorf("GET %s = %+v, want %+v with 1 refused and at least 4 requests", ddbchaos.StatsPath, got, want)
	}
}
