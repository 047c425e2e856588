package ddbchaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Chaos is the share of requests that fail the way DynamoDB fails under
// contention and load. Shares are probabilities in [0, 1].
type Chaos struct {
	// Conflict is the share of TransactWriteItems cancelled because
	// another transaction was in flight on one of their items
	// (TransactionCanceledException, reason TransactionConflict).
	Conflict float64
	// ItemConflict is the share of single-item writes (PutItem,
	// UpdateItem, DeleteItem) refused with TransactionConflictException,
	// which DynamoDB answers when such a write meets an item a
	// transaction holds.
	ItemConflict float64
	// Throttle is the share of requests throttled: a TransactWriteItems
	// is cancelled with reason ThrottlingError; any other request gets
	// ThrottlingException or ProvisionedThroughputExceededException.
	Throttle float64
	// Latency is the most a request waits before it is served; each
	// waits a uniformly random part of it. With Hold set, a
	// TransactWriteItems takes all of it instead (DynamoDB's two-phase
	// commit takes about the same time every time), and every other
	// request a uniformly random part of Latency-Hold: single-item
	// requests and reads take a fraction of a transaction's time.
	Latency time.Duration
	// Hold, when set, is how long a TransactWriteItems holds its items
	// (the last Hold of its Latency): a transaction that meets an item
	// another one holds is cancelled with reason TransactionConflict,
	// and a single-item write that meets one is refused with
	// TransactionConflictException, as DynamoDB does. Reads see the
	// items as they were until the holder commits. This is the timing
	// model: it makes contention on one item cost what it costs on AWS,
	// where minidyn alone serializes every write and never conflicts.
	Hold time.Duration
	// Seed makes the random choices repeatable.
	Seed int64
}

// Zero says whether c injects nothing.
func (c Chaos) Zero() bool {
	return c.Conflict == 0 && c.ItemConflict == 0 && c.Throttle == 0 && c.Latency == 0 && c.Hold == 0
}

// String is c in the form ParseChaos reads.
func (c Chaos) String() string {
	var parts []string
	add := func(k string, v float64) {
		if v != 0 {
			parts = append(parts, k+"="+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	add("conflict", c.Conflict)
	add("itemconflict", c.ItemConflict)
	add("throttle", c.Throttle)
	if c.Latency != 0 {
		parts = append(parts, "latency="+c.Latency.String())
	}
	if c.Hold != 0 {
		parts = append(parts, "hold="+c.Hold.String())
	}
	if c.Seed != 0 {
		parts = append(parts, "seed="+strconv.FormatInt(c.Seed, 10))
	}
	return strings.Join(parts, ",")
}

// ParseChaos reads "conflict=0.2,throttle=0.05,itemconflict=0.05,
// latency=20ms,hold=18ms,seed=1"; every key is optional, an empty string
// is no chaos. hold needs a latency at least as long.
func ParseChaos(s string) (Chaos, error) {
	var c Chaos
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return Chaos{}, fmt.Errorf("ddbchaos: %q is not key=value", kv)
		}
		share := func(dst *float64) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				return fmt.Errorf("ddbchaos: %s=%s is not a share between 0 and 1", k, v)
			}
			*dst = f
			return nil
		}
		var err error
		switch k {
		case "conflict":
			err = share(&c.Conflict)
		case "itemconflict":
			err = share(&c.ItemConflict)
		case "throttle":
			err = share(&c.Throttle)
		case "latency":
			c.Latency, err = time.ParseDuration(v)
			if err == nil && (c.Latency < 0 || c.Latency > 10*time.Second) {
				err = fmt.Errorf("ddbchaos: latency=%s is not between 0 and 10s", v)
			}
		case "hold":
			c.Hold, err = time.ParseDuration(v)
			if err == nil && (c.Hold < 0 || c.Hold > 10*time.Second) {
				err = fmt.Errorf("ddbchaos: hold=%s is not between 0 and 10s", v)
			}
		case "seed":
			c.Seed, err = strconv.ParseInt(v, 10, 64)
		default:
			err = fmt.Errorf("ddbchaos: unknown key %q (conflict, itemconflict, throttle, latency, hold, seed)", k)
		}
		if err != nil {
			return Chaos{}, err
		}
	}
	if c.Conflict+c.Throttle > 1 {
		return Chaos{}, fmt.Errorf("ddbchaos: conflict+throttle exceeds 1")
	}
	if c.Hold > c.Latency {
		return Chaos{}, fmt.Errorf("ddbchaos: hold=%s is longer than latency=%s: a transaction holds its items for part of the time it takes", c.Hold, c.Latency)
	}
	return c, nil
}

// Kind is how a request fails.
type Kind string

const (
	// Conflict cancels a transaction with reason TransactionConflict on
	// the item that matched (TransactWriteItems only).
	Conflict Kind = "TransactionConflict"
	// ThrottleCancel cancels a transaction with reason ThrottlingError.
	ThrottleCancel Kind = "ThrottlingError"
	// ItemConflict answers TransactionConflictException (single-item
	// writes).
	ItemConflict Kind = "TransactionConflictException"
	// Throughput answers ProvisionedThroughputExceededException.
	Throughput Kind = "ProvisionedThroughputExceededException"
	// Throttling answers ThrottlingException.
	Throttling Kind = "ThrottlingException"
	// Internal answers InternalServerError (HTTP 500).
	Internal Kind = "InternalServerError"
)

// Fault is a targeted failure: the next Times requests of Op whose
// actions include a key Match accepts fail as Kind.
type Fault struct {
	Op    string                   // e.g. "TransactWriteItems"
	Match func(pk, sk string) bool // nil: every request of Op
	// Actions, when set, matches only requests of that many actions
	// (a transaction's shape tells its writer apart).
	Actions int
	Kind    Kind
	Times   int // 0 means once
}

// KeyHas matches a key whose partition or sort key contains sub.
func KeyHas(sub string) func(pk, sk string) bool {
	return func(pk, sk string) bool { return strings.Contains(pk, sub) || strings.Contains(sk, sub) }
}

// Injection is an armed Fault.
type Injection struct {
	f     Fault
	fired atomic.Int64
}

// Fired is how many requests the fault has failed so far.
func (i *Injection) Fired() int { return int(i.fired.Load()) }

// Inject arms f. Faults fire in the order they were armed, before any
// random chaos.
func (l *Layer) Inject(f Fault) *Injection {
	if f.Times == 0 {
		f.Times = 1
	}
	in := &Injection{f: f}
	l.mu.Lock()
	l.faults = append(l.faults, in)
	l.mu.Unlock()
	return in
}

// ClearFaults disarms every targeted fault not yet fired.
func (l *Layer) ClearFaults() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = nil
}

// delay picks the wait of one request.
func (l *Layer) delay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.chaos.Latency - l.chaos.Hold
	if d <= 0 {
		return 0
	}
	return time.Duration(l.rng.Int64N(int64(d)))
}

// fault decides whether a request fails and how; at is the index of the
// action a cancellation names.
func (l *Layer) fault(op string, acts []action) (Kind, int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, in := range l.faults {
		if in.f.Op != op || in.f.Actions != 0 && in.f.Actions != len(acts) {
			continue
		}
		at := 0
		if in.f.Match != nil {
			at = -1
			for j, a := range acts {
				if pk, sk := l.keyOfLocked(a); in.f.Match(pk, sk) {
					at = j
					break
				}
			}
			if at < 0 {
				continue
			}
		}
		if int(in.fired.Add(1)) >= in.f.Times {
			l.faults = append(l.faults[:i:i], l.faults[i+1:]...)
		}
		return in.f.Kind, at, true
	}
	c := l.chaos
	if c.Zero() {
		return "", 0, false
	}
	roll := l.rng.Float64()
	switch op {
	case "TransactWriteItems":
		at := l.rng.IntN(max(len(acts), 1))
		switch {
		case roll < c.Conflict:
			return Conflict, at, true
		case roll < c.Conflict+c.Throttle:
			return ThrottleCancel, at, true
		}
	case "PutItem", "UpdateItem", "DeleteItem":
		switch {
		case roll < c.ItemConflict:
			return ItemConflict, 0, true
		case roll < c.ItemConflict+c.Throttle:
			return l.throttleKind(), 0, true
		}
	case "CreateTable", "DescribeTable", "DeleteTable", "UpdateTable":
		// Control-plane calls: chaos is about the data plane.
	default:
		if roll < c.Throttle {
			return l.throttleKind(), 0, true
		}
	}
	return "", 0, false
}

func (l *Layer) throttleKind() Kind {
	if l.rng.IntN(2) == 0 {
		return Throttling
	}
	return Throughput
}

// keyOfLocked is keyOf for a caller holding l.mu: schemas are cached by
// the validation that ran before.
func (l *Layer) keyOfLocked(a action) (pk, sk string) {
	s, ok := l.schemas[a.table]
	if !ok {
		return "", ""
	}
	return keyStrings(s, a)
}

// writeFault answers a request as DynamoDB answers it when it fails as
// kind; n is the number of actions of a transaction.
func writeFault(w http.ResponseWriter, kind Kind, at, n int) {
	switch kind {
	case Conflict, ThrottleCancel:
		type reason struct {
			Code    string
			Message string `json:",omitempty"`
		}
		reasons := make([]reason, max(n, 1))
		codes := make([]string, len(reasons))
		for i := range reasons {
			reasons[i].Code = "None"
			if i == at {
				reasons[i].Code = string(kind)
				reasons[i].Message = "Transaction is ongoing for the item"
				if kind == ThrottleCancel {
					reasons[i].Message = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly."
				}
			}
			codes[i] = reasons[i].Code
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
			"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
			"CancellationReasons": reasons,
		})
	case ItemConflict:
		writeError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#TransactionConflictException", "Transaction is ongoing for the item")
	case Throughput:
		writeError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.")
	case Throttling:
		writeError(w, http.StatusBadRequest, "com.amazon.coral.availability#ThrottlingException", "Throughput exceeds the current capacity for one or more global secondary indexes. DynamoDB is automatically scaling your index so please try again shortly.")
	default:
		writeError(w, http.StatusInternalServerError, "com.amazonaws.dynamodb.v20120810#InternalServerError", "Internal server error")
	}
}
