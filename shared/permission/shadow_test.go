package permission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// shadowText is tighter than policyText: ls asks, git push is denied.
const shadowText = `{"name":"tight","default_verdict":"deny","rules":[
 {"id":"ls-asks","tool":"Bash","match":{"command_prefix":["ls"]},"verdict":"require_approval"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`

// eventsOf returns the data of the run's events of type typ, in order.
func eventsOf(t *testing.T, e *calltest.Env, typ string) []map[string]any {
	t.Helper()
	evs, _, err := e.Led.Read(context.Background(), e.RunID, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		if ev.Type != typ {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
			t.Fatal(err)
		}
		m["seq"] = float64(ev.Seq)
		out = append(out, m)
	}
	return out
}

func TestShadowRecordsOnlyDifferences(t *testing.T) {
	t.Parallel()
	e := calltest.NewShadowEnv(t, policyText, shadowText, false)
	ctx := context.Background()
	askShadowed(t, e)
	byCall := checkShadowEvents(t, e)
	checkShadowCounted(t, e, byCall)

	// Counted again on a new call with the same difference.
	if _, err := e.Bash(t, "c5", "ls", 0); err != nil {
		t.Fatal(err)
	}
	page, err := e.St.ListShadowRuns(ctx, e.ShadowPolicyID, store.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range page.Runs[0].Differences {
		if d.ShadowRuleID == "ls-asks" && (d.Count != 2 || d.FirstToolCallID != "c1") {
			t.Errorf("after a second ls: %+v, want count 2, first c1", d)
		}
	}
}

// askShadowed asks four calls: one the shadow would ask for, one both deny,
// a retry, one outside the frozen set, and one the enforced policy asks
// for and the shadow denies, approved.
func askShadowed(t *testing.T, e *calltest.Env) {
	t.Helper()
	ctx := context.Background()
	// Allowed by the enforced policy, an approval for the shadow: the
	// answer is the enforced one's, and the difference is recorded.
	a, err := e.Bash(t, "c1", "ls -la", 0)
	if err != nil || a.Decision != vocab.Allow || a.RuleID != "ls" {
		t.Fatalf("ls = %+v, %v; want the enforced allow", a, err)
	}
	// Denied by both (each by its default): no difference.
	if a, err := e.Bash(t, "c2", "curl example.test", 0); err != nil || a.Decision != vocab.Deny {
		t.Fatalf("curl = %+v, %v", a, err)
	}
	// A retry records nothing, the difference is not counted again.
	if _, err := e.Bash(t, "c1", "ls -la", 0); err != nil {
		t.Fatal(err)
	}
	// A tool outside the frozen set is denied before the policy stage: no
	// shadow runs.
	if a, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "c3", ToolName: "NotFrozen", Input: []byte(`{}`)}, 0); err != nil || a.Source != "capability" {
		t.Fatalf("unfrozen = %+v, %v", a, err)
	}
	// An approval for the enforced policy, a deny for the shadow: the
	// difference is on approval.requested, then on the tool.decision that
	// settles it.
	p, err := e.Bash(t, "c4", "git push origin main", 0)
	if err != nil || p.Decision != vocab.Pending {
		t.Fatalf("push = %+v, %v; want pending", p, err)
	}
	if _, _, err := e.Approvals.Decide(ctx, auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, p.ApprovalID, vocab.ChoiceApprovedOnce); err != nil {
		t.Fatal(err)
	}
}

// checkShadowEvents: the difference is on the events of c1 and c4 alone;
// it returns the tool.decision events by call.
func checkShadowEvents(t *testing.T, e *calltest.Env) map[string]map[string]any {
	t.Helper()
	decisions := eventsOf(t, e, "tool.decision")
	if len(decisions) != 4 {
		t.Fatalf("%d tool.decision events, want 4: %v", len(decisions), decisions)
	}
	byCall := map[string]map[string]any{}
	for _, d := range decisions {
		byCall[d["tool_call_id"].(string)] = d
	}
	if d := byCall["c1"]; d["shadow_verdict"] != "require_approval" || d["shadow_rule_id"] != "ls-asks" || d["decision"] != "allow" {
		t.Errorf("c1 decision = %v; want the shadow's require_approval by ls-asks beside allow", d)
	}
	for _, id := range []string{"c2", "c3"} {
		for k := range byCall[id] {
			if len(k) > 7 && k[:7] == "shadow_" {
				t.Errorf("%s: no difference, yet %s recorded: %v", id, k, byCall[id])
			}
		}
	}
	if d := byCall["c4"]; d["shadow_verdict"] != "deny" || d["shadow_rule_id"] != "no-push" || d["decision"] != "allow" || d["verdict"] != "require_approval" {
		t.Errorf("c4 settled decision = %v; want the shadow's deny by no-push", d)
	}
	if ar := eventsOf(t, e, "approval.requested"); len(ar) != 1 || ar[0]["shadow_verdict"] != "deny" || ar[0]["shadow_rule_id"] != "no-push" {
		t.Errorf("approval.requested = %v; want the shadow's deny on it", ar)
	}
	return byCall
}

// checkShadowCounted: the shadow policy's run list counts each
// difference once, pointing at the event that recorded it.
func checkShadowCounted(t *testing.T, e *calltest.Env, byCall map[string]map[string]any) {
	t.Helper()
	ctx := context.Background()
	page, err := e.St.ListShadowRuns(ctx, e.ShadowPolicyID, store.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 || page.Runs[0].RunID != e.RunID {
		t.Fatalf("shadow runs = %+v, want this run", page.Runs)
	}
	got := map[string]store.ShadowDifference{}
	for _, d := range page.Runs[0].Differences {
		got[d.ToolName+" "+d.Verdict+">"+d.ShadowVerdict] = d
	}
	ls, push := got["Bash allow>require_approval"], got["Bash require_approval>deny"]
	if len(got) != 2 || ls.Count != 1 || ls.RuleID != "ls" || ls.ShadowRuleID != "ls-asks" || ls.FirstToolCallID != "c1" ||
		push.Count != 1 || push.ShadowRuleID != "no-push" || push.FirstToolCallID != "c4" {
		t.Fatalf("differences = %+v", page.Runs[0].Differences)
	}
	// The counted seq points at the event that recorded the difference.
	if int64(byCall["c1"]["seq"].(float64)) != ls.FirstSeq {
		t.Errorf("first_seq %d, want the seq of c1's tool.decision %v", ls.FirstSeq, byCall["c1"]["seq"])
	}
}

// TestShadowStaysFrozen: updating or removing the shadow policy after the
// run was created changes nothing about the run's shadow.
func TestShadowStaysFrozen(t *testing.T) {
	t.Parallel()
	e := calltest.NewShadowEnv(t, policyText, shadowText, false)
	ctx := context.Background()
	latest, err := e.St.GetPolicy(ctx, e.ShadowPolicyID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 agrees with the enforced policy on ls.
	loose := latest
	loose.Version, loose.Document = 2, `{"name":"loose","default_verdict":"allow","rules":[]}`
	loose.Digest = "sha256:" + "00000000000000000000000000000000000000000000000000000000000000aa"
	if err := e.St.PutPolicyVersion(ctx, loose); err != nil {
		t.Fatal(err)
	}
	// Then every item of the policy goes.
	db := devstack.DynamoClient(e.DB.URL)
	items, err := db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(e.St.Table()), KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "POL#" + e.ShadowPolicyID}},
	})
	if err != nil || len(items.Items) < 2 {
		t.Fatalf("policy items: %d, %v", len(items.Items), err)
	}
	for _, it := range items.Items {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.St.Table()), Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.St.GetPolicy(ctx, e.ShadowPolicyID, 0); err == nil {
		t.Fatal("the shadow policy is still there")
	}
	if _, err := e.Bash(t, "c1", "ls", 0); err != nil {
		t.Fatal(err)
	}
	d := eventsOf(t, e, "tool.decision")
	if len(d) != 1 || d[0]["shadow_verdict"] != "require_approval" || d[0]["shadow_rule_id"] != "ls-asks" {
		t.Errorf("decision = %v; want the frozen shadow's require_approval", d)
	}
}

// TestShadowCountsUnderConcurrency: dozens of concurrent calls with the
// same difference, each a retry of itself too, count once per call.
func TestShadowCountsUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := calltest.NewShadowEnv(t, policyText, shadowText, false)
	const calls = 24
	var wg sync.WaitGroup
	for i := range calls * 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.Bash(t, fmt.Sprint("c", i%calls), "ls", 0)
			if err != nil || a.Decision != vocab.Allow {
				t.Errorf("ask %d: %+v, %v", i, a, err)
			}
		}()
	}
	wg.Wait()
	page, err := e.St.ListShadowRuns(context.Background(), e.ShadowPolicyID, store.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 || len(page.Runs[0].Differences) != 1 || page.Runs[0].Differences[0].Count != calls {
		t.Fatalf("differences = %+v, want one counted %d times", page.Runs, calls)
	}
	if n := len(eventsOf(t, e, "tool.decision")); n != calls {
		t.Errorf("%d tool.decision events, want %d", n, calls)
	}
}

// TestShadowThatDoesNotCompile: a frozen shadow document that no longer
// compiles, or whose text is not what its digest was taken of (a stored
// copy that lost a field), leaves every answer to the enforced policy and
// records the shadow as unavailable on each call.
func TestShadowThatDoesNotCompile(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"does not compile": `{"name":`,
		"not its digest's": `{"name":"loose","default_verdict":"allow","rules":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			shadowUnavailable(t, doc)
		})
	}
}

func shadowUnavailable(t *testing.T, doc string) {
	e := calltest.NewShadowEnv(t, policyText, shadowText, false)
	ctx := context.Background()
	_, err := devstack.DynamoClient(e.DB.URL).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(e.St.Table()),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RUN#" + e.RunID}, "sk": &types.AttributeValueMemberS{Value: "HEAD#POLICY#SHADOW"},
		},
		UpdateExpression:          aws.String("SET #d = :d"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#d": "document"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: doc}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for call, want := range map[string]string{"ls": "allow", "curl x": "deny", "git push": "pending"} {
		a, err := e.Bash(t, call, call, 0)
		if err != nil || string(a.Decision) != want {
			t.Errorf("%s = %+v, %v; want %s, as without a shadow", call, a, err, want)
		}
	}
	evs := append(eventsOf(t, e, "tool.decision"), eventsOf(t, e, "approval.requested")...)
	if len(evs) != 3 {
		t.Fatalf("%d decision events, want 3", len(evs))
	}
	for _, ev := range evs {
		if ev["shadow_error"] != "shadow_unavailable" || ev["shadow_verdict"] != nil {
			t.Errorf("event %v; want shadow_error shadow_unavailable", ev)
		}
	}
}

// TestShadowSummaryReadIsBounded: a run's calls choose how many kinds of
// difference it has; a summary reads at most store.MaxShadowDifferences of
// one run, and says when it cut. One real difference is recorded, then
// copied behind the store's back (as if other tools had differed), which
// takes a second where real calls would take half a minute.
func TestShadowSummaryReadIsBounded(t *testing.T) {
	t.Parallel()
	e := calltest.NewShadowEnv(t, `{"name":"p","default_verdict":"allow","rules":[]}`, `{"name":"s","default_verdict":"deny","rules":[]}`, false)
	ctx := context.Background()
	if a, err := e.Bash(t, "call-0", "git status", 0); err != nil || a.Decision != vocab.Allow {
		t.Fatalf("call = %+v, %v; want allow", a, err)
	}
	db := devstack.DynamoClient(e.DB.URL)
	got, err := db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(e.St.Table()), KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + e.RunID}, ":p": &types.AttributeValueMemberS{Value: "SHADOW#"}},
	})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("difference items: %d, %v; want the one", len(got.Items), err)
	}
	copies := func(from, to int) {
		for i := from; i < to; i += 25 {
			var puts []types.WriteRequest
			for j := i; j < min(i+25, to); j++ {
				item := maps.Clone(got.Items[0])
				item["sk"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("SHADOW#copy%04d", j)}
				item["tool_name"] = &types.AttributeValueMemberS{Value: fmt.Sprintf("mcp__x__t%04d", j)}
				puts = append(puts, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			}
			if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{e.St.Table(): puts}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func() store.ShadowRun {
		page, err := e.St.ListShadowRuns(ctx, e.ShadowPolicyID, store.ListQuery{Limit: 10})
		if err != nil || len(page.Runs) != 1 {
			t.Fatalf("ListShadowRuns = %d runs, %v; want the one run", len(page.Runs), err)
		}
		return page.Runs[0]
	}
	n := store.MaxShadowDifferences
	copies(1, n)
	if r := read(); r.Cut || len(r.Differences) != n {
		t.Errorf("with %d kinds: cut %v, %d read; want all, not cut", n, r.Cut, len(r.Differences))
	}
	copies(n, n+1)
	if r := read(); !r.Cut || len(r.Differences) != n {
		t.Errorf("with %d kinds: cut %v, %d read; want %d read and cut", n+1, r.Cut, len(r.Differences), n)
	}
}
