// Package controlplane starts the real fluidbox control plane on 127.0.0.1
// for the end-to-end suites that drive a real agent (the Claude Code CLI,
// the Agent SDK): minidyn behind the validating layer, a local sealer,
// in-process expiry timers, the API on two listeners as on AWS (the API,
// and the model proxy an agent's ANTHROPIC_BASE_URL points at, so a test
// can take the API down mid-run while the model keeps answering), and a
// scripted model as the proxy's upstream, holding the operator's key.
//
// It also reads a run's timeline into the view those suites assert on,
// and checks what every run's model traffic must show.
package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// OperatorKey is the model upstream's credential: the scripted model
// requires it, and no agent ever holds it.
const OperatorKey = "sk-ant-operator-e2e-0123456789"

// Options name one suite's stack.
type Options struct {
	AdminToken string
	// TablePrefix names the stack's tables (one per stack).
	TablePrefix string
	// Wrap, when set, wraps the API handler of both listeners (to count
	// requests, say).
	Wrap func(http.Handler) http.Handler
	// PublicURL is the API's public base URL (FLUIDBOX_PUBLIC_URL); empty
	// is the listener's own.
	PublicURL string
}

// Stack is one control plane and its scripted model.
type Stack struct {
	API, Proxy *httptest.Server
	Admin      *client.Client
	Model      *scriptedmodel.Server
}

// Run is one fluidbox run (session) and its token.
type Run struct{ ID, Token string }

var tables atomic.Int64

// Start starts a stack whose model answers with script; everything stops
// when t ends.
func Start(t *testing.T, o Options, script ...scriptedmodel.Step) *Stack {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start minidyn: %v", err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		testenv.CheckRefused(t, db)
	})
	st := store.New(devstack.DynamoClient(db.URL), fmt.Sprintf("%s%d", o.TablePrefix, tables.Add(1)))
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatalf("create table: %v", err)
	}
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal", "dev-seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	led := ledger.New(st, time.Now)
	timers := approval.NewTimers(approval.NewService(led, time.Now), nil)
	t.Cleanup(timers.Stop)
	var h http.Handler = api.New(api.Config{AdminToken: o.AdminToken, Ledger: led, Scheduler: timers, Sealer: sealer, Egress: testenv.Loopback, PublicURL: o.PublicURL})
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	s := &Stack{API: httptest.NewServer(h), Proxy: httptest.NewServer(h)}
	t.Cleanup(s.API.Close)
	t.Cleanup(s.Proxy.Close)
	if s.Admin, err = client.New(s.API.URL, o.AdminToken); err != nil {
		t.Fatal(err)
	}
	s.Model = scriptedmodel.New(script...)
	t.Cleanup(s.Model.Close)
	s.Model.RequireAPIKey(OperatorKey)
	up := map[string]any{"url": s.Model.URL(), "credential": map[string]string{"type": "header", "name": "x-api-key", "value": OperatorKey}}
	if err := s.Admin.Do(context.Background(), "PUT", "/v1/model-upstream", up, nil); err != nil {
		t.Fatalf("PUT /v1/model-upstream: %v", err)
	}
	return s
}

// NewRun creates the policy and a run with the claude-code bundle, a $100
// budget; extra adds or replaces fields of POST /v1/sessions.
func (s *Stack) NewRun(t *testing.T, policy string, extra map[string]any) Run {
	t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.Admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(policy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	body := map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 100}}
	for k, v := range extra {
		body[k] = v
	}
	var ses struct{ ID, Token string }
	if err := s.Admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return Run{ses.ID, ses.Token}
}

// Events returns the run's whole timeline.
func (s *Stack) Events(t *testing.T, r Run) []client.Event {
	t.Helper()
	var all []client.Event
	after := int64(0)
	for {
		page, err := s.Admin.Events(context.Background(), r.ID, after, 0, 0)
		if err != nil {
			t.Fatalf("events of %s: %v", r.ID, err)
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 || page.Events[len(page.Events)-1].Seq >= page.LastSeq {
			return all
		}
		after = page.Events[len(page.Events)-1].Seq
	}
}

// Decision is the data of a tool.decision event.
type Decision struct {
	ToolCallID       string         `json:"tool_call_id"`
	ToolName         string         `json:"tool_name"`
	Decision         vocab.Decision `json:"decision"`
	Source           string         `json:"source"`
	RuleID           string         `json:"rule_id"`
	ApprovalID       string         `json:"approval_id"`
	Verdict          string         `json:"verdict"`
	RewrittenVerdict string         `json:"rewritten_verdict"`
}

// Ledger is what the suites read off a timeline.
type Ledger struct {
	Seqs      []int64
	Types     []string
	Requested map[string]string   // tool_call_id -> tool_name of tool.requested
	Decisions map[string]Decision // tool_call_id -> its last tool.decision
	PerCall   map[string]int      // tool_call_id -> how many tool.decision
	Count     map[string]int      // event type -> how many
	Reserved  map[string]bool     // request_id of budget.reserved
	Settled   map[string]string   // request_id -> settlement of budget.reconciled
}

// Ledger reads the run's timeline.
func (s *Stack) Ledger(t *testing.T, r Run) Ledger {
	t.Helper()
	v := Ledger{Requested: map[string]string{}, Decisions: map[string]Decision{}, PerCall: map[string]int{}, Count: map[string]int{}, Reserved: map[string]bool{}, Settled: map[string]string{}}
	for _, e := range s.Events(t, r) {
		v.Seqs = append(v.Seqs, e.Seq)
		v.Types = append(v.Types, e.Type)
		v.Count[e.Type]++
		var d struct {
			Decision
			RequestID  string `json:"request_id"`
			Settlement string `json:"settlement"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d %s: %v", e.Seq, e.Type, err)
		}
		switch e.Type {
		case "tool.requested":
			v.Requested[d.ToolCallID] = d.ToolName
		case "tool.decision":
			v.Decisions[d.ToolCallID] = d.Decision
			v.PerCall[d.ToolCallID]++
		case "budget.reserved":
			v.Reserved[d.RequestID] = true
		case "budget.reconciled":
			v.Settled[d.RequestID] = d.Settlement
		}
	}
	return v
}

// Gapless reports whether the timeline is seq 1..n without a hole.
func (v Ledger) Gapless() bool {
	for i, s := range v.Seqs {
		if s != int64(i+1) {
			return false
		}
	}
	return len(v.Seqs) > 0
}

// CheckModelTraffic asserts what every run's model traffic must show: each
// request the scripted upstream answered was admitted (budget.reserved) and
// reconciled from usage (budget.reconciled), and carried the operator's key,
// never the run's session token; and the model proxy found every tool
// result answering a call the gate allowed (no run.halted, no
// tool.unverified).
func (s *Stack) CheckModelTraffic(t *testing.T, r Run, v Ledger) {
	t.Helper()
	if n := v.Count["run.halted"] + v.Count["tool.unverified"]; n != 0 {
		t.Errorf("ledger: %d run.halted / tool.unverified; the runner's every tool result should answer a call the gate allowed", n)
	}
	n := 0
	for _, req := range s.Model.Requests() {
		if req.Path != "/v1/messages" {
			continue
		}
		n++
		if req.Credential() != OperatorKey || req.Status != 200 {
			t.Errorf("upstream request %d: credential %q, status %d; want the operator's key and 200", n, redactKey(req.Credential()), req.Status)
		}
		for name, vals := range req.Header {
			for _, val := range vals {
				if strings.Contains(val, r.Token) {
					t.Errorf("upstream request %d carried the session token in header %s", n, name)
				}
			}
		}
		if bytes.Contains(req.Body, []byte(r.Token)) {
			t.Errorf("upstream request %d carried the session token in its body", n)
		}
	}
	if n == 0 {
		t.Fatal("the scripted upstream saw no model request")
	}
	if len(v.Reserved) != n || len(v.Settled) != n {
		t.Errorf("ledger: %d budget.reserved, %d budget.reconciled for %d model requests; want one each per request", len(v.Reserved), len(v.Settled), n)
	}
	for id := range v.Reserved {
		if got := v.Settled[id]; got != "usage" {
			t.Errorf("request %s settled %q, want usage (reconciled from the response's usage)", id, got)
		}
	}
}

func redactKey(k string) string {
	if len(k) > 12 {
		return k[:12] + "…"
	}
	return k
}

// CheckExcludedDenied asserts that the gate denies each excluded tool at
// the capability stage, even in a run whose policy allows everything: a run
// freezes the claude-code bundle, which leaves them out.
func (s *Stack) CheckExcludedDenied(t *testing.T, excluded map[string]string) {
	t.Helper()
	r := s.NewRun(t, `{"name":"allow-all","default_verdict":"allow","rules":[]}`, nil)
	runner, err := client.New(s.API.URL, r.Token)
	if err != nil {
		t.Fatal(err)
	}
	for n := range excluded {
		ans, err := runner.Permission(context.Background(), r.ID, client.PermissionRequest{ToolCallID: "toolu_x_" + n, ToolName: n, Input: json.RawMessage(`{}`)}, 0)
		if err != nil || ans.Decision != vocab.Deny || ans.Source != "capability" {
			t.Errorf("permission for excluded %s under allow-all = %+v, %v; want deny, source capability", n, ans, err)
		}
	}
}

// ToolResult returns the tool_result for id that the agent sent the model.
func (s *Stack) ToolResult(t *testing.T, id string) scriptedmodel.ToolResult {
	t.Helper()
	for _, req := range s.Model.Requests() {
		for _, m := range req.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" && b.ToolUseID == id {
					return scriptedmodel.ToolResult{ToolUseID: b.ToolUseID, Content: b.Content, IsError: b.IsError}
				}
			}
		}
	}
	t.Fatalf("the model never received a tool_result for %s", id)
	return scriptedmodel.ToolResult{}
}

// Call is a model turn that calls tool with input as tool_use id.
func Call(id, tool string, input map[string]any) scriptedmodel.Step {
	return scriptedmodel.Respond(scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: id, Name: tool, Input: input}})
}

// Then is Call after the previous call's tool_result came back.
func Then(id, tool string, input map[string]any) scriptedmodel.Step {
	return scriptedmodel.AfterToolResult(func(scriptedmodel.ToolResult) scriptedmodel.Reply {
		return scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: id, Name: tool, Input: input}}
	})
}

// Bash is a Bash tool input running command.
func Bash(command string) map[string]any {
	return map[string]any{"command": command, "description": "Run " + strings.Fields(command)[0]}
}

// Project makes a project directory holding files.
func Project(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Exists reports whether dir holds name.
func Exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}
