package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Why tokens cannot be issued.
var (
	// ErrTokensIssued: the run's tokens were issued before (at creation for
	// a manual run, or by an earlier IssueTokens).
	ErrTokensIssued = errors.New("run: tokens already issued")
	// ErrRunEnded: the run has ended; nothing can drive it any more.
	ErrRunEnded = errors.New("run: ended")
)

// Tokens are a triggered run's credentials, shown once.
type Tokens struct {
	SessionID   string `json:"session_id"`
	Token       string `json:"token"`
	RunnerToken string `json:"runner_token"`
}

// IssueTokens issues the session and runner tokens of a run created
// without usable ones (a triggered run), once: the new hashes replace the
// thrown-away one in the same ledger append that records who asked
// (session.token_issued), so two concurrent calls cannot both get tokens
// (the loser re-reads the head and finds them issued). The tokens are
// returned this once and stored only hashed.
func (s *Service) IssueTokens(ctx context.Context, who auth.Principal, id string) (Tokens, error) {
	token, hash, err := auth.NewSessionToken()
	if err != nil {
		return Tokens{}, err
	}
	runner, runnerHash, err := auth.NewRunnerToken()
	if err != nil {
		return Tokens{}, err
	}
	ev, err := redact.New(redact.TokenIssued{IssuedBy: who.Subject, By: string(who.Kind)})
	if err != nil {
		return Tokens{}, err
	}
	at := store.FormatTime(s.now())
	_, err = s.led.Append(ctx, id, func(h store.Head) (store.Batch, error) {
		switch {
		case h.Status == vocab.Ended:
			return store.Batch{}, ErrRunEnded
		case !h.TokensPending():
			return store.Batch{}, ErrTokensIssued
		}
		b := store.Batch{
			Events: []redact.Envelope{ev},
			Head:   store.HeadChange{Tokens: &store.TokenHashes{Session: hash, Runner: runnerHash, IssuedAt: at}},
		}
		if who.Kind == auth.KindLaunch {
			// A launch credential is spent by the issue it makes, in
			// the same transaction: both happen or neither.
			b.Ops = append(b.Ops, s.st.UseLaunch(id, at))
		}
		return b, nil
	})
	switch {
	case errors.Is(err, store.ErrLaunchUsed):
		return Tokens{}, ErrLaunchUsed
	case errors.Is(err, store.ErrNotFound):
		return Tokens{}, ErrNotFound
	case err != nil:
		return Tokens{}, fmt.Errorf("run: issue tokens of %s: %w", id, err)
	}
	return Tokens{SessionID: id, Token: token.Reveal(), RunnerToken: runner.Reveal()}, nil
}
