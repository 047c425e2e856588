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
func BenchmarkDecision(b *testing.B) {
	b.Run("gate", func(b *testing.B) { benchDecision(b, ledger.SequenceOnlyWhenRead) })
	b.Run("dev", func(b *testing.B) { benchDecision(b) })
}

func benchDecision(b *testing.B, opts ...ledger.Option) {
	st, db := testenv.StoreOn(b)
	fill(b, devstack.DynamoClient(db.URL), st.Table())
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

// BenchmarkRawDecisionTransaction is the floor: the same four-item
// transaction (conditional counter update, two event puts, call put)
// written directly with the SDK.
func BenchmarkRawDecisionTransaction(b *testing.B) {
	st, db := testenv.StoreOn(b)
	client := devstack.DynamoClient(db.URL)
	fill(b, client, st.Table())
	ctx := context.Background()
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.Table()), Item: map[string]types.AttributeValue{"pk": s("RAW"), "sk": s("HEAD"), "last_seq": n(0)}}); err != nil {
		b.Fatal(err)
	}
	seq := 0
	put := func(sk string, attrs map[string]types.AttributeValue) types.TransactWriteItem {
		attrs["pk"], attrs["sk"] = s("RAW"), s(sk)
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(st.Table()), Item: attrs, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
	}
	b.ResetTimer()
	for b.Loop() {
		seq += 2
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				TableName: aws.String(st.Table()), Key: map[string]types.AttributeValue{"pk": s("RAW"), "sk": s("HEAD")},
				UpdateExpression: aws.String("SET last_seq = :n"), ConditionExpression: aws.String("last_seq = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": n(seq), ":p": n(seq - 2)},
			}},
			put(fmt.Sprintf("EV#%020d", seq-1), map[string]types.AttributeValue{"seq": n(seq - 1), "type": s("tool.requested"), "at": s("2026-11-30T00:00:00.000000000Z"), "data": s(`{"tool_call_id":"c","tool_name":"Read","input_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}`)}),
			put(fmt.Sprintf("EV#%020d", seq), map[string]types.AttributeValue{"seq": n(seq), "type": s("tool.decision"), "at": s("2026-11-30T00:00:00.000000000Z"), "data": s(`{"tool_call_id":"c","tool_name":"Read","decision":"allow","rule_id":"r","verdict":"allow"}`)}),
			put(fmt.Sprintf("CALL#c%d", seq), map[string]types.AttributeValue{"tool_call_id": s("c"), "tool_name": s("Read"), "input_digest": s("sha256:00"), "decision": s("allow"), "rule_id": s("r"), "verdict": s("allow"), "reason": s(`allowed by rule "r"`), "decided_at": s("2026-11-30T00:00:00.000000000Z")}),
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
