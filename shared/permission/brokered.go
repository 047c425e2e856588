package permission

import (
	"context"
	"errors"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// BrokeredTool is a brokered tool as a run froze it: what the broker needs
// to call it and to re-verify it first.
type BrokeredTool struct {
	Name         string
	UpstreamName string
	ConnectionID string
	// ToolDigest is the digest of the tool's photographed definition.
	ToolDigest string
	Binding    gate.Binding
	// Frozen is the run's frozen tool set and bindings, for re-verifying
	// the call through the gate's own stage (gate.ToolSetDenial).
	Frozen *gate.Run
}

// BrokeredTool returns the frozen record of a run's brokered tool; ok is
// false when the run froze no brokered tool of that name (a sandbox tool,
// or none at all: the gate then decides).
func (s *Service) BrokeredTool(ctx context.Context, runID, toolName string) (BrokeredTool, bool, error) {
	fr, err := s.frozen.get(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return BrokeredTool{}, false, run.ErrNotFound
	}
	if err != nil {
		return BrokeredTool{}, false, err
	}
	t, ok := fr.brokered[toolName]
	if !ok {
		return BrokeredTool{}, false, nil
	}
	return BrokeredTool{
		Name: t.Name, UpstreamName: t.UpstreamName, ConnectionID: t.ConnectionID, ToolDigest: t.ToolDigest,
		Binding: fr.bindings[t.ConnectionID], Frozen: &gate.Run{Tools: fr.tools, Bindings: fr.bindings},
	}, true, nil
}

// SandboxTool reports whether the run froze toolName as a sandbox tool.
func (s *Service) SandboxTool(ctx context.Context, runID, toolName string) (bool, error) {
	fr, err := s.frozen.get(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return false, run.ErrNotFound
	}
	if err != nil {
		return false, err
	}
	t, ok := fr.tools[toolName]
	return ok && t.ConnectionID == "", nil
}

// DecideBrokered is Decide for a brokered call, with the connections' live
// state as the broker read it (the upstream's current tool-set digest in
// ToolSetDigest), so that a rug pull is denied by the gate and recorded
// like any decision.
func (s *Service) DecideBrokered(ctx context.Context, runID string, req Request, wait time.Duration, live map[string]gate.Live) (Answer, error) {
	if live == nil {
		live = map[string]gate.Live{}
	}
	return s.decide(ctx, runID, req, wait, live)
}

// DecideAndClaim is DecideBrokered without a wait, for a broker that
// executes an allowed call at once: when this request records the
// decision and it is allow, the call's record is written already claimed
// at claimAt, in the decision's own append (claimed), so the decision and
// the claim cost one write. An answer from an earlier record (a retry, a
// concurrent duplicate) is never claimed here: the broker claims it as
// any other (store.ClaimCall), and finds it executed if it was.
func (s *Service) DecideAndClaim(ctx context.Context, runID string, req Request, live map[string]gate.Live, claimAt time.Time) (ans Answer, claimed bool, err error) {
	if live == nil {
		live = map[string]gate.Live{}
	}
	return s.decideClaiming(ctx, runID, req, 0, live, store.FormatTime(claimAt))
}

// liveFor reads the live state of the connection a brokered tool needs; a
// sandbox tool (or an unknown one) needs none.
func (s *Service) liveFor(ctx context.Context, fr *frozenRun, toolName string) (map[string]gate.Live, error) {
	t, ok := fr.brokered[toolName]
	if !ok {
		return nil, nil
	}
	l, _, err := LiveConnection(ctx, s.st, t.ConnectionID)
	if err != nil {
		return nil, err
	}
	return map[string]gate.Live{t.ConnectionID: l}, nil
}

// LiveConnection reads a connection as it is now, for stage 2: status,
// generation, its latest photograph's digest, and whether its personal
// owner is still an active member (a shared connection has no owner to
// lose). A missing connection is the zero Live (the gate denies binding).
// The stored connection is returned too, for the broker.
//
// Owner activity: the owner's member row decides (store.GetMember, read
// consistently, so a deactivation holds from the next call). An owner with
// no member row is inactive, except the admin-token operator, which has
// none in single-admin mode.
func LiveConnection(ctx context.Context, st *store.Store, connectionID string) (gate.Live, store.Connection, error) {
	c, err := st.GetConnection(ctx, connectionID)
	if errors.Is(err, store.ErrNotFound) {
		return gate.Live{}, store.Connection{}, nil
	}
	if err != nil {
		return gate.Live{}, store.Connection{}, err
	}
	l := gate.Live{Found: true, Status: c.Status, Generation: c.Generation, ToolSetDigest: c.PhotoDigest, OwnerActive: true}
	if c.Kind != store.ConnectionShared {
		m, err := st.GetMember(ctx, c.Owner)
		switch {
		case err == nil:
			l.OwnerActive = m.Status == store.MemberActive
		case errors.Is(err, store.ErrNotFound):
			l.OwnerActive = c.Owner == string(auth.Operator)
		default:
			return gate.Live{}, store.Connection{}, err
		}
	}
	return l, c, nil
}

// Recorded reads a call's record if there is one (a retry, or a call that
// waited for approval), with its execution and outcome. It checks that a
// retry is the same call (ErrConflict) and that the request is well formed.
func (s *Service) Recorded(ctx context.Context, runID string, req Request) (store.Call, bool, error) {
	cr, err := checkRequest(req)
	if err != nil {
		return store.Call{}, false, err
	}
	c, err := s.st.GetCall(ctx, runID, req.ToolCallID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Call{}, false, nil
	}
	if err != nil {
		return store.Call{}, false, err
	}
	if !sameCall(c, req, cr) {
		return store.Call{}, false, ErrConflict
	}
	return c, true, nil
}

// Preview asks the gate about a call on the run's current head and records
// nothing. The broker asks it with what it knows without the secret, and
// touches the secret only when the answer is not a denial.
func (s *Service) Preview(ctx context.Context, runID string, req Request, live map[string]gate.Live) (gate.Decision, error) {
	cr, err := checkRequest(req)
	if err != nil {
		return gate.Decision{}, err
	}
	fr, err := s.frozen.get(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return gate.Decision{}, run.ErrNotFound
	}
	if err != nil {
		return gate.Decision{}, err
	}
	h, err := s.led.Head(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return gate.Decision{}, run.ErrNotFound
	}
	if err != nil {
		return gate.Decision{}, err
	}
	return s.gateDecide(ctx, runID, fr.gateRun(h, s.maxPending), gate.Request{ToolName: req.ToolName, Input: cr.input, Connections: live, Cwd: req.Cwd, Resolved: req.ResolvedPaths, Kinds: req.PathKinds, Report: req.SearchReport, AgentType: req.AgentType})
}
