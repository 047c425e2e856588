package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A run with a shadow policy keeps, in its own partition:
//
//   - POLICY#SHADOW, the shadow policy's snapshot, frozen with POLICY;
//   - SHADOWLIST, written once with the head and never changed, in gsi1
//     under SHADOW#<shadow policy id>: the runs a shadow summary pages
//     through, newest first (one index write per run, like a run's
//     listing item);
//   - SHADOW#<key>, one item per distinct difference (tool, both verdicts,
//     both rules), counted with ADD in the same transaction as the
//     decision that differed. It is not indexed and it lives in the run's
//     partition, so a difference adds no cross-run hot item, no index
//     write and no round trip: only one more item in a transaction the
//     decision makes anyway. Its key space is bounded by the run's frozen
//     tools and the two documents' rules (a tool that is not frozen is
//     denied before the policy stage, where no shadow runs).
//
// A summary reads one gsi1 page of SHADOWLIST items and one query per run
// on that page, never a ledger.
const (
	shadowPolicySK   = "POLICY#SHADOW"
	shadowListSK     = "SHADOWLIST"
	shadowDiffPrefix = "SHADOW#"
)

func shadowIndex(policyID string) string { return "SHADOW#" + policyID }

// shadowListing is a run's SHADOWLIST item.
type shadowListing struct {
	RunID          string `dynamodbav:"run_id"`
	ShadowPolicyID string `dynamodbav:"shadow_policy_id"`
	CreatedAt      string `dynamodbav:"created_at"`
	GSI1PK         string `dynamodbav:"gsi1pk"`
	GSI1SK         string `dynamodbav:"gsi1sk"`
}

func shadowListingItem(h Head, policyID string) (map[string]types.AttributeValue, error) {
	return item(runPK(h.RunID), shadowListSK, shadowListing{
		RunID: h.RunID, ShadowPolicyID: policyID, CreatedAt: h.CreatedAt,
		GSI1PK: shadowIndex(policyID), GSI1SK: h.CreatedAt + "#" + h.RunID,
	})
}

// ShadowKey is what makes two differences the same: the tool, the enforced
// policy's verdict and rule, and the shadow's (Error set: the shadow could
// not be evaluated). Verdicts are as compared, after an autonomous run's
// rewrite of require_approval.
type ShadowKey struct {
	ToolName      string `dynamodbav:"tool_name" json:"tool_name"`
	Verdict       string `dynamodbav:"verdict" json:"verdict"`
	RuleID        string `dynamodbav:"rule_id,omitempty" json:"rule_id,omitempty"`
	ShadowVerdict string `dynamodbav:"shadow_verdict,omitempty" json:"shadow_verdict,omitempty"`
	ShadowRuleID  string `dynamodbav:"shadow_rule_id,omitempty" json:"shadow_rule_id,omitempty"`
	ShadowError   bool   `dynamodbav:"shadow_error,omitempty" json:"shadow_error,omitempty"`
}

// ShadowDifference is a run's count of one difference, with the first
// call that showed it (its tool_call_id and the seq of the event that
// recorded it) and when the latest did.
type ShadowDifference struct {
	ShadowKey
	Count           int64  `dynamodbav:"count"`
	FirstToolCallID string `dynamodbav:"first_tool_call_id"`
	FirstSeq        int64  `dynamodbav:"first_seq"`
	FirstAt         string `dynamodbav:"first_at"`
	LatestAt        string `dynamodbav:"latest_at"`
}

func (k ShadowKey) sk() string {
	b, _ := json.Marshal(k) // a struct of strings and a bool always encodes
	sum := sha256.Sum256(b)
	return shadowDiffPrefix + hex.EncodeToString(sum[:16])
}

// ShadowDifferenceOp is the op that counts one difference k in runID, seen
// on toolCallID and recorded by the event at seq, at at. It has no
// condition: it never makes the decision's append fail. Its batch is
// numbered in its own transaction (see Append), so seq is exact.
func (s *Store) ShadowDifferenceOp(runID string, k ShadowKey, toolCallID string, seq int64, at string) (Op, error) {
	names := map[string]string{"#n": "count", "#la": "latest_at"}
	vals := map[string]types.AttributeValue{
		":one": num(1),
		":la":  &types.AttributeValueMemberS{Value: at},
	}
	first := map[string]any{
		"first_tool_call_id": toolCallID, "first_seq": seq, "first_at": at,
		"tool_name": k.ToolName, "verdict": k.Verdict, "rule_id": k.RuleID,
		"shadow_verdict": k.ShadowVerdict, "shadow_rule_id": k.ShadowRuleID, "shadow_error": k.ShadowError,
	}
	sets := []string{"#la = :la"}
	i := 0
	for _, a := range []string{"first_tool_call_id", "first_seq", "first_at", "tool_name", "verdict", "rule_id", "shadow_verdict", "shadow_rule_id", "shadow_error"} {
		v := first[a]
		if s, ok := v.(string); ok && s == "" {
			continue // an empty attribute is left out, as item() does
		}
		av, err := attributevalue.Marshal(v)
		if err != nil {
			return Op{}, fmt.Errorf("store: marshal %s: %w", a, err)
		}
		n, p := fmt.Sprintf("#f%d", i), fmt.Sprintf(":f%d", i)
		names[n], vals[p] = a, av
		sets = append(sets, n+" = if_not_exists("+n+", "+p+")")
		i++
	}
	return Op{item: types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       keyOf(runPK(runID), k.sk()),
		UpdateExpression:          aws.String("ADD #n :one SET " + strings.Join(sets, ", ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		// first_seq must name the event's number, so the batch is
		// numbered as it is written (Append).
	}}, failed: ErrConditionFailed, numbered: true}, nil
}

// ShadowRun is a run listed under its shadow policy, with its differences.
// Cut: the run has more kinds of difference than MaxShadowDifferences, and
// only that many were read.
type ShadowRun struct {
	RunID       string
	Differences []ShadowDifference
	Cut         bool
}

// MaxShadowDifferences bounds the kinds of difference (tool, verdicts and
// rules) read of one run: a run's calls choose how many there are, and a
// summary page must stay one bounded read.
const MaxShadowDifferences = 1000

// ShadowPage is one page of the runs a shadow policy was frozen into,
// newest first.
type ShadowPage struct {
	Runs []ShadowRun
	Next string
}

// shadowReads bounds the concurrent queries of one summary page.
const shadowReads = 8

// ListShadowRuns returns one page of the runs created with policyID as
// their shadow, newest first, each with its differences (read
// consistently from the run's partition).
func (s *Store) ListShadowRuns(ctx context.Context, policyID string, q ListQuery) (ShadowPage, error) {
	var page ShadowPage
	at := func(p string) (string, string) { return runPK(idOf(p)), shadowListSK }
	next, err := s.listPage(ctx, "list shadow runs", shadowIndex(policyID), q, at, "", nil, nil, func(avs []map[string]types.AttributeValue) (int, error) {
		runs := make([]ShadowRun, len(avs))
		for i, av := range avs {
			var l shadowListing
			if err := attributevalue.UnmarshalMap(av, &l); err != nil {
				return 0, fmt.Errorf("store: decode shadow listing: %w", err)
			}
			runs[i] = ShadowRun{RunID: l.RunID}
		}
		errs := make([]error, len(runs))
		sem := make(chan struct{}, shadowReads)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				runs[i].Cut, errs[i] = s.queryPrefixUpTo(ctx, runPK(runs[i].RunID), shadowDiffPrefix, MaxShadowDifferences, collect(&runs[i].Differences))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		page.Runs = append(page.Runs, runs...)
		return len(runs), nil
	})
	page.Next = next
	return page, err
}
