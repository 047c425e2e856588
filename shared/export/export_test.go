package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/export"
	"github.com/fluidbox/fluidbox/shared/export/objects"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const bucketName = "ledger"

// delivery is one object S3 accepted: what a reader of the bucket (an S3
// event notification, a SIEM's S3 input) is handed.
type delivery struct {
	key  string
	body []byte
}

// bucket is gofakes3's in-memory backend with every accepted object
// recorded, objects refused for existing counted, and the answer to a
// chosen number of accepted objects lost (the object stored, the client
// answered 500), as a consumer dying between the object and its
// checkpoint sees it.
type bucket struct {
	gofakes3.Backend
	mu        sync.Mutex
	delivered []delivery
	refused   atomic.Int32
	lose      atomic.Int32
}

func (b *bucket) PutObject(name, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	body, err := io.ReadAll(input)
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	res, err := b.Backend.PutObject(name, key, meta, bytes.NewReader(body), int64(len(body)), cond)
	if err != nil {
		b.refused.Add(1)
		return res, err
	}
	b.mu.Lock()
	b.delivered = append(b.delivered, delivery{key, body})
	b.mu.Unlock()
	if b.lose.Add(-1) >= 0 {
		return res, errors.New("the answer is lost")
	}
	b.lose.Store(0)
	return res, nil
}

func (b *bucket) deliveries() []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.delivered)
}

// newBucket serves a bucket on loopback and returns it with a function
// making a new client of it. The clients do not retry: a lost answer
// reaches the exporter as an error, as a crash after the object would.
func newBucket(t *testing.T) (*bucket, func() *objects.S3) {
	t.Helper()
	b := &bucket{Backend: s3mem.New()}
	if err := b.CreateBucket(bucketName); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(b).Server())
	t.Cleanup(srv.Close)
	return b, func() *objects.S3 {
		c := s3.New(s3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(srv.URL),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
			Retryer:      aws.NopRetryer{},
		})
		return objects.NewS3(c, bucketName)
	}
}

func envelope(t *testing.T, ev redact.Event) redact.Envelope {
	t.Helper()
	e, err := redact.New(ev)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func createRun(t *testing.T, st *store.Store, id string) {
	t.Helper()
	if err := st.CreateRun(context.Background(), store.NewRun{
		Head:    store.Head{RunID: id, Status: vocab.Running, CreatedAt: store.FormatTime(time.Now())},
		Policy:  store.PolicySnapshot{PolicyID: "pol_x", Version: 1, Document: "{}"},
		Created: envelope(t, redact.SessionCreated{SessionID: id}),
	}); err != nil {
		t.Fatal(err)
	}
}

// streamer plays the table's stream and Lambda's mapping: it turns the
// numbered events the table holds into INSERT records (keys of real
// items), in batches, retrying a batch from the record the consumer names,
// and redelivering some batches whole.
type streamer struct {
	t        *testing.T
	raw      *dynamodb.Client
	table    string
	rnd      *rand.Rand
	streamed map[string]int64 // run -> highest seq made a record
	pending  []events.DynamoDBEventRecord
	next     int // sequence numbers
}

// catchUp makes a record of each numbered event of runs not streamed yet,
// interleaving runs at random, each run's in its order.
func (s *streamer) catchUp(runs []string) {
	s.t.Helper()
	per := map[string][]events.DynamoDBEventRecord{}
	for _, run := range runs {
		out, err := s.raw.Query(context.Background(), &dynamodb.QueryInput{
			TableName:              aws.String(s.table),
			KeyConditionExpression: aws.String("pk = :pk AND sk > :from AND sk < :to"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk":   &types.AttributeValueMemberS{Value: "RUN#" + run},
				":from": &types.AttributeValueMemberS{Value: fmt.Sprintf("EV#%020d", s.streamed[run])},
				":to":   &types.AttributeValueMemberS{Value: "EV#~"},
			},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, it := range out.Items {
			sk := it["sk"].(*types.AttributeValueMemberS).Value
			per[run] = append(per[run], s.record(run, sk))
			var seq int64
			fmt.Sscanf(strings.TrimPrefix(sk, "EV#"), "%d", &seq)
			s.streamed[run] = seq
		}
	}
	for len(per) > 0 {
		keys := make([]string, 0, len(per))
		for k := range per {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		run := keys[s.rnd.IntN(len(keys))]
		s.pending = append(s.pending, per[run][0])
		if per[run] = per[run][1:]; len(per[run]) == 0 {
			delete(per, run)
		}
	}
}

func (s *streamer) record(run, sk string) events.DynamoDBEventRecord {
	s.next++
	return events.DynamoDBEventRecord{
		EventID:   fmt.Sprintf("e%d", s.next),
		EventName: string(events.DynamoDBOperationTypeInsert),
		Change: events.DynamoDBStreamRecord{
			Keys:           map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("RUN#" + run), "sk": events.NewStringAttribute(sk)},
			SequenceNumber: fmt.Sprintf("%021d", s.next),
			StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}
}

// deliver hands the next batch (1 to 10 records) to consumer, and to a
// second consumer at the same time when twin is set (a retried batch
// racing an instance still at work); records from the first one named
// failed go back to the front. It returns whether any failed.
func (s *streamer) deliver(ctx context.Context, consumer, twin *export.Exporter) bool {
	s.t.Helper()
	n := min(len(s.pending), 1+s.rnd.IntN(10))
	batch := events.DynamoDBEvent{Records: slices.Clone(s.pending[:n])}
	s.pending = s.pending[n:]
	var wg sync.WaitGroup
	var twinResp events.DynamoDBEventResponse
	if twin != nil {
		wg.Go(func() { twinResp, _ = twin.Stream(ctx, batch) })
	}
	resp, err := consumer.Stream(ctx, batch)
	wg.Wait()
	if err != nil {
		s.t.Fatalf("Stream = %v", err)
	}
	failed := slices.Concat(resp.BatchItemFailures, twinResp.BatchItemFailures)
	if len(failed) == 0 {
		return false
	}
	from := n
	for _, f := range failed {
		for i, r := range batch.Records {
			if r.Change.SequenceNumber == f.ItemIdentifier {
				from = min(from, i)
			}
		}
	}
	s.pending = append(slices.Clone(batch.Records[from:]), s.pending...)
	return true
}

// TestStreamExportExactlyOnce is the acceptance test of the stream export:
// three runs recorded concurrently (four writers each, as the gate's
// Lambda instances, and a sequencer numbering as notify does) while the
// stream is consumed in batches of random size, some delivered twice and
// some to two consumers at once; the consumer is restarted (a new one,
// with new clients, from the checkpoints) and loses S3's answer to an
// object it created; and an event numbered but not visible yet is waited
// for. Every event of the three runs is then in exactly one object S3
// accepted (once for any reader of the bucket), in seq order by key and
// within each object, as the table holds it.
func TestStreamExportExactlyOnce(t *testing.T) {
	t.Parallel()
	x := newExactlyOnce(t)
	sequenced := x.recordConcurrently()
	batches, failures := x.consume(sequenced)
	if x.b.refused.Load() == 0 || failures == 0 {
		t.Errorf("%d objects refused for existing and %d failed batches: the test did not exercise redelivery", x.b.refused.Load(), failures)
	}
	x.lostAnswer()
	x.notVisible()

	checkDelivered(t, x.st, x.runs, x.b.deliveries())
	t.Logf("%d events of %d runs in %d objects; %d batches, %d failed, %d objects refused for existing",
		x.s.streamed[x.runs[0]]+x.s.streamed[x.runs[1]]+x.s.streamed[x.runs[2]], len(x.runs), len(x.b.deliveries()), batches, failures, x.b.refused.Load())
}

// exactlyOnce is TestStreamExportExactlyOnce's table, bucket, runs and
// stream, and the consumer now delivered to.
type exactlyOnce struct {
	t         *testing.T
	ctx       context.Context
	exporting context.Context // as the export function's role
	st        *store.Store
	db        *devstack.DynamoDB
	raw       *dynamodb.Client
	b         *bucket
	client    func() *objects.S3
	gate      *ledger.Ledger
	runs      []string
	s         *streamer
	c         *export.Exporter
}

func newExactlyOnce(t *testing.T) *exactlyOnce {
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	raw := devstack.DynamoClient(db.URL)
	b, client := newBucket(t)
	ctx := context.Background()
	x := &exactlyOnce{t: t, ctx: ctx, exporting: roles.As(ctx, "ExportFunction"), st: st, db: db, raw: raw, b: b, client: client,
		gate: ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead),
		runs: []string{"ses_run0", "ses_run1", "ses_run2"},
		s:    &streamer{t: t, raw: raw, table: st.Table(), rnd: rand.New(rand.NewPCG(1, 2)), streamed: map[string]int64{}},
	}
	for _, r := range x.runs {
		createRun(t, st, r)
	}
	x.c = x.consumer()
	return x
}

// consumer is a new export function instance, with new clients.
func (x *exactlyOnce) consumer() *export.Exporter {
	return export.New(store.New(devstack.DynamoClient(x.db.URL, roles.Client), x.st.Table()), x.client(), time.Now, slog.New(slog.DiscardHandler))
}

// recordConcurrently starts four writers a run, as the gate's Lambda
// instances, and a sequencer numbering as notify does; sequenced is closed
// once the writers are done and everything is numbered.
func (x *exactlyOnce) recordConcurrently() (sequenced chan struct{}) {
	const writers, appends = 4, 12
	var writing sync.WaitGroup
	for _, r := range x.runs {
		for w := range writers {
			writing.Go(func() { x.write(r, w, appends) })
		}
	}
	done := make(chan struct{})
	sequenced = make(chan struct{})
	go x.sequence(done, sequenced)
	go func() { writing.Wait(); close(done) }()
	return sequenced
}

// write appends writer w's calls to run r.
func (x *exactlyOnce) write(r string, w, appends int) {
	for i := range appends {
		id := fmt.Sprintf("c%d-%d", w, i)
		if _, err := x.gate.Append(x.ctx, r, func(store.Head) (store.Batch, error) {
			return store.Batch{Events: []redact.Envelope{
				envelope(x.t, redact.ToolRequested{ToolCallID: id, ToolName: "Bash"}),
				envelope(x.t, redact.ToolDecision{ToolCallID: id, ToolName: "Bash", Decision: vocab.Allow, Source: "policy"}),
			}}, nil
		}); err != nil {
			x.t.Error(err)
			return
		}
	}
}

// sequence numbers the runs every 5 ms until done, then once more.
func (x *exactlyOnce) sequence(done <-chan struct{}, sequenced chan<- struct{}) {
	defer close(sequenced)
	seq := ledger.New(x.st, time.Now, ledger.SequenceOnlyWhenRead)
	for {
		select {
		case <-done:
			for _, r := range x.runs {
				if err := seq.Sequence(x.ctx, r); err != nil {
					x.t.Error(err)
				}
			}
			return
		case <-time.After(5 * time.Millisecond):
		}
		for _, r := range x.runs {
			if err := seq.Sequence(x.ctx, r); err != nil {
				x.t.Error(err)
			}
		}
	}
}

// consume delivers the stream in batches of random size until everything
// is numbered: some answers of S3 lost, a restart, some batches to two
// consumers at once, some delivered twice.
func (x *exactlyOnce) consume(sequenced <-chan struct{}) (batches, failures int) {
	s := x.s
	finished := false
	for !finished {
		select {
		case <-sequenced:
			finished = true
		default:
		}
		s.catchUp(x.runs)
		for len(s.pending) > 0 {
			batches++
			if batches == 1 || batches%8 == 3 {
				// The answer to the next object created. From the first
				// batch: once the sequencer has numbered everything, one
				// object per run may hold it all, and later batches create
				// none, so only the first is sure to meet a lost answer.
				x.b.lose.Store(1)
			}
			if batches == 10 {
				x.c = x.consumer() // a restart: nothing kept but the table and the bucket
			}
			var twin *export.Exporter
			if batches%7 == 0 {
				twin = x.consumer()
			}
			redeliver := slices.Clone(s.pending[:min(len(s.pending), 3)])
			if s.deliver(x.exporting, x.c, twin) {
				failures++
				x.c = x.consumer() // a failed batch goes to another instance
			}
			if batches%5 == 0 {
				s.pending = append(redeliver, s.pending...)
			}
		}
	}
	return batches, failures
}

// record appends n more events to run, numbers them and streams them.
func (x *exactlyOnce) record(run string, n int) {
	t := x.t
	t.Helper()
	evs := make([]redact.Envelope, n)
	for i := range evs {
		evs[i] = envelope(t, redact.ToolRequested{ToolCallID: fmt.Sprintf("late%d", i), ToolName: "Read"})
	}
	if _, err := x.gate.Append(x.ctx, run, func(store.Head) (store.Batch, error) { return store.Batch{Events: evs}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := ledger.New(x.st, time.Now, ledger.SequenceOnlyWhenRead).Sequence(x.ctx, run); err != nil {
		t.Fatal(err)
	}
	x.s.catchUp(x.runs)
}

// lostAnswer: a consumer dies after its object, before its checkpoint,
// and the run records more before the batch is delivered again: the next
// consumer finds the object holding fewer events than it read, and takes
// the object's end.
func (x *exactlyOnce) lostAnswer() {
	t, s := x.t, x.s
	x.b.lose.Store(1)
	x.record(x.runs[1], 2)
	if !s.deliver(x.exporting, x.c, nil) {
		t.Fatal("a batch whose object's answer was lost did not fail")
	}
	x.record(x.runs[1], 2)
	for len(s.pending) > 0 {
		if s.deliver(x.exporting, x.consumer(), nil) {
			t.Fatal("the batch delivered again failed")
		}
	}
}

// notVisible: an event numbered but not visible yet: its run's delivery
// stops before it, and goes on once it is there.
func (x *exactlyOnce) notVisible() {
	t, s, st, ctx := x.t, x.s, x.st, x.ctx
	run := x.runs[0]
	x.record(run, 3)
	hidden := fmt.Sprintf("EV#%020d", s.streamed[run]-1)
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + run}, "sk": &types.AttributeValueMemberS{Value: hidden}}
	item, err := x.raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.Table()), Key: key, ReturnValues: types.ReturnValueAllOld})
	if err != nil {
		t.Fatal(err)
	}
	batch := events.DynamoDBEvent{Records: s.pending}
	s.pending = nil
	resp, err := x.c.Stream(x.exporting, batch)
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("Stream with an event not visible = %+v, %v; want its run's first record failed", resp, err)
	}
	if n, err := st.ExportedThrough(ctx, run); err != nil || n != s.streamed[run]-2 {
		t.Errorf("%s exported through %d, %v; want %d, the event before the one not visible", run, n, err, s.streamed[run]-2)
	}
	if _, err := x.raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.Table()), Item: item.Attributes}); err != nil {
		t.Fatal(err)
	}
	if resp, err := x.consumer().Stream(x.exporting, batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Stream once the event is visible = %+v, %v", resp, err)
	}
}

// checkDelivered: every numbered event of runs is in exactly one object
// S3 accepted, each object's lines are consecutive events of one run as
// the table holds them, and a run's objects in key order hold its events
// 1, 2, 3, ... with none missing.
func checkDelivered(t *testing.T, st *store.Store, runs []string, got []delivery) {
	t.Helper()
	byRun := map[string][]delivery{}
	for _, d := range got {
		_, rest, _ := strings.Cut(d.key, "/run=")
		run, _, _ := strings.Cut(rest, "/")
		byRun[run] = append(byRun[run], d)
	}
	for _, run := range runs {
		want, err := st.Events(context.Background(), run, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		objs := byRun[run]
		sort.SliceStable(objs, func(i, j int) bool { return objs[i].key < objs[j].key })
		var seqs []int64
		for _, o := range objs {
			for l := range strings.Lines(string(o.body)) {
				var ln export.Line
				if err := json.Unmarshal([]byte(l), &ln); err != nil {
					t.Fatalf("%s: %q: %v", o.key, l, err)
				}
				if ln.Seq < 1 || ln.Seq > int64(len(want)) {
					t.Errorf("%s: seq %d of %s, which has %d events", o.key, ln.Seq, run, len(want))
					continue
				}
				e := want[ln.Seq-1]
				if ln.Schema != export.Schema || ln.RunID != run || ln.Type != e.Type || ln.At != e.At || !jsonEqual(ln.Data, e.Data) {
					t.Errorf("%s: line %+v differs from the table's %+v", o.key, ln, e)
				}
				seqs = append(seqs, ln.Seq)
			}
		}
		if len(seqs) != len(want) {
			t.Errorf("%s: %d lines delivered for %d events", run, len(seqs), len(want))
		}
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Errorf("%s: line %d of its objects in key order is seq %d, want %d (duplicated, missing or out of order)", run, i+1, seq, i+1)
				break
			}
		}
	}
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
