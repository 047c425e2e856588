package run

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Why a run's agent stopped, as its runner reports it.
type EndReason string

// End reasons. They are persisted: never rename one.
const (
	// EndExited: the agent exited by itself (ExitStatus says how).
	EndExited EndReason = "exited"
	// EndTimeout: the agent ran past the run's timeout and was killed.
	EndTimeout EndReason = "timeout"
	// EndFailed: the runner could not start or finish the agent (no
	// workspace, a broken sandbox); the agent may never have run.
	EndFailed EndReason = "failed"
)

// MaxFinalMessage bounds the final message a runner may hand back, in
// bytes: a report quotes at most this much.
const MaxFinalMessage = 64 << 10

// Result is how the agent finished, from its runner.
type Result struct {
	Reason       EndReason
	ExitStatus   int
	FinalMessage string
}

// check validates r.
func (r Result) check() error {
	switch r.Reason {
	case EndExited, EndTimeout, EndFailed:
	default:
		return &InvalidError{Field: "reason", Message: "must be exited, timeout or failed"}
	}
	if r.ExitStatus < -1 || r.ExitStatus > 255 {
		return &InvalidError{Field: "exit_status", Message: "must be -1 (none) or 0 to 255"}
	}
	if len(r.FinalMessage) > MaxFinalMessage || !utf8.ValidString(r.FinalMessage) {
		return &InvalidError{Field: "final_message", Message: fmt.Sprintf("must be UTF-8 of at most %d bytes", MaxFinalMessage)}
	}
	return nil
}

// EndWithResult ends a run as End does and, in the same append, keeps how
// its agent finished: session.ended carries the reason, the exit status and
// the final message's digest; the message itself goes to the run's RESULT
// item, for the report, never to the ledger. Only the operator or the run's
// runner token may report a result (the route's Reporters access).
func (s *Service) EndWithResult(ctx context.Context, who auth.Principal, id string, res Result) error {
	if err := res.check(); err != nil {
		return err
	}
	exit := res.ExitStatus
	digest := redact.DigestBytes([]byte(res.FinalMessage))
	ended, err := redact.New(redact.SessionEnded{EndedBy: who.Subject, Reason: string(res.Reason), ExitStatus: &exit,
		FinalMessageDigest: &digest})
	if err != nil {
		return err
	}
	at := store.FormatTime(s.now())
	op, err := s.st.PutResult(id, store.Result{Reason: string(res.Reason), ExitStatus: res.ExitStatus, FinalMessage: res.FinalMessage, EndedAt: at})
	if err != nil {
		return err
	}
	_, err = s.led.Append(ctx, id, func(h store.Head) (store.Batch, error) {
		if h.Status == vocab.Ended {
			return store.Batch{}, errAlreadyEnded
		}
		return store.Batch{Events: []redact.Envelope{ended}, Head: store.HeadChange{Status: vocab.Ended}, Ops: []store.Op{op}}, nil
	})
	switch {
	case errors.Is(err, errAlreadyEnded):
		return nil
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	}
	return err
}
