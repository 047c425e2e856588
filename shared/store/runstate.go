package store

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A run's frozen items (its policy, shadow policy, tools and connection
// bindings) are kept right after its head's key, under frozenPrefix
// ("HEAD#POLICY", "HEAD#POLICY#SHADOW", "HEAD#TOOL#<name>",
// "HEAD#BIND#<connection>"), so one Query of the keys that begin with
// "HEAD" reads the head and everything the run froze: a process's first
// request of a run reads the run in one request, not four. Runs created
// before keep them at "POLICY", "TOOL#<name>" and "BIND#<connection>";
// GetFrozen still reads those, with the three Queries it always took.
const frozenPrefix = "HEAD#"

// RunState reads a run's head, consistently, with what the run froze in
// the same Query; the frozen state is kept for the next GetFrozen of this
// process, which then reads nothing. ErrNotFound when the run has no head
// (it does not exist, or its creation has not written it yet).
func (s *Store) RunState(ctx context.Context, runID string) (Head, error) {
	var h Head
	var f Frozen
	head, found := false, false
	err := s.queryPrefix(ctx, runPK(runID), "HEAD", func(av map[string]types.AttributeValue) error {
		if sk, _ := av[attrSK].(*types.AttributeValueMemberS); sk != nil && sk.Value == "HEAD" {
			head = true
			return attributevalue.UnmarshalMap(av, &h)
		}
		return f.add(frozenPrefix, av, &found)
	})
	switch {
	case err != nil:
		return Head{}, err
	case !head:
		return Head{}, fmt.Errorf("store: get %s/HEAD: %w", runPK(runID), ErrNotFound)
	case found:
		// A head is written with or after its frozen items: they are
		// whole. A run created before has none here.
		s.frozen.put(runID, f)
	}
	return h, nil
}

// add decodes one frozen item keyed under prefix into f; found is set by
// the policy, which every run has.
func (f *Frozen) add(prefix string, av map[string]types.AttributeValue, found *bool) error {
	sk, _ := av[attrSK].(*types.AttributeValueMemberS)
	if sk == nil || !strings.HasPrefix(sk.Value, prefix) {
		return nil
	}
	switch k := sk.Value[len(prefix):]; {
	case k == "POLICY":
		*found = true
		return attributevalue.UnmarshalMap(av, &f.Policy)
	case k == shadowPolicySK:
		f.Shadow = &PolicySnapshot{}
		return attributevalue.UnmarshalMap(av, f.Shadow)
	case strings.HasPrefix(k, "TOOL#"):
		var t Tool
		err := attributevalue.UnmarshalMap(av, &t)
		f.Tools = append(f.Tools, t)
		return err
	case strings.HasPrefix(k, "BIND#"):
		var b Binding
		err := attributevalue.UnmarshalMap(av, &b)
		f.Bindings = append(f.Bindings, b)
		return err
	}
	return nil
}

// frozenMemo holds frozen states RunState read until GetFrozen takes
// them. A run's frozen state never changes, so what it holds is never
// stale; it is bounded, and what it drops is read again.
type frozenMemo struct {
	mu   sync.Mutex
	runs map[string]Frozen
}

const maxMemoFrozen = 256

func (m *frozenMemo) put(runID string, f Frozen) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil || len(m.runs) >= maxMemoFrozen {
		m.runs = map[string]Frozen{}
	}
	m.runs[runID] = f
}

// take returns runID's frozen state and forgets it: its caller keeps it
// (compiled) for itself.
func (m *frozenMemo) take(runID string) (Frozen, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.runs[runID]
	delete(m.runs, runID)
	return f, ok
}
