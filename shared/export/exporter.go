package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Bucket is where objects go: S3 (objects.NewS3) on AWS.
type Bucket interface {
	// Create writes body at key only if no object is there; created is
	// false, with no error, when one was.
	Create(ctx context.Context, key string, body []byte) (created bool, err error)
	// Get reads the object at key.
	Get(ctx context.Context, key string) ([]byte, error)
}

// ErrGap: the run's next event is numbered but not visible yet (a read can
// see part of a transaction). Its delivery stops there; the stream retries.
var ErrGap = errors.New("export: the run's next event is not visible yet")

// ErrMismatch: an object at the key of the run's next events holds
// something else than those events. Nothing is delivered past it.
var ErrMismatch = errors.New("export: an object differs from the ledger")

// MaxObjectBytes bounds an object's size, unless its one event is larger
// (an item is at most 400 KB).
const MaxObjectBytes = 4 << 20

// An object holds at most maxEvents events, read pageSize at a time.
const (
	maxEvents = 1000
	pageSize  = 100
)

// Exporter delivers runs' numbered events to a bucket.
type Exporter struct {
	st     *store.Store
	bucket Bucket
	now    func() time.Time
	log    *slog.Logger
}

// New returns an exporter reading st and writing to bucket.
func New(st *store.Store, bucket Bucket, now func() time.Time, log *slog.Logger) *Exporter {
	return &Exporter{st: st, bucket: bucket, now: now, log: log}
}

// Key is the object that holds runID's events from first on, whose first
// event was recorded at at: ledger/v1/date=<day of at>/run=<id>/<first,
// 20 digits>.ndjson. Within a run, keys sort in seq order.
func Key(runID string, first int64, at time.Time) string {
	return fmt.Sprintf("ledger/v1/date=%s/run=%s/%020d.ndjson", at.UTC().Format(time.DateOnly), runID, first)
}

// Run delivers runID's numbered events after its checkpoint, one object
// at a time, until none is left; it returns how many events it delivered.
// It stops with ErrGap at an event not visible yet.
func (x *Exporter) Run(ctx context.Context, runID string) (int, error) {
	if !ids.Valid("ses_", runID) {
		return 0, fmt.Errorf("export: run id %q: not a run id", runID)
	}
	delivered := 0
	for {
		through, err := x.st.ExportedThrough(ctx, runID)
		if err != nil {
			return delivered, err
		}
		body, first, last, gap, err := x.next(ctx, runID, through)
		if err != nil {
			return delivered, err
		}
		if len(body) == 0 {
			if gap {
				return delivered, fmt.Errorf("export: %s after seq %d: %w", runID, through, ErrGap)
			}
			return delivered, nil
		}
		key := Key(runID, through+1, first)
		created, err := x.bucket.Create(ctx, key, body)
		if err != nil {
			return delivered, fmt.Errorf("export: create %s: %w", key, err)
		}
		if !created {
			// A consumer before this one created it and may have died
			// before its checkpoint: it holds the same events, perhaps
			// fewer. Take its end.
			if last, err = x.adopt(ctx, key, runID, through, body); err != nil {
				return delivered, err
			}
		}
		switch err := x.st.AdvanceExport(ctx, runID, through, last, store.FormatTime(x.now())); {
		case errors.Is(err, store.ErrConditionFailed):
			// Another consumer moved it; read it again.
		case err != nil:
			return delivered, err
		case created:
			delivered += int(last - through)
			x.log.InfoContext(ctx, "export: delivered", "run", runID, "from", through+1, "through", last, "key", key)
		}
	}
}

// next reads runID's numbered events after through, while they follow
// each other, up to an object's bounds: body holds their lines, first is
// when the first was recorded and last is the last one's seq. gap says
// that the event after the last one read is numbered but not visible.
func (x *Exporter) next(ctx context.Context, runID string, through int64) (body []byte, first time.Time, last int64, gap bool, err error) {
	var buf bytes.Buffer
	want := through + 1
	for n := 0; n < maxEvents; {
		page, err := x.st.Events(ctx, runID, want-1, min(pageSize, maxEvents-n))
		if err != nil {
			return nil, time.Time{}, 0, false, err
		}
		for _, e := range page {
			if e.Seq != want {
				return buf.Bytes(), first, want - 1, true, nil
			}
			line, err := encodeLine(runID, e)
			if err != nil {
				return nil, time.Time{}, 0, false, err
			}
			if n > 0 && buf.Len()+len(line) > MaxObjectBytes {
				return buf.Bytes(), first, want - 1, false, nil
			}
			if n == 0 {
				if first, err = time.Parse(time.RFC3339Nano, e.At); err != nil {
					return nil, time.Time{}, 0, false, fmt.Errorf("export: event %d of %s: time %q: %w", e.Seq, runID, e.At, err)
				}
			}
			buf.Write(line)
			want++
			n++
		}
		if len(page) < pageSize {
			break
		}
	}
	return buf.Bytes(), first, want - 1, false, nil
}

// adopt reads the object already at key and returns its last seq, after
// checking that it holds runID's events from through+1 on, each line as
// the table has it (body, what this consumer would have written, is the
// events it read; the object may hold fewer, or more that this read did
// not see yet).
func (x *Exporter) adopt(ctx context.Context, key, runID string, through int64, body []byte) (int64, error) {
	old, err := x.bucket.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("export: read %s: %w", key, err)
	}
	short, long := old, body
	if len(short) > len(long) {
		short, long = long, short
	}
	if len(old) == 0 || old[len(old)-1] != '\n' || !bytes.HasPrefix(long, short) {
		return 0, fmt.Errorf("export: %s: %w", key, ErrMismatch)
	}
	last := through
	for l := range strings.Lines(string(old)) {
		var ln Line
		if err := json.Unmarshal([]byte(l), &ln); err != nil || ln.Schema != Schema || ln.RunID != runID || ln.Seq != last+1 {
			return 0, fmt.Errorf("export: %s: line %d: %w", key, last+1-through, ErrMismatch)
		}
		last = ln.Seq
	}
	return last, nil
}

// NumberedRun is the run of a stream record that inserts a numbered event
// (RUN#<id>/EV#<seq>); ok is false for any other record.
func NumberedRun(rec events.DynamoDBEventRecord) (runID string, ok bool) {
	pk, sk := rec.Change.Keys["pk"], rec.Change.Keys["sk"]
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString ||
		!strings.HasPrefix(pk.String(), "RUN#") || !strings.HasPrefix(sk.String(), "EV#") {
		return "", false
	}
	return strings.TrimPrefix(pk.String(), "RUN#"), true
}

// Stream handles one batch of the table's stream: each run a record of
// which inserts a numbered event is delivered (Run), once per batch, in
// the order of its first record; other records are skipped. When a run
// fails (ErrGap included), the answer names its first record as a batch
// item failure, and Lambda (with ReportBatchItemFailures) delivers the
// batch again from there: runs delivered already find nothing new.
func (x *Exporter) Stream(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	var runs []string
	firstOf := map[string]int{}
	for i, rec := range ev.Records {
		run, ok := NumberedRun(rec)
		if !ok {
			continue
		}
		if !ids.Valid("ses_", run) {
			// Not a key fluidbox writes: retrying cannot help, and
			// it would hold up every run of the shard.
			x.log.ErrorContext(ctx, "export: record of no run skipped", "event_id", rec.EventID)
			continue
		}
		if _, seen := firstOf[run]; !seen {
			firstOf[run] = i
			runs = append(runs, run)
		}
	}
	retryFrom := -1
	delivered := 0
	for _, run := range runs {
		n, err := x.Run(ctx, run)
		delivered += n
		if err != nil {
			x.log.ErrorContext(ctx, "export: run not delivered; retrying from a record", "run", run, "err", err)
			if retryFrom < 0 || firstOf[run] < retryFrom {
				retryFrom = firstOf[run]
			}
		}
	}
	x.log.InfoContext(ctx, "export", "records", len(ev.Records), "runs", len(runs), "delivered", delivered)
	if retryFrom >= 0 {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[retryFrom].Change.SequenceNumber})
	}
	return resp, nil
}
