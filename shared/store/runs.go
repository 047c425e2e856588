package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Head is a run's mutable record: status, ledger counter and budget, plus
// the digests and settings frozen at creation.
type Head struct {
	RunID   string          `dynamodbav:"run_id"`
	Status  vocab.RunStatus `dynamodbav:"status"`
	LastSeq int64           `dynamodbav:"last_seq"`
	// Ver counts the writes to the head other than sequencing: a write
	// that changes the head is conditioned on it (see Append). Only the
	// sequencer moves LastSeq.
	Ver int64 `dynamodbav:"ver"`
	// FenceGen is the fence generation the run's decisions are made on;
	// FencedGen, the latest one every fence shard has been raised to
	// (see Append and RaiseFence). FenceGen > FencedGen: a change that
	// fences decisions is committed and not finished yet.
	FenceGen  int64  `dynamodbav:"fence_gen"`
	FencedGen int64  `dynamodbav:"fenced_gen"`
	TokenHash string `dynamodbav:"token_hash"`
	// RunnerTokenHash is the runner token's hash; absent on runs created
	// without one (triggered runs), which no runner token then opens.
	RunnerTokenHash string   `dynamodbav:"runner_token_hash,omitempty"`
	Invoker         string   `dynamodbav:"invoker"`
	TrustTier       string   `dynamodbav:"trust_tier"`
	Autonomous      bool     `dynamodbav:"autonomous"`
	PolicyID        string   `dynamodbav:"policy_id"`
	PolicyVersion   int      `dynamodbav:"policy_version"`
	PolicyDigest    string   `dynamodbav:"policy_digest"`
	ToolSetDigest   string   `dynamodbav:"tool_set_digest"`
	Tools           []string `dynamodbav:"tools"`
	Capabilities    []string `dynamodbav:"capabilities"`
	Trigger         string   `dynamodbav:"trigger"`
	// GitHub is set on runs a GitHub delivery created (Trigger "github").
	GitHub    *GitHubTrigger `dynamodbav:"github,omitempty"`
	CreatedAt string         `dynamodbav:"created_at"`
	// Budget, in integer micro-USD. Available = Limit - Reserved - Spent is
	// kept as its own attribute so a write can be conditioned on it.
	BudgetLimit     int64 `dynamodbav:"budget_limit"`
	BudgetReserved  int64 `dynamodbav:"budget_reserved"`
	BudgetSpent     int64 `dynamodbav:"budget_spent"`
	BudgetAvailable int64 `dynamodbav:"budget_available"`
	// PendingApprovals counts the run's approvals still pending, and
	// PendingInputs its brokered calls' input requests still pending (a
	// link a person must open); the run is awaiting_approval while either
	// is above zero (WaitingStatus).
	PendingApprovals int64 `dynamodbav:"pending_approvals"`
	PendingInputs    int64 `dynamodbav:"pending_inputs"`
	// Workspace is the run's declared workspace ("" for none).
	Workspace string `dynamodbav:"workspace,omitempty"`
	// ShadowPolicyID, ShadowPolicyVersion and ShadowPolicyDigest name the
	// shadow policy frozen beside the enforced one (RUN#<id>/POLICY#SHADOW);
	// empty on a run without one.
	ShadowPolicyID      string `dynamodbav:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int    `dynamodbav:"shadow_policy_version,omitempty"`
	ShadowPolicyDigest  string `dynamodbav:"shadow_policy_digest,omitempty"`
	// TokenIssuedAt is when a triggered run's tokens were issued (POST
	// /v1/sessions/{id}/token); "" until then, and on manual runs, whose
	// tokens are issued at creation.
	TokenIssuedAt string `dynamodbav:"token_issued_at,omitempty"`
	// Verify is what the model proxy does with a tool result that answers
	// a call the gate did not allow with that input: "record" records it
	// and lets the run go on; "" (every run created before the setting,
	// and the default) halts the run.
	Verify string `dynamodbav:"verify,omitempty"`
}

// TokensPending reports whether the run still has no tokens anyone holds:
// a triggered run whose tokens were never issued. Its stored session hash
// is of a token thrown away at creation.
func (h Head) TokensPending() bool {
	return h.Trigger != "" && h.Trigger != "manual" && h.TokenIssuedAt == ""
}

// Unspent is what the run has not spent of its budget: its limit less
// what its settled model requests cost. Reservations of requests still in
// flight are not counted, as they are in BudgetAvailable: they are upper
// bounds, given back when the request settles.
func (h Head) Unspent() int64 { return h.BudgetLimit - h.BudgetSpent }

// Tool is a tool frozen into a run.
type Tool struct {
	Name         string `dynamodbav:"name"`
	Class        string `dynamodbav:"class"`
	Description  string `dynamodbav:"description"`
	Schema       string `dynamodbav:"schema"`
	SchemaDigest string `dynamodbav:"schema_digest"`
	Origin       string `dynamodbav:"origin"`
	Callable     bool   `dynamodbav:"callable"`
	Reason       string `dynamodbav:"reason"`
	// ConnectionID, UpstreamName and ToolDigest are set on a brokered
	// tool: the connection it is called through, the tool's name at the
	// upstream, and the digest of its photographed definition.
	ConnectionID string `dynamodbav:"connection_id,omitempty"`
	UpstreamName string `dynamodbav:"upstream_name,omitempty"`
	ToolDigest   string `dynamodbav:"tool_digest,omitempty"`
}

// PolicySnapshot is the full policy document frozen into a run.
type PolicySnapshot struct {
	PolicyID string `dynamodbav:"policy_id"`
	Version  int    `dynamodbav:"version"`
	Digest   string `dynamodbav:"digest"`
	Document string `dynamodbav:"document"`
}

// Frozen is everything a run froze at creation. It never changes, so callers
// may cache it for the life of the process.
type Frozen struct {
	Tools    []Tool
	Policy   PolicySnapshot
	Bindings []Binding
	// Shadow is the shadow policy's snapshot; nil on a run without one.
	Shadow *PolicySnapshot
}

// NewRun is what CreateRun writes.
type NewRun struct {
	Head   Head
	Tools  []Tool
	Policy PolicySnapshot
	// Shadow, when set, is the shadow policy's snapshot, frozen like
	// Policy (POLICY#SHADOW), and lists the run under the shadow policy
	// for its summary (ListShadowRuns).
	Shadow *PolicySnapshot
	// Bindings are the run's frozen connection bindings (BIND#<id>).
	Bindings []Binding
	// Created is the session.created event; it becomes seq 1.
	Created redact.Envelope
}

func runPK(id string) string { return "RUN#" + id }

type key struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
}

func keyOf(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pk},
		attrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// item marshals v and adds the keys. Empty maps, lists and sets are left
// out, at any depth of maps: DynamoDB refuses empty sets, and minidyn reads
// an empty map or list back as another type, so an item that held one
// would decode here and not on AWS, or the reverse. A missing attribute
// decodes to the nil map or slice.
func item(pk, sk string, v any) (map[string]types.AttributeValue, error) {
	av, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, fmt.Errorf("store: marshal %s/%s: %w", pk, sk, err)
	}
	dropEmpty(av)
	av[attrPK] = &types.AttributeValueMemberS{Value: pk}
	av[attrSK] = &types.AttributeValueMemberS{Value: sk}
	return av, nil
}

func dropEmpty(m map[string]types.AttributeValue) {
	for k, v := range m {
		empty := false
		switch v := v.(type) {
		case *types.AttributeValueMemberM:
			dropEmpty(v.Value)
			empty = len(v.Value) == 0
		case *types.AttributeValueMemberL:
			empty = len(v.Value) == 0
		case *types.AttributeValueMemberSS:
			empty = len(v.Value) == 0
		case *types.AttributeValueMemberNS:
			empty = len(v.Value) == 0
		case *types.AttributeValueMemberBS:
			empty = len(v.Value) == 0
		}
		if empty {
			delete(m, k)
		}
	}
}

// Limits of one TransactWriteItems call, with room to spare.
const (
	maxTxItems = 100
	maxTxBytes = 3 << 20
)

// CreateRun writes a run's frozen items, then its head and first event. A
// run exists once its head does: when everything fits one transaction it is
// written atomically; a larger run writes its frozen items first in their
// own transactions and its head last, and deletes what it wrote if a later
// step fails, so a failed creation leaves nothing behind.
func (s *Store) CreateRun(ctx context.Context, r NewRun) error {
	if !r.Created.Valid() {
		return fmt.Errorf("store: create run %s: invalid envelope", r.Head.RunID)
	}
	pk := runPK(r.Head.RunID)
	var frozen []types.TransactWriteItem
	for _, t := range r.Tools {
		av, err := item(pk, frozenPrefix+"TOOL#"+t.Name, t)
		if err != nil {
			return err
		}
		frozen = append(frozen, putNew(s.table, av))
	}
	pol, err := item(pk, frozenPrefix+"POLICY", r.Policy)
	if err != nil {
		return err
	}
	frozen = append(frozen, putNew(s.table, pol))
	if r.Shadow != nil {
		sh, err := item(pk, frozenPrefix+shadowPolicySK, r.Shadow)
		if err != nil {
			return err
		}
		frozen = append(frozen, putNew(s.table, sh))
	}
	for _, b := range r.Bindings {
		av, err := item(pk, frozenPrefix+bindingSK(b.ConnectionID), b)
		if err != nil {
			return err
		}
		frozen = append(frozen, putNew(s.table, av))
	}

	r.Head.LastSeq = 1
	head, err := item(pk, "HEAD", r.Head)
	if err != nil {
		return err
	}
	ev, err := eventItem(r.Head.RunID, 1, r.Created, r.Head.CreatedAt)
	if err != nil {
		return err
	}
	listing, err := runListingItem(r.Head)
	if err != nil {
		return err
	}
	final := []types.TransactWriteItem{putNew(s.table, head), putNew(s.table, ev), putNew(s.table, listing)}
	if r.Shadow != nil {
		sl, err := shadowListingItem(r.Head, r.Shadow.PolicyID)
		if err != nil {
			return err
		}
		final = append(final, putNew(s.table, sl))
	}

	chunks := chunk(frozen, maxTxItems-len(final))
	last := chunks[len(chunks)-1]
	if size(last)+size(final) <= maxTxBytes && len(last)+len(final) <= maxTxItems {
		chunks[len(chunks)-1] = append(last, final...)
		final = nil
	}
	var written []types.TransactWriteItem
	for _, c := range chunks {
		if err := s.transact(ctx, c); err != nil {
			s.undo(written)
			return fmt.Errorf("store: create run %s: %w", r.Head.RunID, err)
		}
		written = append(written, c...)
	}
	if final != nil {
		if err := s.transact(ctx, final); err != nil {
			s.undo(written)
			return fmt.Errorf("store: create run %s: %w", r.Head.RunID, err)
		}
	}
	return nil
}

// undo deletes items written by a creation that failed later. It runs on a
// fresh context: the caller's may be what failed.
func (s *Store) undo(items []types.TransactWriteItem) {
	for _, it := range items {
		k := map[string]types.AttributeValue{attrPK: it.Put.Item[attrPK], attrSK: it.Put.Item[attrSK]}
		_, _ = s.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: k})
	}
}

func putNew(table string, av map[string]types.AttributeValue) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName:           aws.String(table),
		Item:                av,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
}

// chunk splits items into groups of at most n items and maxTxBytes bytes.
func chunk(items []types.TransactWriteItem, n int) [][]types.TransactWriteItem {
	var out [][]types.TransactWriteItem
	var cur []types.TransactWriteItem
	for _, it := range items {
		if len(cur) == n || (len(cur) > 0 && size(cur)+size([]types.TransactWriteItem{it}) > maxTxBytes) {
			out = append(out, cur)
			cur = nil
		}
		cur = append(cur, it)
	}
	return append(out, cur)
}

// size estimates the bytes of the items' string attributes, which dominate.
func size(items []types.TransactWriteItem) int {
	n := 0
	for _, it := range items {
		for k, v := range it.Put.Item {
			n += len(k) + 16
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				n += len(s.Value)
			}
		}
	}
	return n
}

func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem) error {
	return s.transactOp(ctx, "transact", items)
}

// transactOp writes items in one transaction. A failed condition of any of
// them is ErrExists; op names the write in any other error.
func (s *Store) transactOp(ctx context.Context, op string, items []types.TransactWriteItem) error {
	err := s.transactWrite(ctx, items)
	if conditionFailed(err) {
		return ErrExists
	}
	return translate(op, err)
}

// GetHead reads a run's head with a consistent read.
func (s *Store) GetHead(ctx context.Context, runID string) (Head, error) {
	var h Head
	err := s.get(ctx, runPK(runID), "HEAD", &h)
	return h, err
}

// GetFrozen reads what a run froze at creation: from what RunState read
// of it when this process read the run's state, else with one Query of
// its frozen items (three for a run created before they were kept beside
// its head).
func (s *Store) GetFrozen(ctx context.Context, runID string) (Frozen, error) {
	if f, ok := s.frozen.take(runID); ok {
		return f, nil
	}
	var f Frozen
	found := false
	err := s.queryPrefix(ctx, runPK(runID), frozenPrefix, func(av map[string]types.AttributeValue) error {
		return f.add(frozenPrefix, av, &found)
	})
	if err != nil || found {
		return f, err
	}
	// A run created before: its policy and, when it has one, its shadow
	// policy (POLICY and POLICY#SHADOW) in one Query, then its tools and
	// its bindings.
	for _, prefix := range []string{"POLICY", "TOOL#", "BIND#"} {
		err := s.queryPrefix(ctx, runPK(runID), prefix, func(av map[string]types.AttributeValue) error {
			return f.add("", av, &found)
		})
		if err != nil {
			return Frozen{}, err
		}
	}
	if !found {
		return Frozen{}, fmt.Errorf("store: get %s/POLICY: %w", runPK(runID), ErrNotFound)
	}
	return f, nil
}

func (s *Store) get(ctx context.Context, pk, sk string, v any) error {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyOf(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return translate("get "+pk+"/"+sk, err)
	}
	if out.Item == nil {
		return fmt.Errorf("store: get %s/%s: %w", pk, sk, ErrNotFound)
	}
	if err := attributevalue.UnmarshalMap(out.Item, v); err != nil {
		return fmt.Errorf("store: decode %s/%s: %w", pk, sk, err)
	}
	return nil
}

// WaitingStatus is the status of run h once its counts of pending
// approvals and input requests move by approvals and inputs:
// awaiting_approval while a person is waited for, running otherwise; ""
// (no change) for a run that has ended.
func WaitingStatus(h Head, approvals, inputs int64) vocab.RunStatus {
	switch {
	case h.Status == vocab.Ended:
		return ""
	case h.PendingApprovals+approvals > 0 || h.PendingInputs+inputs > 0:
		return vocab.AwaitingApproval
	}
	return vocab.Running
}
