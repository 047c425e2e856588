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
	"fmt"
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
type Digest string

// DigestBytes digests raw bytes.
func DigestBytes(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest("sha256:" + hex.EncodeToString(sum[:]))
}

// DigestJSON digests the canonical JSON of a decoded value. encoding/json
// sorts map keys, so two decodings of equal documents digest equally.
func DigestJSON(v any) (Digest, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("redact: digest: %w", err)
	}
	return DigestBytes(b), nil
}
