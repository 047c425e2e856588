package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// countingStore is a store over the chaos layer whose requests are
// counted by operation.
func countingStore(t *testing.T) (*store.Store, *devstack.DynamoDB, func() map[string]int) {
	t.Helper()
	var requests testenv.Requests
	st, db := testenv.StoreOn(t, requests.Option)
	testenv.Calm(t, db) // it counts requests
	return st, db, requests.Take
}

// TestRunStateInOneRead: a run's head and everything it froze come back
// from one Query, and the frozen state is then read from memory once; a
// run whose frozen items are at the keys runs had before (POLICY,
// TOOL#, BIND#) is read as before, with a head and the three Queries.
func TestRunStateInOneRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, db, calls := countingStore(t)
	r := store.NewRun{
		Head:     store.Head{RunID: "ses_new", Status: vocab.Running, Invoker: "admin", CreatedAt: at(0), BudgetLimit: 10, BudgetAvailable: 10, TokenHash: "h"},
		Policy:   store.PolicySnapshot{PolicyID: "pol_1", Version: 1, Digest: "sha256:p", Document: `{"name":"p"}`},
		Shadow:   &store.PolicySnapshot{PolicyID: "pol_2", Version: 3, Digest: "sha256:s", Document: `{"name":"s"}`},
		Tools:    []store.Tool{{Name: "Bash", Class: "exec", Schema: "{}", Callable: true}, {Name: "Read", Class: "read", Schema: "{}", Callable: true}},
		Bindings: []store.Binding{{ConnectionID: "con_1", ConnectionName: "jira", Kind: "mcp", Generation: 2}},
		Created:  envelope(t, redact.SessionCreated{SessionID: "ses_new", Trigger: "api", Invoker: "admin"}),
	}
	must(t, st.CreateRun(ctx, r))
	calls()
	h, err := st.RunState(ctx, "ses_new")
	must(t, err)
	if h.RunID != "ses_new" || h.TokenHash != "h" || h.LastSeq != 1 {
		t.Errorf("head = %+v", h)
	}
	f, err := st.GetFrozen(ctx, "ses_new")
	must(t, err)
	want := store.Frozen{Tools: r.Tools, Policy: r.Policy, Shadow: r.Shadow, Bindings: r.Bindings}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("frozen = %+v, want %+v", f, want)
	}
	if got := calls(); !reflect.DeepEqual(got, map[string]int{"Query": 1}) {
		t.Errorf("requests for the head and the frozen state = %v, want one Query", got)
	}
	// Read again without RunState: one Query of the frozen items.
	again, err := st.GetFrozen(ctx, "ses_new")
	must(t, err)
	if !reflect.DeepEqual(again, want) {
		t.Errorf("frozen read again = %+v, want %+v", again, want)
	}
	if got := calls(); !reflect.DeepEqual(got, map[string]int{"Query": 1}) {
		t.Errorf("requests for the frozen state = %v, want one Query", got)
	}
	p, err := st.GetRunPolicy(ctx, "ses_new")
	if err != nil || p != r.Policy {
		t.Errorf("GetRunPolicy = %+v, %v; want the frozen policy", p, err)
	}

	// A run as runs were created before.
	client := devstack.DynamoClient(db.URL)
	put := func(sk string, v any) {
		t.Helper()
		av, err := attributevalue.MarshalMap(v)
		must(t, err)
		av["pk"], _ = attributevalue.Marshal("RUN#ses_old")
		av["sk"], _ = attributevalue.Marshal(sk)
		_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.Table()), Item: av})
		must(t, err)
	}
	put("POLICY", r.Policy)
	put("POLICY#SHADOW", r.Shadow)
	put("TOOL#Bash", r.Tools[0])
	put("TOOL#Read", r.Tools[1])
	put("BIND#con_1", r.Bindings[0])
	put("HEAD", store.Head{RunID: "ses_old", Status: vocab.Running, TokenHash: "o"})
	calls()
	if h, err := st.RunState(ctx, "ses_old"); err != nil || h.TokenHash != "o" {
		t.Errorf("RunState of an older run = %+v, %v", h, err)
	}
	f, err = st.GetFrozen(ctx, "ses_old")
	must(t, err)
	if !reflect.DeepEqual(f, want) {
		t.Errorf("frozen of an older run = %+v, want %+v", f, want)
	}
	if got := calls(); got["Query"] != 5 || len(got) != 1 {
		t.Errorf("requests for an older run = %v, want its head's Query, one for the new layout and three for the old", got)
	}
	if p, err := st.GetRunPolicy(ctx, "ses_old"); err != nil || p != r.Policy {
		t.Errorf("GetRunPolicy of an older run = %+v, %v; want its policy", p, err)
	}

	if _, err := st.RunState(ctx, "ses_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunState of no run = %v, want ErrNotFound", err)
	}
	if _, err := st.GetFrozen(ctx, "ses_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetFrozen of no run = %v, want ErrNotFound", err)
	}
}
