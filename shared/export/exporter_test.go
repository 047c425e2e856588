package export_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/export"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestObjectThatDiffers: an object at the key of a run's next events that
// is not those events (planted by anyone who can write the bucket) stops
// the run's delivery with ErrMismatch: the checkpoint does not move past
// what the object claims, and nothing is written after it.
func TestObjectThatDiffers(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	ctx := roles.As(context.Background(), "ExportFunction")
	createRun(t, st, "ses_planted")
	evs, err := st.Events(ctx, "ses_planted", 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %v, %v", evs, err)
	}
	at, err := time.Parse(time.RFC3339Nano, evs[0].At)
	if err != nil {
		t.Fatal(err)
	}
	b, client := newBucket(t)
	bucket := client()
	key := export.Key("ses_planted", 1, at)
	for _, planted := range []string{
		`{"schema":"fluidbox.ledger.v1","run_id":"ses_planted","seq":1,"type":"tool.decision","at":"` + evs[0].At + `","data":{"decision":"allow"}}` + "\n",
		`{"schema":"fluidbox.ledger.v1","run_id":"ses_other","seq":1,"type":"session.created","at":"` + evs[0].At + `","data":{}}` + "\n",
		"",
	} {
		_, _ = b.Backend.DeleteObject(bucketName, key)
		if created, err := bucket.Create(ctx, key, []byte(planted)); err != nil || !created {
			t.Fatalf("plant = %v, %v", created, err)
		}
		x := export.New(store.New(devstack.DynamoClient(db.URL, roles.Client), st.Table()), client(), time.Now, slog.New(slog.DiscardHandler))
		if n, err := x.Run(ctx, "ses_planted"); !errors.Is(err, export.ErrMismatch) || n != 0 {
			t.Errorf("Run over a planted object %q = %d, %v; want ErrMismatch", planted, n, err)
		}
		if n, err := st.ExportedThrough(ctx, "ses_planted"); err != nil || n != 0 {
			t.Errorf("checkpoint = %d, %v; want 0", n, err)
		}
	}
}

// TestStreamSkipsOtherRecords: only inserts of numbered events of a run
// wake a delivery; a record whose run is not a run id is skipped (its key
// is never put in an object's name) rather than retried.
func TestStreamSkipsOtherRecords(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	ctx := roles.As(context.Background(), "ExportFunction")
	createRun(t, st, "ses_real")
	b, client := newBucket(t)
	x := export.New(st, client(), time.Now, slog.New(slog.DiscardHandler))
	rec := func(name, pk, sk string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{
			SequenceNumber: pk + sk,
			Keys:           map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)},
		}}
	}
	batch := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		rec("INSERT", "RUN#ses_../../x", "EV#00000000000000000001"),
		rec("INSERT", "RUN#ses_real", "Q#0000000001#1#r#0"),
		rec("MODIFY", "RUN#ses_real", "EV#00000000000000000001"),
		rec("INSERT", "EXPORT#ses_real", "HEAD"),
	}}
	if resp, err := x.Stream(ctx, batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Stream = %+v, %v", resp, err)
	}
	if d := b.deliveries(); len(d) != 0 {
		t.Errorf("records that are not numbered events delivered %d objects", len(d))
	}
	batch.Records = append(batch.Records, rec("INSERT", "RUN#ses_real", "EV#00000000000000000001"))
	if resp, err := x.Stream(ctx, batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Stream = %+v, %v", resp, err)
	}
	d := b.deliveries()
	if len(d) != 1 || !strings.Contains(d[0].key, "/run=ses_real/00000000000000000001.ndjson") {
		t.Errorf("delivered %v, want ses_real's first object", d)
	}
}
