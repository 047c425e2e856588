package store

import "context"

// Result is how a run's agent finished (RUN#<id> / RESULT), as its runner
// reported when it ended the run: the exit status, why it ended, and the
// agent's final message. The message is untrusted text kept only for the
// control plane's report back to where the run came from; the ledger
// holds its digest, never the text.
type Result struct {
	Reason       string `dynamodbav:"reason"`
	ExitStatus   int    `dynamodbav:"exit_status"`
	FinalMessage string `dynamodbav:"final_message,omitempty"`
	EndedAt      string `dynamodbav:"ended_at"`
}

const resultSK = "RESULT"

// PutResult is the op that records a run's result, once (with its end).
func (s *Store) PutResult(runID string, r Result) (Op, error) {
	av, err := item(runPK(runID), resultSK, r)
	if err != nil {
		return Op{}, err
	}
	return Op{item: putNew(s.table, av), failed: ErrExists}, nil
}

// GetResult reads a run's result.
func (s *Store) GetResult(ctx context.Context, runID string) (Result, error) {
	var r Result
	err := s.get(ctx, runPK(runID), resultSK, &r)
	return r, err
}
