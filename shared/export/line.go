// Package export delivers the ledger to where a SIEM reads it: every
// numbered event as one line of schema fluidbox.ledger.v1, in objects of
// an S3 bucket keyed by run and first seq, exactly once per event as a
// reader of the bucket sees it (docs/ledger-export.md, "Delivery").
//
// Guarantees:
//   - Only numbered events (RUN#<id>/EV#<seq>) are read, from the table,
//     never from a stream record's image: the stream only says which runs
//     to look at.
//   - A run's events are delivered in seq order, without gaps: an event
//     not visible yet stops the run's delivery there until it is (ErrGap).
//   - Each event is in exactly one object, created once: objects are
//     written only if absent (S3 If-None-Match), at a key that is a
//     function of the run and the first seq, and the run's checkpoint in
//     the table moves to an object's last seq only after the object
//     exists. A consumer that dies between the two, or a batch delivered
//     twice, finds the object there, checks it against the table and
//     takes its last seq.
//   - A line carries what the ledger holds (ids, verdicts, sources, rule
//     ids, digests, usage, cost), nothing more: the ledger's envelopes are
//     redacted when built (shared/redact).
package export

import (
	"encoding/json"
	"fmt"

	"github.com/fluidbox/fluidbox/shared/store"
)

// Schema names the version of an exported line. A change that renames or
// removes a field is a new version; a field added to data is not.
const Schema = "fluidbox.ledger.v1"

// Line is one ledger event as exported: the run and seq that identify it,
// and the event as the API serves it.
type Line struct {
	Schema string          `json:"schema"`
	RunID  string          `json:"run_id"`
	Seq    int64           `json:"seq"`
	Type   string          `json:"type"`
	At     string          `json:"at"`
	Data   json.RawMessage `json:"data"`
}

// NewLine returns the line of runID's event.
func NewLine(runID string, seq int64, typ, at string, data json.RawMessage) Line {
	return Line{Schema: Schema, RunID: runID, Seq: seq, Type: typ, At: at, Data: data}
}

// encodeLine is the line of a stored event, newline included.
func encodeLine(runID string, e store.Event) ([]byte, error) {
	b, err := json.Marshal(NewLine(runID, e.Seq, e.Type, e.At, json.RawMessage(e.Data)))
	if err != nil {
		return nil, fmt.Errorf("export: event %d of %s: %w", e.Seq, runID, err)
	}
	return append(b, '\n'), nil
}
