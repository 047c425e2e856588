// Package ddbchaos makes a local DynamoDB server (minidyn) behave like
// DynamoDB on AWS, as an http.Handler in front of it.
//
// It guarantees two things. First, what DynamoDB refuses is refused here
// too, with a ValidationException in DynamoDB's own wire form: items over
// 400 KB, partition keys over 2,048 bytes and sort keys over 1,024, empty
// key and index-key values, reserved words used unescaped in expressions,
// expression names and values that are unused, undefined or empty, two
// actions on one item in a transaction, transactions of more than 100
// actions or 4 MB, consistent reads on a global secondary index, empty or
// duplicated sets; and (minidyn reads them back wrong) empty maps and
// lists. Every refusal is recorded, so a test harness can fail the test
// whose code sent it even when that code swallowed the error. Second, a
// chosen share of requests fails the way DynamoDB fails under contention
// and load: transactions cancelled for TransactionConflict or
// ThrottlingError, single-item TransactionConflictException, throttling
// errors, added latency; and targeted single faults ("the next
// TransactWriteItems whose items include a key matching X"). A faulted
// request never reaches minidyn, as a cancelled transaction never applies
// on AWS. With Chaos.Hold it also models DynamoDB's timing: a transaction
// takes Chaos.Latency and holds its items for the last Hold of it, and a
// transaction or single-item write that meets a held item is cancelled
// with TransactionConflict, as on AWS; minidyn alone serializes every
// write and never conflicts, which flatters any design that contends on
// one item. Third, when given a role's IAM statements (Enforce), requests
// signed with that role's access key are authorized as AWS authorizes
// them and refused with AccessDeniedException otherwise, recorded with
// the validator's refusals (iam.go; package roles reads template.yaml's).
//
// It sits at the HTTP layer rather than in the SDK's middleware stack so
// that it sees exactly what goes over the wire from any client (tests,
// `fluidbox dev` processes, the CLI), and so that the SDK's own
// deserializer and retryer meet its errors exactly as they meet AWS's.
package ddbchaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/truora/minidyn/server"
)

// Layer is the validating, fault-injecting handler in front of a DynamoDB
// API server.
type Layer struct {
	next http.Handler

	mu      sync.Mutex
	schemas map[string]*schema
	chaos   Chaos
	rng     *rand.Rand
	faults  []*Injection
	refused []string
	stats   Stats
	// policies are the roles Enforce was given, by access key id.
	policies map[string]Policy
	// held are the items of the transactions in flight (Chaos.Hold), by
	// table and key.
	held map[heldKey]struct{}

	// updates serializes UpdateItem's size check (a read before, the
	// update, a read after) so that no other update lands between.
	updates sync.Mutex
}

// Stats counts what the layer did. Faulted counts every request the
// layer failed on purpose; Conflicts, the part of it that met an item a
// transaction in flight held (Chaos.Hold).
type Stats struct {
	Requests  int64 `json:"requests"`
	Refused   int64 `json:"refused"`
	Faulted   int64 `json:"faulted"`
	Conflicts int64 `json:"conflicts"`
}

// StatsPath is where the layer answers a GET with its Stats as JSON, so
// that a harness in another process can count the requests a table
// serves without a counting proxy in the way (one adds a hop and its
// processor time to every request it counts). DynamoDB's API is POST /
// only, so the path meets no request of a client's.
const StatsPath = "/ddbchaos/stats"

// New returns a Layer in front of next, injecting faults as c says (the
// zero Chaos injects none; validation is always on).
func New(next http.Handler, c Chaos) *Layer {
	return &Layer{next: next, schemas: map[string]*schema{}, chaos: c, rng: rand.New(rand.NewPCG(uint64(c.Seed), 0x5eed)), held: map[heldKey]struct{}{}}
}

// SetChaos changes the random faults from now on.
func (l *Layer) SetChaos(c Chaos) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chaos = c
	l.rng = rand.New(rand.NewPCG(uint64(c.Seed), 0x5eed))
}

// Refused returns the reasons of every request the validator refused, in
// order, each prefixed with its operation.
func (l *Layer) Refused() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.refused...)
}

// Stats returns the counts so far.
func (l *Layer) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// maxBody bounds what the layer reads of a request: far above DynamoDB's
// own request limits, so that anything DynamoDB would accept passes.
const maxBody = 32 << 20

// ServeHTTP validates a request, maybe fails it, and forwards the rest.
func (l *Layer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == StatsPath {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(l.Stats())
		return
	}
	if r.Method != http.MethodPost {
		l.next.ServeHTTP(w, r)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "com.amazon.coral.service#RequestEntityTooLargeException", "Request size exceeded")
		return
	}
	l.mu.Lock()
	l.stats.Requests++
	if op == "CreateTable" || op == "DeleteTable" || op == "UpdateTable" {
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		delete(l.schemas, in.TableName)
	}
	l.mu.Unlock()

	acts, verr := l.validate(op, body)
	if verr != nil {
		l.mu.Lock()
		l.stats.Refused++
		l.refused = append(l.refused, op+": "+verr.Error())
		l.mu.Unlock()
		writeError(w, http.StatusBadRequest, "com.amazon.coral.validate#ValidationException", verr.Error())
		return
	}
	if why := l.authorize(r, op, body); why != "" {
		l.mu.Lock()
		l.stats.Refused++
		l.refused = append(l.refused, op+": AccessDenied: "+why)
		l.mu.Unlock()
		writeAccessDenied(w, why)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if hold := l.holdTime(); hold > 0 && op == "TransactWriteItems" {
		l.transact(w, r, acts, hold)
		return
	}
	if !sleep(r.Context(), l.delay()) {
		return
	}
	if op == "PutItem" || op == "UpdateItem" || op == "DeleteItem" {
		if l.isHeld(acts[0]) {
			l.count(true)
			writeFault(w, ItemConflict, 0, 1)
			return
		}
	}
	if kind, at, ok := l.fault(op, acts); ok {
		l.mu.Lock()
		l.stats.Faulted++
		l.mu.Unlock()
		writeFault(w, kind, at, len(acts))
		return
	}
	if op == "UpdateItem" {
		l.update(w, r, acts[0])
		return
	}
	l.next.ServeHTTP(w, r)
}

// sleep waits d, or less if ctx ends first; it says whether it waited all
// of d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// heldKey names one item across tables.
type heldKey struct{ table, pk, sk string }

// holdTime is Chaos.Hold now.
func (l *Layer) holdTime() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.chaos.Hold
}

// count records a request failed on purpose; conflict says it met a held
// item.
func (l *Layer) count(conflict bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.Faulted++
	if conflict {
		l.stats.Conflicts++
	}
}

// isHeld says whether a transaction in flight holds a's item.
func (l *Layer) isHeld(a action) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	pk, sk := l.keyOfLocked(a)
	_, ok := l.held[heldKey{a.table, pk, sk}]
	return ok
}

// transact serves a TransactWriteItems under the timing model: it takes
// Latency, of which its items are held for the last hold. The first
// action whose item another transaction holds cancels it with
// TransactionConflict, as DynamoDB does, and nothing applies. The
// transaction is applied at the end of its hold, so that readers see the
// items as they were while it is in flight, and no other write can land
// on them in between.
func (l *Layer) transact(w http.ResponseWriter, r *http.Request, acts []action, hold time.Duration) {
	l.mu.Lock()
	prepare := l.chaos.Latency - hold
	l.mu.Unlock()
	if !sleep(r.Context(), prepare) {
		return
	}
	if kind, at, ok := l.fault("TransactWriteItems", acts); ok {
		l.count(false)
		writeFault(w, kind, at, len(acts))
		return
	}
	keys := make([]heldKey, len(acts))
	l.mu.Lock()
	for i, a := range acts {
		pk, sk := l.keyOfLocked(a)
		keys[i] = heldKey{a.table, pk, sk}
		if _, taken := l.held[keys[i]]; taken {
			l.stats.Faulted++
			l.stats.Conflicts++
			l.mu.Unlock()
			writeFault(w, Conflict, i, len(acts))
			return
		}
	}
	for _, k := range keys {
		l.held[k] = struct{}{}
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		for _, k := range keys {
			delete(l.held, k)
		}
		l.mu.Unlock()
	}()
	if !sleep(r.Context(), hold) {
		// The caller gave up: as on AWS, what it sees is an error and
		// what applies is unknown to it; here nothing does.
		return
	}
	l.next.ServeHTTP(w, r)
}

// update forwards an UpdateItem and refuses it, as DynamoDB does, when the
// item it produces exceeds the item size limit, restoring the item as it
// was (DynamoDB never applies such an update).
func (l *Layer) update(w http.ResponseWriter, r *http.Request, a action) {
	l.updates.Lock()
	defer l.updates.Unlock()
	get := map[string]any{"TableName": a.table, "Key": a.key, "ConsistentRead": true}
	var before struct {
		Item map[string]*server.AttributeValue
	}
	if status, body := l.call("GetItem", get); status == http.StatusOK {
		_ = json.Unmarshal(body, &before)
	}
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, r)
	if rec.Code == http.StatusOK {
		var after struct {
			Item map[string]*server.AttributeValue
		}
		if status, body := l.call("GetItem", get); status == http.StatusOK && json.Unmarshal(body, &after) == nil {
			if n := itemSize(after.Item); n > MaxItemBytes {
				if before.Item != nil {
					l.call("PutItem", map[string]any{"TableName": a.table, "Item": before.Item})
				} else {
					l.call("DeleteItem", map[string]any{"TableName": a.table, "Key": a.key})
				}
				msg := fmt.Sprintf("Item size to update has exceeded the maximum allowed size (%d bytes)", n)
				l.mu.Lock()
				l.stats.Refused++
				l.refused = append(l.refused, "UpdateItem: "+msg)
				l.mu.Unlock()
				writeError(w, http.StatusBadRequest, "com.amazon.coral.validate#ValidationException", msg)
				return
			}
		}
	}
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// call sends one request to the server behind the layer, bypassing it.
func (l *Layer) call(op string, in any) (int, []byte) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, nil
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	l.next.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// errNoTable: the table does not exist; the server behind answers that.
var errNoTable = errors.New("ddbchaos: no such table")

// schemaOf returns a table's key schema, asking the server behind once.
func (l *Layer) schemaOf(table string) (*schema, error) {
	l.mu.Lock()
	s, ok := l.schemas[table]
	l.mu.Unlock()
	if ok {
		return s, nil
	}
	status, body := l.call("DescribeTable", map[string]string{"TableName": table})
	if status != http.StatusOK {
		return nil, errNoTable
	}
	type keyElem struct{ AttributeName, KeyType string }
	var out struct {
		Table struct {
			KeySchema              []keyElem
			GlobalSecondaryIndexes []struct {
				IndexName string
				KeySchema []keyElem
			}
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, errNoTable
	}
	pair := func(ks []keyElem) [2]string {
		var p [2]string
		for _, k := range ks {
			if k.KeyType == "HASH" {
				p[0] = k.AttributeName
			} else {
				p[1] = k.AttributeName
			}
		}
		return p
	}
	p := pair(out.Table.KeySchema)
	s = &schema{pk: p[0], sk: p[1], gsis: map[string][2]string{}}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		s.gsis[g.IndexName] = pair(g.KeySchema)
	}
	l.mu.Lock()
	l.schemas[table] = s
	l.mu.Unlock()
	return s, nil
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}
