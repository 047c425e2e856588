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

// Why a run cannot be launched, or its credential not used.
var (
	// ErrLaunched: the run was launched before; a run has one runner.
	ErrLaunched = errors.New("run: launched already")
	// ErrLaunchUsed: the launch credential was spent by an earlier token
	// issue.
	ErrLaunchUsed = errors.New("run: launch credential used already")
)

// Launch records that launcher (e.g. "local") starts the runner of a
// triggered run whose tokens nobody holds yet, and returns the single-use
// credential to hand it: good for the run's POST /v1/sessions/{id}/token
// once. The launch and run.launched are one ledger append, so a run is
// launched at most once however many launchers notice it.
func (s *Service) Launch(ctx context.Context, id, launcher, by string) (auth.Token, error) {
	cred, hash, err := auth.NewLaunchCredential()
	if err != nil {
		return "", err
	}
	ev, err := redact.New(redact.RunLaunched{Launcher: launcher, By: by})
	if err != nil {
		return "", err
	}
	at := store.FormatTime(s.now())
	op, err := s.st.PutLaunch(id, store.Launch{CredentialHash: hash, Launcher: launcher, By: by, LaunchedAt: at})
	if err != nil {
		return "", err
	}
	_, err = s.led.Append(ctx, id, func(h store.Head) (store.Batch, error) {
		switch {
		case h.Status == vocab.Ended:
			return store.Batch{}, ErrRunEnded
		case !h.TokensPending():
			return store.Batch{}, ErrTokensIssued
		}
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{op}}, nil
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", ErrNotFound
	case errors.Is(err, store.ErrLaunched):
		return "", ErrLaunched
	case err != nil:
		return "", fmt.Errorf("run: launch %s: %w", id, err)
	}
	return cred, nil
}

// RecordLaunchReuse records (run.launch_refused) the first use of id's
// launch credential after its one good use. Later ones find it recorded
// and add nothing: the refusal itself is the answer.
func (s *Service) RecordLaunchReuse(ctx context.Context, id string) error {
	ev, err := redact.New(redact.LaunchRefused{Reason: "reused"})
	if err != nil {
		return err
	}
	at := store.FormatTime(s.now())
	_, err = s.led.Append(ctx, id, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{s.st.MarkLaunchReused(id, at)}}, nil
	})
	if errors.Is(err, store.ErrLaunchReuseRecorded) {
		return nil
	}
	return err
}
