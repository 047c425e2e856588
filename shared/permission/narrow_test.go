package permission_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const narrowPolicy = `{"name":"secrets","default_verdict":"deny","rules":[
 {"id":"env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
 {"id":"grep","tool":"Grep","match":{"path":["/work/**"]},"verdict":"allow"},
 {"id":"search","tool":"Bash","match":{"command_prefix":["rg"]},"verdict":"allow"},
 {"id":"env-read","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"}]}`

// A search that may reach a denied file is allowed narrowed: the answer
// carries the input to run, the ledger the narrowed input's digest beside
// the asked one's, and every retry (concurrent ones too) gets the same
// narrowed input, never the bare allow.
func TestNarrowedAnswerAndReplay(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, narrowPolicy)
	ctx := context.Background()
	for _, tc := range []struct {
		tool, input, field, want string
	}{
		{"Grep", `{"pattern":"KEY","path":"/work/repo"}`, "glob", "!**/.[eE][nN][vV]"},
		{"Bash", `{"command":"rg KEY"}`, "command", "'--iglob=!**/.env'"},
	} {
		req := permission.Request{ToolCallID: "c-" + tc.tool, ToolName: tc.tool, Input: json.RawMessage(tc.input), Cwd: "/work/repo"}
		first, err := e.Perm.Decide(ctx, e.RunID, req, 0)
		if err != nil || first.Decision != vocab.Allow || first.UpdatedInput.IsZero() {
			t.Fatalf("%s = %+v, %v; want allow with updated_input", tc.tool, first, err)
		}
		got, err := first.UpdatedInput.Value()
		if err != nil || !strings.Contains(got[tc.field].(string), tc.want) {
			t.Fatalf("%s updated_input = %v, %v; want %s to hold %s", tc.tool, got, err, tc.field, tc.want)
		}
		var wg sync.WaitGroup
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				again, err := e.Perm.Decide(ctx, e.RunID, req, 0)
				if err != nil || again != first {
					t.Errorf("%s retry = %+v, %v; want %+v", tc.tool, again, err, first)
				}
			}()
		}
		wg.Wait()
		b, _ := json.Marshal(first)
		if !strings.Contains(string(b), `"updated_input":{`) {
			t.Errorf("answer JSON %s has no updated_input object", b)
		}
	}
	evs, _, err := e.Led.Read(ctx, e.RunID, 0, 100, 0) // numbers what is pending first
	if err != nil {
		t.Fatal(err)
	}
	narrowed := 0
	for _, ev := range evs {
		if ev.Type != "tool.decision" {
			continue
		}
		var d struct {
			Digest string `json:"updated_input_digest"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(d.Digest, "sha256:") {
			narrowed++
		}
		if strings.Contains(ev.Data, "KEY") {
			t.Errorf("tool.decision holds input text: %s", ev.Data)
		}
	}
	if narrowed != 2 {
		t.Errorf("%d tool.decision events carry updated_input_digest, want 2", narrowed)
	}
}

// Path kinds reach the policy: a Grep of a file is judged as that file, so
// it is allowed as asked; a kind the API does not know is refused.
func TestPathKinds(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, narrowPolicy)
	ctx := context.Background()
	in := json.RawMessage(`{"pattern":"KEY","path":"/work/repo/main.go"}`)
	a, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "k1", ToolName: "Grep", Input: in, PathKinds: map[string]string{"path": "file"}}, 0)
	if err != nil || a.Decision != vocab.Allow || !a.UpdatedInput.IsZero() {
		t.Errorf("Grep of a file = %+v, %v; want allow as asked", a, err)
	}
	var inv *permission.InvalidError
	_, err = e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "k2", ToolName: "Grep", Input: in, PathKinds: map[string]string{"path": "symlink"}}, 0)
	if !errors.As(err, &inv) {
		t.Errorf("unknown kind = %v, want InvalidError", err)
	}
}

// The search report reaches the policy: a Glob of the root is allowed
// where the report shows no .env, denied where it shows one or where it
// is cut at its bound; a report the API cannot read is refused.
func TestSearchReport(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, `{"name":"secrets","default_verdict":"deny","rules":[
	 {"id":"env-glob","tool":"Glob","match":{"path":["**/.env"]},"verdict":"deny"},
	 {"id":"glob","tool":"Glob","match":{"path":["/work/**"]},"verdict":"allow"}]}`)
	ctx := context.Background()
	in := json.RawMessage(`{"pattern":"**/*"}`)
	for i, tc := range []struct {
		report *tree.Report
		want   vocab.Decision
	}{
		{&tree.Report{Entries: []string{"main.go"}, Complete: true}, vocab.Allow},
		{&tree.Report{Entries: []string{"main.go", "app/.env"}, Complete: true}, vocab.Deny},
		{&tree.Report{Entries: []string{"main.go"}}, vocab.Deny},
		{nil, vocab.Deny},
	} {
		req := permission.Request{ToolCallID: fmt.Sprintf("g%d", i), ToolName: "Glob", Input: in, Cwd: "/work/repo", SearchReport: tc.report}
		if a, err := e.Perm.Decide(ctx, e.RunID, req, 0); err != nil || a.Decision != tc.want {
			t.Errorf("Glob with report %+v = %+v, %v; want %s", tc.report, a, err, tc.want)
		}
	}
	var inv *permission.InvalidError
	bad := permission.Request{ToolCallID: "g-bad", ToolName: "Glob", Input: in, Cwd: "/work/repo", SearchReport: &tree.Report{Entries: []string{"/etc/passwd"}, Complete: true}}
	if _, err := e.Perm.Decide(ctx, e.RunID, bad, 0); !errors.As(err, &inv) || !strings.Contains(inv.Message, "search_report") {
		t.Errorf("an absolute entry = %v, want InvalidError naming search_report", err)
	}
}

// A subagent's narrowed answer replays as it was given: the replay derives
// the narrowed input again under the same subagent type, so a rule that
// allows only that type still matches on the retry.
func TestNarrowedReplayOfASubagent(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, `{"name":"explore","default_verdict":"deny","rules":[
 {"id":"env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
 {"id":"explore-grep","tool":"Grep","match":{"path":["/work/**"],"agent_type":["Explore"]},"verdict":"allow"}]}`)
	ctx := context.Background()
	req := permission.Request{ToolCallID: "c-explore", ToolName: "Grep", Input: json.RawMessage(`{"pattern":"KEY","path":"/work/repo"}`), Cwd: "/work/repo", AgentID: "agent-1", AgentType: "Explore"}
	first, err := e.Perm.Decide(ctx, e.RunID, req, 0)
	if err != nil || first.Decision != vocab.Allow || first.UpdatedInput.IsZero() {
		t.Fatalf("Explore's Grep = %+v, %v; want allow with updated_input", first, err)
	}
	again, err := e.Perm.Decide(ctx, e.RunID, req, 0)
	if err != nil || again != first {
		t.Errorf("retry = %+v, %v; want %+v", again, err, first)
	}
	main := req
	main.ToolCallID, main.AgentID, main.AgentType = "c-main", "", ""
	if d, err := e.Perm.Decide(ctx, e.RunID, main, 0); err != nil || d.Decision != vocab.Deny {
		t.Errorf("the main agent's Grep = %+v, %v; want deny (the rule is Explore's)", d, err)
	}
}

// A run whose frozen policy text is not the document its digest was taken
// of (a stored copy that lost a field: agent_type, once) enforces nothing:
// its calls are refused, never decided by the looser text.
func TestFrozenPolicyThatLostAField(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, `{"name":"explore","default_verdict":"deny","rules":[
 {"id":"explore-read","tool":"Read","match":{"path":["/work/**"],"agent_type":["Explore"]},"verdict":"allow"}]}`)
	ctx := context.Background()
	db := devstack.DynamoClient(e.DB.URL)
	loose := `{"name":"explore","default_verdict":"deny","rules":[{"id":"explore-read","tool":"Read","match":{"path":["/work/**"]},"verdict":"allow"}]}`
	for _, sk := range []string{"HEAD#POLICY", "POLICY"} {
		if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(e.St.Table()), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + e.RunID}, "sk": &types.AttributeValueMemberS{Value: sk}},
			UpdateExpression: aws.String("SET document = :d"), ConditionExpression: aws.String("attribute_exists(pk)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: loose}},
		}); err != nil && sk == "HEAD#POLICY" {
			t.Fatal(err)
		}
	}
	req := permission.Request{ToolCallID: "c-read", ToolName: "Read", Input: json.RawMessage(`{"file_path":"/work/repo/a.go"}`)}
	if d, err := e.Perm.Decide(ctx, e.RunID, req, 0); err == nil && d.Decision == vocab.Allow {
		t.Errorf("the main agent's Read under the frozen copy without agent_type = %+v, want refused", d)
	}
}
