// Package redact is the only constructor of ledger envelopes.
//
// The ledger accepts nothing but an Envelope, and an Envelope has only
// unexported fields: code outside this package cannot build one, cannot
// fill one from JSON or a DynamoDB item, and its zero value is invalid. The
// only way in is New, which takes one of the typed event values below. Those
// types carry ids, verdicts, sources, rule ids, digests, usage, cost and
// latency — and have no field that could hold a tool input, a tool result,
// a prompt, a token or a credential. Inputs and results enter the ledger
// only as a Digest, which this package computes.
package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Type names an event. Types are persisted and on the wire: never rename one.
type Type string

// The event types of the ledger.
const (
	TypeSessionCreated    Type = "session.created"
	TypeToolRequested     Type = "tool.requested"
	TypeToolDecision      Type = "tool.decision"
	TypeApprovalRequested Type = "approval.requested"
	TypeApprovalDecided   Type = "approval.decided"
	TypeToolBrokered      Type = "tool.brokered"
	TypeBudgetReserved    Type = "budget.reserved"
	TypeBudgetReconciled  Type = "budget.reconciled"
	TypeModelRefused      Type = "model.refused"
	TypeSessionEnded      Type = "session.ended"
	TypeGrantRevoked      Type = "grant.revoked"
	TypeTokenIssued       Type = "session.token_issued"
	TypeWorkspaceFetched  Type = "workspace.fetched"
	TypeRunLaunched       Type = "run.launched"
	TypeLaunchRefused     Type = "run.launch_refused"
	TypeRunReported       Type = "run.reported"
	TypeRunHalted         Type = "run.halted"
	TypeToolUnverified    Type = "tool.unverified"
	// An upstream's request for a person to open a link mid-call, and
	// how it was settled (shared/elicitation).
	TypeInputRequested Type = "input.requested"
	TypeInputSettled   Type = "input.settled"
)

// Envelope is a redacted ledger entry. Only New constructs one.
type Envelope struct {
	typ  Type
	data []byte
}

// Type returns the envelope's event type.
func (e Envelope) Type() Type { return e.typ }

// Data returns a copy of the envelope's redacted JSON body.
func (e Envelope) Data() json.RawMessage { return append(json.RawMessage(nil), e.data...) }

// Valid reports whether e was built by New. The zero Envelope is not valid.
func (e Envelope) Valid() bool { return e.typ != "" && len(e.data) > 0 }

// Event is implemented only by the event values of this package.
type Event interface {
	eventType() Type
}

// New redacts ev into an envelope.
func New(ev Event) (Envelope, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return Envelope{}, fmt.Errorf("redact: encode %s: %w", ev.eventType(), err)
	}
	return Envelope{typ: ev.eventType(), data: data}, nil
}

// Digest is "sha256:<hex>" of some content that must not itself be kept.
// Its field is unexported so that nothing outside this package can put
// arbitrary text in a digest-typed field of an event: a Digest comes from
// hashing (DigestBytes, DigestJSON) or from ParseDigest, which takes only
// the exact shape hashing produces. The zero Digest is "".
type Digest struct{ s string }

// String returns "sha256:<hex>", or "" for the zero Digest.
func (d Digest) String() string { return d.s }

// IsZero reports whether d is the zero Digest.
func (d Digest) IsZero() bool { return d.s == "" }

// MarshalJSON encodes d as its string.
func (d Digest) MarshalJSON() ([]byte, error) { return json.Marshal(d.s) }

// ErrNotDigest is ParseDigest's answer to anything but "sha256:" and 64
// lowercase hex digits.
var ErrNotDigest = errors.New("redact: not a sha256 digest")

// ParseDigest restores a digest this package computed earlier (read back
// from a stored record). It accepts only "sha256:" and 64 lowercase hex
// digits: 32 bytes of hex cannot carry a token's prefix or a command line,
// and no other text gets into a Digest.
func ParseDigest(s string) (Digest, error) {
	const prefix = "sha256:"
	hexPart, ok := strings.CutPrefix(s, prefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return Digest{}, ErrNotDigest
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Digest{}, ErrNotDigest
		}
	}
	return Digest{s: s}, nil
}

// DigestBytes digests raw bytes.
func DigestBytes(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest{s: "sha256:" + hex.EncodeToString(sum[:])}
}

// DigestJSON digests the canonical JSON of a decoded value. encoding/json
// sorts map keys, so two decodings of equal documents digest equally.
func DigestJSON(v any) (Digest, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Digest{}, fmt.Errorf("redact: digest: %w", err)
	}
	return DigestBytes(b), nil
}
