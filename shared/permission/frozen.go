package permission

import (
	"context"
	"fmt"
	"sync"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/store"
)

// frozenRun is what a run froze at creation, compiled for the gate. It is
// immutable, so it is cached for the life of the process.
type frozenRun struct {
	tools        map[string]*gate.Tool
	toolDigests  map[string]string
	policy       *policy.Policy
	policyDigest string
	// shadow is the frozen shadow policy, compiled; nil when the run has
	// none, or when its document does not compile (shadowBroken): the
	// enforced policy decides either way.
	shadow       *policy.Policy
	shadowBroken bool
	// bindings are the frozen connection bindings, by connection id;
	// brokered the frozen records of the brokered tools, by tool name.
	bindings map[string]gate.Binding
	brokered map[string]store.Tool
}

// schemaReason re-derives the reason of a recorded schema denial.
func (fr *frozenRun) schemaReason(toolName string, input any) string {
	reason, _ := gate.SchemaDenial(fr.tools[toolName], toolName, input)
	return reason
}

type frozenCache struct {
	st      *store.Store
	schemas *schemaguard.Cache
	mu      sync.Mutex
	runs    map[string]*frozenRun
}

const maxFrozenRuns = 4096

func newFrozenCache(st *store.Store) *frozenCache {
	return &frozenCache{st: st, schemas: schemaguard.NewCache(1024), runs: map[string]*frozenRun{}}
}

func (c *frozenCache) get(ctx context.Context, runID string) (*frozenRun, error) {
	c.mu.Lock()
	fr, ok := c.runs[runID]
	c.mu.Unlock()
	if ok {
		return fr, nil
	}
	f, err := c.st.GetFrozen(ctx, runID)
	if err != nil {
		return nil, err
	}
	fr, err = c.compile(f)
	if err != nil {
		return nil, fmt.Errorf("permission: run %s: %w", runID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) >= maxFrozenRuns {
		clear(c.runs)
	}
	c.runs[runID] = fr
	return fr, nil
}

// compile turns stored frozen items into the gate's values. A frozen schema
// that no longer compiles leaves its tool un-callable (fail closed).
func (c *frozenCache) compile(f store.Frozen) (*frozenRun, error) {
	p, _, err := policy.Parse([]byte(f.Policy.Document))
	if err != nil {
		return nil, fmt.Errorf("frozen policy: %w", err)
	}
	if p.Digest() != f.Policy.Digest {
		// The stored text is not the document the digest was taken of (a
		// version that dropped a field on the way to the table): what it
		// would enforce is not what was approved, so it enforces nothing.
		return nil, fmt.Errorf("frozen policy %s v%d: its document's digest %s is not the recorded %s; store the policy again", f.Policy.PolicyID, f.Policy.Version, p.Digest(), f.Policy.Digest)
	}
	fr := &frozenRun{tools: map[string]*gate.Tool{}, toolDigests: map[string]string{}, policy: p, policyDigest: f.Policy.Digest,
		bindings: map[string]gate.Binding{}, brokered: map[string]store.Tool{}}
	if f.Shadow != nil {
		// A shadow that no longer compiles must not stop the run: every
		// call records the shadow as unavailable instead.
		if fr.shadow, _, err = policy.Parse([]byte(f.Shadow.Document)); err != nil || fr.shadow.Digest() != f.Shadow.Digest {
			fr.shadow, fr.shadowBroken = nil, true
		}
	}
	for _, b := range f.Bindings {
		fr.bindings[b.ConnectionID] = gate.Binding{ConnectionID: b.ConnectionID, Generation: b.Generation, Owner: b.Owner, ToolSetDigest: b.ToolSetDigest}
	}
	for _, t := range f.Tools {
		gt := &gate.Tool{Name: t.Name, Class: capability.Class(t.Class), Callable: t.Callable, Reason: t.Reason, ConnectionID: t.ConnectionID}
		if t.ConnectionID != "" {
			fr.brokered[t.Name] = t
		}
		if t.Callable {
			s, err := c.schemas.Get(t.SchemaDigest, []byte(t.Schema))
			if err != nil {
				gt.Callable, gt.Reason = false, "the tool's frozen schema could not be compiled"
			} else {
				gt.Schema = s
			}
		}
		fr.tools[t.Name] = gt
		fr.toolDigests[t.Name] = t.SchemaDigest
	}
	return fr, nil
}
