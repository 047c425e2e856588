package permission

import (
	"context"
	"errors"

	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// JudgeModelTools asks the gate about each server tool (or URL source) a
// model request offers, as a call of that tool of the anthropic-server-tools
// bundle whose input is its definition, on the run's frozen state and its
// head as it is now. It records nothing: the model proxy records a refusal
// and forwards nothing unless every decision is allow. A require_approval
// comes back as such (a session grant or autonomy may still have answered
// it): a model request cannot be held while a human decides.
func (s *Service) JudgeModelTools(ctx context.Context, runID string, calls []gate.Request) ([]gate.Decision, error) {
	fr, err := s.frozen.get(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, run.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	h, err := s.led.Head(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, run.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := make([]gate.Decision, len(calls))
	for i, c := range calls {
		c.Connections = nil // server tools are never brokered
		if out[i], err = s.gateDecide(ctx, runID, fr.gateRun(h, s.maxPending), c); err != nil {
			return nil, err
		}
	}
	return out, nil
}
