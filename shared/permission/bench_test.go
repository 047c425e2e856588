package permission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// benchTableItems is the table size both benchmarks start from: minidyn
// snapshots whole tables per transaction, so rates depend on it.
const benchTableItems = 1000

// BenchmarkDecision: one permission decision end to end against minidyn's
// server (frozen state cached, as at steady state): the gate plus one
// TransactWriteItems with a fence check, two events and the call record.
// "gate" numbers nothing, as the Gate function (the notify function
// numbers on AWS): its rate over BenchmarkRawDecisionTransaction's is the
// perf gate's ratio. "dev" also numbers in the background after each
// decision, as `fluidbox dev` does, so the emulator does that work too.
//
// Each runs twice: "cpu" on the bare emulator, where a decision's cost is
// processor time (the emulator's and the SDK's far more than fluidbox's,
// all in this process), and "model" under DynamoDB's timing (benchModel),
// where it is round trips, as on AWS: a decision that needed a second
// request would halve its rate there and barely move it here.
func BenchmarkDecision(b *testing.B) {
	for _, timing := range benchTimings {
		b.Run("gate/"+timing.name, func(b *testing.B) { benchDecision(b, timing.chaos, ledger.SequenceOnlyWhenRead) })
		b.Run("dev/"+timing.name, func(b *testing.B) { benchDecision(b, timing.chaos) })
	}
}

// benchModel is DynamoDB's timing as the multi-process benchmarks model
// it (cmd/fluidbox): a transaction takes 20 ms and holds its items for
// the last 18.
const benchModel = "latency=20ms,hold=18ms"

var benchTimings = []struct{ name, chaos string }{{"cpu", ""}, {"model", benchModel}}

// onEmulator is a store on a fresh emulator of benchTableItems items,
// under chaos.
func onEmulator(b *testing.B, chaos string) (*store.Store, *dynamodb.Client) {
	st, db := testenv.StoreOn(b)
	client := devstack.DynamoClient(db.URL)
	fill(b, client, st.Table())
	c, err := devstack.ParseChaos(chaos)
	if err != nil {
		b.Fatal(err)
	}
	db.Layer.SetChaos(c)
	return st, client
}

func benchDecision(b *testing.B, chaos string, opts ...ledger.Option) {
	st, _ := onEmulator(b, chaos)
	led := ledger.New(st, time.Now, opts...)
	p, _, err := policy.Parse([]byte(`{"name":"b","default_verdict":"deny","rules":[{"id":"r","tool":"Read","verdict":"allow"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	doc, _ := json.Marshal(p.Document())
	if err := st.PutPolicyVersion(context.Background(), store.PolicyVersion{PolicyID: "pol_b", Version: 1, Digest: p.Digest(), Document: string(doc)}); err != nil {
		b.Fatal(err)
	}
	limit := 100.0
	req := run.CreateRequest{PolicyID: "pol_b", Capabilities: []string{"claude-code"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{&limit}
	v, err := run.NewService(led, time.Now).Create(context.Background(), auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, req)
	if err != nil {
		b.Fatal(err)
	}
	svc := permission.NewService(led, approval.NewService(led, time.Now), approval.Lazy{}, nil, time.Now)
	input := json.RawMessage(`{"file_path":"/work/src/main.go","offset":10,"limit":200}`)
	ask := func(i int) {
		a, err := svc.Decide(context.Background(), v.ID, permission.Request{ToolCallID: fmt.Sprintf("c%d", i), ToolName: "Read", Input: input}, 0)
		if err != nil || a.Decision != vocab.Allow {
			b.Fatalf("Decide = %+v, %v", a, err)
		}
	}
	ask(-1) // warm the frozen-state cache and the head cache
	i := 0
	b.ResetTimer()
	for b.Loop() {
		ask(i)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkRawDecisionTransaction is the floor: the transaction a
// decision writes (a fence shard's check, two unsequenced events, the
// call record, each attribute as BenchmarkDecision writes it) sent
// directly with the SDK, on the bare emulator and under its timing.
func BenchmarkRawDecisionTransaction(b *testing.B) {
	for _, timing := range benchTimings {
		b.Run(timing.name, func(b *testing.B) { rawDecisionTransaction(b, timing.chaos) })
	}
}

func rawDecisionTransaction(b *testing.B, chaos string) {
	st, client := onEmulator(b, chaos)
	ctx := context.Background()
	table := aws.String(st.Table())
	const pk, at = "RUN#ses_raw", "2026-11-30T00:00:00.000000000Z"
	put := func(sk string, attrs map[string]types.AttributeValue) types.TransactWriteItem {
		attrs["pk"], attrs["sk"] = s(pk), s(sk)
		return types.TransactWriteItem{Put: &types.Put{TableName: table, Item: attrs, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
	}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		batch := fmt.Sprintf("Q#0000000000#%019d#%08x", time.Now().UnixNano(), i)
		digest := s(fmt.Sprintf("sha256:%064x", i))
		call := put(fmt.Sprintf("CALL#c%d", i), map[string]types.AttributeValue{"tool_call_id": s(fmt.Sprintf("c%d", i)), "tool_name": s("Read"), "input_digest": digest, "request_digest": digest, "verdict": s("allow"), "decided_at": s(at), "decision": s("allow"), "reason": s(`allowed by rule "r"`), "rule_id": s("r")})
		call.Put.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{TableName: table, Key: map[string]types.AttributeValue{"pk": s(pk), "sk": s(fmt.Sprintf("FENCE#%d", i%store.FenceShards))}, ConditionExpression: aws.String("attribute_not_exists(gen)")}},
			put(batch+"#00", map[string]types.AttributeValue{"seq": n(0), "type": s("tool.requested"), "at": s(at), "data": s(fmt.Sprintf(`{"tool_call_id":"c%d","tool_name":"Read","input_digest":"sha256:%064x"}`, i, i))}),
			put(batch+"#01", map[string]types.AttributeValue{"seq": n(0), "type": s("tool.decision"), "at": s(at), "data": s(fmt.Sprintf(`{"tool_call_id":"c%d","tool_name":"Read","decision":"allow","rule_id":"r","verdict":"allow"}`, i))}),
			call,
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }

func fill(b *testing.B, client *dynamodb.Client, table string) {
	b.Helper()
	for i := range benchTableItems {
		_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s(fmt.Sprintf("FILL#%d", i)), "sk": s("X")}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
