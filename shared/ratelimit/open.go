package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

// The per-minute limit bounds how many requests a run makes, not how many
// it holds open: one session token held 100 concurrent 25-second long
// polls, each an instance of a function kept busy. Open bounds the
// requests a run has open at once, across every instance, the same way
// the minute is counted: in DynamoDB (OPEN#<run>), with one conditional
// write per request.
//
// Each open request holds a lease: an entry of a string set that names
// when it expires. A request releases its lease when it ends; a lease
// whose request never ends it (its instance died, or could not reach the
// table to release) is dropped by the first request that finds the run
// full once the lease has expired, so no slot is lost for longer than
// LeaseFor. Guarantees: past the limit a request is refused (*BusyError);
// a count that cannot be kept refuses the request too (an error wrapping
// store.ErrUnavailable: the caller answers 503); nothing but the run id and
// a random lease id reaches the table.

// DefaultMaxOpen is how many requests one run may have open at once when
// none is configured: the hook's permission call, the runner's long poll,
// an events stream and a few brokered calls in parallel, with room.
const DefaultMaxOpen = 16

// LeaseFor is how long a lease holds its slot when nobody releases it. It
// must outlast every request of the API: API Gateway ends an integration
// at 29 s, the API functions' timeout (template.yaml), and long polls wait
// at most 25 s. A request still open when its lease expires counts no
// more: the bound is then looser for it, never stuck.
const LeaseFor = 60 * time.Second

// ErrBusy: the run has as many requests open as it may.
var ErrBusy = errors.New("ratelimit: the run has as many requests open as it may")

// BusyError is ErrBusy with the limit.
type BusyError struct{ Limit int }

func (e *BusyError) Error() string { return fmt.Sprintf("%s (%d)", ErrBusy, e.Limit) }

// Is makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Open counts runs' open requests.
type Open struct {
	st    *store.Store
	limit int
	now   func() time.Time
}

// NewOpen returns a bound of limit open requests per run (0 is
// DefaultMaxOpen).
func NewOpen(st *store.Store, limit int, now func() time.Time) *Open {
	if limit <= 0 {
		limit = DefaultMaxOpen
	}
	if now == nil {
		now = time.Now
	}
	return &Open{st: st, limit: limit, now: now}
}

// Limit is the configured bound.
func (o *Open) Limit() int { return o.limit }

// Slot is one open request's lease.
type Slot struct {
	st    *store.Store
	key   store.Key
	lease string
}

// Enter takes one of runID's open-request slots, until the returned slot
// is released or its lease expires: a *BusyError when the run has the
// limit open, another error (wrapping store.ErrUnavailable) when the count
// could not be kept.
func (o *Open) Enter(ctx context.Context, runID string) (*Slot, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("ratelimit: lease id: %w", err)
	}
	now := o.now()
	expires := now.Add(LeaseFor)
	k := store.OpenKey(runID)
	slot := &Slot{st: o.st, key: k, lease: leaseText(expires, hex.EncodeToString(id[:]))}
	// The set outlives its last lease by one more, for clocks a little
	// apart.
	ttl := expires.Add(LeaseFor).Unix()
	for attempt := range 2 {
		err := o.st.HoldLease(ctx, k, slot.lease, o.limit, ttl)
		if err == nil {
			return slot, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return nil, fmt.Errorf("ratelimit: open a request of %s: %w", runID, err)
		}
		if attempt > 0 {
			break
		}
		// Full: drop the leases whose requests are gone, then try once
		// more. A refused drop means another request dropped some of
		// them first, which frees the slots all the same.
		held, err := o.st.Leases(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: open a request of %s: %w", runID, err)
		}
		expired := expiredLeases(held, now)
		if len(expired) == 0 {
			break
		}
		if err := o.st.DropLeases(ctx, k, expired); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return nil, fmt.Errorf("ratelimit: open a request of %s: %w", runID, err)
		}
	}
	return nil, &BusyError{Limit: o.limit}
}

// Release gives the slot back. A lease dropped already (expired and
// purged) is not an error. ctx should outlive the request it served: a
// cancelled request must still release.
func (s *Slot) Release(ctx context.Context) error {
	err := s.st.DropLeases(ctx, s.key, []string{s.lease})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil
	}
	return err
}

// leaseText is a lease as the set holds it: its expiry in Unix
// milliseconds, fixed width, then a random id.
func leaseText(expires time.Time, id string) string {
	return fmt.Sprintf("%013d#%s", expires.UnixMilli(), id)
}

// expiredLeases are the leases of held that expired by now. A lease that
// does not read as one never expires: what cannot be read keeps its slot.
func expiredLeases(held []string, now time.Time) []string {
	var out []string
	for _, l := range held {
		ms, _, ok := strings.Cut(l, "#")
		n, err := strconv.ParseInt(ms, 10, 64)
		if ok && err == nil && n <= now.UnixMilli() {
			out = append(out, l)
		}
	}
	return out
}

// A Holder takes a request's open slot when the request is about to wait,
// for routes that do not take it on entry (a permission request: most are
// answered at once, and only one that waits for an approval is held
// open). It returns the function that gives the slot back, or the error
// the request must end with (the run is busy, or the count cannot be
// kept).
type Holder func(ctx context.Context) (release func(), err error)

type holderKey struct{}

// WithHolder gives ctx's request a Holder for Hold.
func WithHolder(ctx context.Context, h Holder) context.Context {
	return context.WithValue(ctx, holderKey{}, h)
}

// Hold takes the open slot ctx's route left for when its request waits,
// and returns its release. A request without a Holder took its slot on
// entry, or is not a session's (an admin, a test): it has nothing to take.
func Hold(ctx context.Context) (release func(), err error) {
	h, ok := ctx.Value(holderKey{}).(Holder)
	if !ok {
		return func() {}, nil
	}
	return h(ctx)
}
