package run_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

const benchTableItems = 1000

// BenchmarkCreateRun: POST /v1/sessions' work with the claude-code bundle:
// freeze 7 tools, the policy, the head and event 1 in one transaction.
func BenchmarkCreateRun(b *testing.B) {
	st, db := testenv.StoreOn(b)
	fill(b, devstack.DynamoClient(db.URL), st.Table())
	putPolicy(b, st)
	svc := run.NewService(ledger.New(st, time.Now), time.Now)
	limit := 1.0
	req := run.CreateRequest{PolicyID: "pol_bench", Capabilities: []string{"claude-code"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{&limit}
	admin := auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}
	b.ResetTimer()
	for b.Loop() {
		if _, err := svc.Create(context.Background(), admin, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// BenchmarkRawCreateTransaction is the floor: one TransactWriteItems of the
// same ten items (seven tool schemas, policy, head, event) with the SDK.
func BenchmarkRawCreateTransaction(b *testing.B) {
	st, db := testenv.StoreOn(b)
	client := devstack.DynamoClient(db.URL)
	fill(b, client, st.Table())
	tools := capability.Builtin()[0].Tools
	policyDoc := strings.Repeat("p", 600)
	n := 0
	b.ResetTimer()
	for b.Loop() {
		n++
		pk := fmt.Sprintf("RUN#raw%d", n)
		var items []types.TransactWriteItem
		for _, t := range tools {
			items = append(items, put(st.Table(), pk, "HEAD#TOOL#"+t.Name, map[string]string{"name": t.Name, "class": string(t.Class), "schema": string(t.InputSchema), "schema_digest": "sha256:x", "origin": "capability:cap_claude_code", "description": t.Description}))
		}
		items = append(items,
			put(st.Table(), pk, "HEAD#POLICY", map[string]string{"document": policyDoc, "digest": "sha256:x", "policy_id": "pol_bench"}),
			put(st.Table(), pk, "HEAD", map[string]string{"status": "running", "token_hash": "sha256:x", "policy_id": "pol_bench", "trust_tier": "trusted", "tool_set_digest": "sha256:x", "policy_digest": "sha256:x", "created_at": "x", "invoker": "admin", "trigger": "manual"}),
			put(st.Table(), pk, "EV#00000000000000000001", map[string]string{"type": "session.created", "data": strings.Repeat("d", 400), "at": "x"}),
		)
		if _, err := client.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

func put(table, pk, sk string, attrs map[string]string) types.TransactWriteItem {
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
	for k, v := range attrs {
		item[k] = &types.AttributeValueMemberS{Value: v}
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
}

func putPolicy(b *testing.B, st *store.Store) {
	b.Helper()
	err := st.PutPolicyVersion(context.Background(), store.PolicyVersion{PolicyID: "pol_bench", Version: 1, Name: "bench", Digest: "sha256:x", Document: `{"name":"bench","default_verdict":"deny","rules":[]}`})
	if err != nil {
		b.Fatal(err)
	}
}

func fill(b *testing.B, client *dynamodb.Client, table string) {
	b.Helper()
	for i := range benchTableItems {
		_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("FILL#%d", i)}, "sk": &types.AttributeValueMemberS{Value: "X"}},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
