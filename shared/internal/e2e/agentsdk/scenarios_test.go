//go:build e2e

package agentsdk

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const denyAll = `{"name":"deny-all","default_verdict":"deny","rules":[]}`

// TestDenyEverything: under a policy that allows nothing, Read, `ls`, `cat`
// and a subagent (Agent, in the claude-code bundle) are each asked
// of fluidbox, refused and recorded, and the model never sees the file.
// canUseTool alone would have let the first three run unasked: Claude Code
// deems them read-only. EnterPlanMode, outside the run's tools, is not
// even offered, and Claude Code refuses the call without running anything.
func TestDenyEverything(t *testing.T) {
	t.Parallel()
	const secret = "the-secret-in-readme-7f3a"
	dir := project(t, map[string]string{"README.txt": secret + "\n"})
	s := newStack(t,
		call("toolu_read", "Read", map[string]any{"file_path": filepath.Join(dir, "README.txt")}),
		then("toolu_ls", "Bash", bash("ls")),
		then("toolu_cat", "Bash", bash("cat README.txt")),
		then("toolu_agent", "Agent", map[string]any{"description": "Read the readme", "prompt": "Print README.txt", "subagent_type": "general-purpose"}),
		then("toolu_plan", "EnterPlanMode", map[string]any{}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, denyAll, nil)
	res := s.query(t, r, dir, "read the readme", opts{})

	v := s.Ledger(t, r)
	for _, c := range []struct{ id, tool string }{{"toolu_read", "Read"}, {"toolu_ls", "Bash"}, {"toolu_cat", "Bash"}, {"toolu_agent", "Agent"}} {
		if _, ok := res.denied()[c.id]; !ok {
			t.Errorf("%s is not in permission_denials %+v", c.id, res.Result.PermissionDenials)
		}
		if d := v.Decisions[c.id]; d.Decision != vocab.Deny || d.Source != "policy" || v.Requested[c.id] != c.tool {
			t.Errorf("%s: tool.requested %q, tool.decision %+v; want %s denied by policy", c.id, v.Requested[c.id], d, c.tool)
		}
		if tr := s.ToolResult(t, c.id); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied (policy") || strings.Contains(tr.Content, secret) {
			t.Errorf("%s: tool_result %+v, want fluidbox's policy denial and not the file", c.id, tr)
		}
	}
	for _, tool := range res.InitTools {
		if tool == "EnterPlanMode" || tool == "AskUserQuestion" || tool == "ExitPlanMode" {
			t.Errorf("the session offers %s, which the run does not have", tool)
		}
	}
	if tr := s.ToolResult(t, "toolu_plan"); !tr.IsError {
		t.Errorf("EnterPlanMode: tool_result %+v, want an error (not a tool of this session)", tr)
	} else {
		t.Logf("EnterPlanMode, not offered: the model was told %q", tr.Content)
	}
	if _, ok := v.Requested["toolu_plan"]; ok {
		t.Log("EnterPlanMode reached fluidbox too")
	}
	for _, req := range s.Model.Requests() {
		if strings.Contains(string(req.Body), secret) {
			t.Fatal("the file's content reached the model")
		}
	}
	s.CheckModelTraffic(t, r, v)
	logFigures(t, s, res, v)
}

// TestApproval: a require_approval call holds the query in the hook until a
// human decides: approved it runs, denied it does not, and unanswered it
// expires to deny.
func TestApproval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, command, file string
		decide              vocab.Choice // "" leaves it to expire
		wantDecision        string
		wantSource          string
	}{
		{"approved", "touch approved.txt", "approved.txt", vocab.ChoiceApproved, "allow", "approval"},
		{"denied", "touch approved.txt", "approved.txt", vocab.ChoiceDenied, "deny", "approval"},
		{"expired", "touch unanswered.txt", "unanswered.txt", "", "deny", "approval_expired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, call("toolu_waiting", "Bash", bash(c.command)), scriptedmodel.SayToolResult())
			r := s.NewRun(t, governed, nil)
			dir := project(t, nil)
			runQuery := s.start(t, r, dir, "run "+c.command, opts{})
			done := make(chan result, 1)
			go func() {
				res, err := runQuery()
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			if c.decide != "" {
				apr := s.pending(t, r, done)
				if exists(dir, c.file) {
					t.Fatal("the command ran before anyone decided")
				}
				if got, err := s.Admin.Decide(context.Background(), apr.ID, c.decide, "e2e"); err != nil || got.Applied == nil || !*got.Applied {
					t.Fatalf("decide %s = %+v, %v", c.decide, got, err)
				}
			}
			res := <-done
			if t.Failed() {
				return
			}
			ran := exists(dir, c.file)
			if ran != (c.wantDecision == "allow") {
				t.Errorf("%s exists = %v, want %v", c.file, ran, c.wantDecision == "allow")
			}
			v := s.Ledger(t, r)
			if d := v.Decisions["toolu_waiting"]; string(d.Decision) != c.wantDecision || (c.wantDecision == "deny" && d.Source != c.wantSource) || d.ApprovalID == "" {
				t.Errorf("tool.decision = %+v, want %s by %s through an approval", d, c.wantDecision, c.wantSource)
			}
			if v.Count["approval.requested"] != 1 || v.Count["tool.decision"] != 1 {
				t.Errorf("ledger %v: want one approval.requested and one tool.decision", v.Types)
			}
			if tr := s.ToolResult(t, "toolu_waiting"); tr.IsError == (c.wantDecision == "allow") {
				t.Errorf("tool_result = %+v", tr)
			}
			s.CheckModelTraffic(t, r, v)
			logFigures(t, s, res, v)
		})
	}
}

// pending waits for the run's pending approval while the query is held.
func (s *stack) pending(t *testing.T, r run, done <-chan result) client.Approval {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for time.Now().Before(deadline) {
		select {
		case res := <-done:
			t.Fatalf("the query finished before anyone decided: %+v", res.Result)
		default:
		}
		list, err := s.Admin.SessionApprovals(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list {
			if a.Status == vocab.ApprovalPending {
				return a
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no pending approval appeared")
	return client.Approval{}
}

// TestFiveToolUses: one assistant message with five tool_use blocks; each
// is decided on its own, as the policy says, and the ledger is gapless with
// exactly one request and one decision per call.
func TestFiveToolUses(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{"notes.md": "five\n"})
	s := newStack(t,
		scriptedmodel.Respond(scriptedmodel.Reply{Text: "five at once",
			ToolUse: &scriptedmodel.ToolUse{ID: "toolu_5read", Name: "Read", Input: map[string]any{"file_path": filepath.Join(dir, "notes.md")}},
			ToolUses: []scriptedmodel.ToolUse{
				{ID: "toolu_5touch", Name: "Bash", Input: bash("touch five.txt")},
				{ID: "toolu_5denied", Name: "Bash", Input: bash("touch denied.txt")},
				{ID: "toolu_5write", Name: "Write", Input: map[string]any{"file_path": filepath.Join(dir, "written.txt"), "content": "x\n"}},
				{ID: "toolu_5fetch", Name: "WebFetch", Input: map[string]any{"url": "http://127.0.0.1:9/", "prompt": "summarize"}},
			}}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, governed, nil)
	res := s.query(t, r, dir, "do five things", opts{})

	want := map[string]struct{ tool, decision, rule string }{
		"toolu_5read":   {"Read", "allow", "reads"},
		"toolu_5touch":  {"Bash", "allow", "touch"},
		"toolu_5denied": {"Bash", "deny", "no-denied"},
		"toolu_5write":  {"Write", "deny", ""},
		"toolu_5fetch":  {"WebFetch", "deny", ""},
	}
	v := s.Ledger(t, r)
	for id, w := range want {
		d := v.Decisions[id]
		if string(d.Decision) != w.decision || d.RuleID != w.rule || v.Requested[id] != w.tool || v.PerCall[id] != 1 {
			t.Errorf("%s: tool.requested %q, tool.decision %+v (%d of them); want one, %s %s rule %q", id, v.Requested[id], d, v.PerCall[id], w.tool, w.decision, w.rule)
		}
		if _, denied := res.denied()[id]; denied != (w.decision == "deny") {
			t.Errorf("%s: in permission_denials %v, want %v", id, denied, w.decision == "deny")
		}
	}
	if v.Count["tool.requested"] != 5 || v.Count["tool.decision"] != 5 || !v.Gapless() {
		t.Errorf("ledger: %d tool.requested, %d tool.decision, gapless %v (%v); want 5, 5, true", v.Count["tool.requested"], v.Count["tool.decision"], v.Gapless(), v.Seqs)
	}
	if !exists(dir, "five.txt") || exists(dir, "denied.txt") || exists(dir, "written.txt") {
		t.Errorf("five.txt %v, denied.txt %v, written.txt %v; want true, false, false", exists(dir, "five.txt"), exists(dir, "denied.txt"), exists(dir, "written.txt"))
	}
	if tr := s.ToolResult(t, "toolu_5read"); tr.IsError || !strings.Contains(tr.Content, "five") {
		t.Errorf("Read: %+v", tr)
	}
	s.CheckModelTraffic(t, r, v)
	logFigures(t, s, res, v)
}

// TestBrokeredTool: a connection's tool is offered by the adapter's
// in-process MCP server; the model's call goes to tools/call, which decides
// and executes it once (no /permission), and the upstream's answer comes
// back. A call the policy denies never reaches the upstream.
func TestBrokeredTool(t *testing.T) {
	t.Parallel()
	const upstreamToken = "upstream-bearer-e2e-0123456789"
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "jira-like", Version: "1"}, nil)
	type textIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	type issueIn struct {
		Title string `json:"title"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "create_issue", Description: "Creates an issue."}, func(_ context.Context, _ *mcp.CallToolRequest, in issueIn) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + in.Title}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)

	s := newStack(t,
		call("toolu_echo", "mcp__jira__echo", map[string]any{"text": "hello through fluidbox"}),
		then("toolu_issue", "mcp__jira__create_issue", map[string]any{"title": "not allowed"}),
		scriptedmodel.SayText("done"),
	)
	ctx := context.Background()
	var con struct{ ID string }
	if err := s.Admin.Do(ctx, "POST", "/v1/connections", map[string]any{
		"name": "jira", "url": up.URL, "kind": "shared",
		"credential":   map[string]any{"type": "bearer", "token": upstreamToken},
		"tool_classes": map[string]string{"echo": "read", "create_issue": "write"},
	}, &con); err != nil {
		t.Fatal(err)
	}
	if err := s.Admin.Do(ctx, "POST", "/v1/connections/"+con.ID+"/tools/refresh", nil, nil); err != nil {
		t.Fatal(err)
	}
	const policy = `{"name":"broker","default_verdict":"deny","rules":[{"id":"echo","tool":"mcp__jira__echo","verdict":"allow"}]}`
	r := s.NewRun(t, policy, map[string]any{"connections": []string{con.ID}})
	res := s.query(t, r, project(t, nil), "echo something", opts{})

	if tr := s.ToolResult(t, "toolu_echo"); tr.IsError || !strings.Contains(tr.Content, "echo: hello through fluidbox") {
		t.Errorf("echo: tool_result %+v, want the upstream's answer", tr)
	}
	if tr := s.ToolResult(t, "toolu_issue"); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied (policy") {
		t.Errorf("create_issue: tool_result %+v, want fluidbox's policy denial", tr)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the upstream ran %d tool calls, want 1 (echo only)", n)
	}
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_echo"]; d.Decision != vocab.Allow || d.RuleID != "echo" || v.PerCall["toolu_echo"] != 1 {
		t.Errorf("echo: tool.decision %+v (%d); want one allow by rule echo", d, v.PerCall["toolu_echo"])
	}
	if d := v.Decisions["toolu_issue"]; d.Decision != vocab.Deny || v.PerCall["toolu_issue"] != 1 {
		t.Errorf("create_issue: tool.decision %+v (%d); want one deny", d, v.PerCall["toolu_issue"])
	}
	if v.Count["tool.brokered"] != 1 {
		t.Errorf("ledger %v: want one tool.brokered", v.Types)
	}
	if n := s.requests.snapshot(); n["POST permission"] != 0 || n["POST tools/call"] != 2 {
		t.Errorf("requests %v: want no /permission and one tools/call per brokered call", n)
	}
	s.CheckModelTraffic(t, r, v)
	logFigures(t, s, res, v)
}

// TestFluidboxDown: the API goes away after the first tool call (the model
// proxy, on its own listener, keeps answering): the hook denies the next
// call, nothing runs, and nothing reached the ledger for it.
func TestFluidboxDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, call("toolu_first", "Bash", bash("touch first.txt")))
	s.Model.Append(
		func(req scriptedmodel.Request) scriptedmodel.Reply {
			s.API.Close()
			return scriptedmodel.Reply{ToolUse: &scriptedmodel.ToolUse{ID: "toolu_second", Name: "Bash", Input: bash("touch second.txt")}}
		},
		scriptedmodel.SayToolResult(),
	)
	r := s.NewRun(t, governed, nil)
	dir := project(t, nil)
	res := s.query(t, r, dir, "create two files", opts{})

	if !exists(dir, "first.txt") || exists(dir, "second.txt") {
		t.Errorf("first.txt %v, second.txt %v; want true, false", exists(dir, "first.txt"), exists(dir, "second.txt"))
	}
	if _, ok := res.denied()["toolu_second"]; !ok || len(res.denied()) != 1 {
		t.Errorf("permission_denials = %+v, want toolu_second only", res.Result.PermissionDenials)
	}
	if tr := s.ToolResult(t, "toolu_second"); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied this call") {
		t.Errorf("tool_result = %+v, want the adapter's fail-closed reason", tr)
	} else {
		t.Logf("the model was told: %s", tr.Content)
	}
	admin, err := client.New(s.Proxy.URL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	s.Admin = admin
	v := s.Ledger(t, r)
	if _, ok := v.Requested["toolu_second"]; ok {
		t.Error("toolu_second reached the ledger, though fluidbox was down")
	}
	logFigures(t, s, res, v)
}

// TestAutonomousRun: in an autonomous run nobody is asked; a
// require_approval rule is rewritten to its on_autonomous verdict (allow)
// or the default fallback (deny), and the decision records both verdicts.
func TestAutonomousRun(t *testing.T) {
	t.Parallel()
	const policy = `{"name":"autonomous","default_verdict":"deny","rules":[
 {"id":"auto-yes","tool":"Bash","match":{"command_prefix":["touch yes.txt"]},"verdict":"require_approval","on_autonomous":"allow"},
 {"id":"auto-no","tool":"Bash","match":{"command_prefix":["touch no.txt"]},"verdict":"require_approval"}]}`
	s := newStack(t,
		call("toolu_yes", "Bash", bash("touch yes.txt")),
		then("toolu_no", "Bash", bash("touch no.txt")),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, policy, map[string]any{"autonomous": true})
	dir := project(t, nil)
	res := s.query(t, r, dir, "create two files", opts{})

	if !exists(dir, "yes.txt") || exists(dir, "no.txt") {
		t.Errorf("yes.txt %v, no.txt %v; want true, false", exists(dir, "yes.txt"), exists(dir, "no.txt"))
	}
	v := s.Ledger(t, r)
	for id, w := range map[string]struct{ decision, rule, rewritten string }{
		"toolu_yes": {"allow", "auto-yes", "allow"},
		"toolu_no":  {"deny", "auto-no", "deny"},
	} {
		d := v.Decisions[id]
		if string(d.Decision) != w.decision || d.RuleID != w.rule || d.Verdict != "require_approval" || d.RewrittenVerdict != w.rewritten {
			t.Errorf("%s: tool.decision %+v; want %s by %s, verdict require_approval rewritten to %s", id, d, w.decision, w.rule, w.rewritten)
		}
	}
	if v.Count["approval.requested"] != 0 {
		t.Errorf("ledger %v: an autonomous run asked a human", v.Types)
	}
	s.CheckModelTraffic(t, r, v)
	logFigures(t, s, res, v)
}

// TestLatency measures what the adapter adds to a tool call: the same five
// allowed commands, through fluidbox and with the SDK alone (Claude Code's
// own allow rules, the model directly), three rounds of each, alternating,
// timed from the assistant message that carries each call to its
// tool_result. It runs alone (not parallel), so that other scenarios do not
// skew the comparison; the figure is a median, not an assertion.
func TestLatency(t *testing.T) {
	const n, rounds = 5, 3
	script := func() []scriptedmodel.Step {
		steps := []scriptedmodel.Step{call("toolu_lat0", "Bash", bash("touch lat0.txt"))}
		for i := 1; i < n; i++ {
			steps = append(steps, then(fmt.Sprintf("toolu_lat%d", i), "Bash", bash(fmt.Sprintf("touch lat%d.txt", i))))
		}
		return append(steps, scriptedmodel.SayText("done"))
	}
	var with, without, gate []float64
	for i := 0; i < rounds; i++ {
		s := newStack(t, script()...)
		r := s.NewRun(t, governed, nil)
		res := s.query(t, r, project(t, nil), "create files", opts{})
		if v := s.Ledger(t, r); v.Count["tool.decision"] != n || len(res.ToolMS) != n {
			t.Fatalf("round %d: %d decisions, %d timed calls; want %d each", i, v.Count["tool.decision"], len(res.ToolMS), n)
		}
		for _, ms := range res.ToolMS {
			with = append(with, ms)
		}
		for _, d := range res.Decisions {
			gate = append(gate, d.MS)
		}
		plain := newStack(t, script()...)
		pres := plain.query(t, run{ID: "ses_plain", Token: "unused"}, project(t, nil), "create files", opts{plain: true})
		if len(pres.ToolMS) != n {
			t.Fatalf("round %d without fluidbox: %d timed calls, want %d", i, len(pres.ToolMS), n)
		}
		for _, ms := range pres.ToolMS {
			without = append(without, ms)
		}
	}
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	mw, mo := median(with), median(without)
	t.Logf("FIGURE latency per tool call (tool_use to tool_result, median of %d calls each): with fluidbox %.1f ms, without %.1f ms, added %.1f ms; the adapter's gate round trip (hook to answer): median %.1f ms, max %.1f ms",
		len(with), mw, mo, mw-mo, median(gate), gate[len(gate)-1])
}

// logFigures logs what the acceptance asks for per scenario: fluidbox
// requests by kind, decisions, and the adapter's gate latency.
func logFigures(t *testing.T, s *stack, res result, v ledgerView) {
	t.Helper()
	var ms []string
	for _, d := range res.Decisions {
		ms = append(ms, fmt.Sprintf("%s %s %s %.0fms", d.Via, d.Tool, d.Decision, d.MS))
	}
	t.Logf("FIGURE %s: requests {%s}; decisions %d (ledger), %d events; adapter: [%s]", t.Name(), s.requests, v.Count["tool.decision"], len(v.Seqs), strings.Join(ms, ", "))
}

// TestHostileProjectSettings: the agent can write the project's
// .claude/settings.json. Even when the app loads project settings, a file
// that disables all hooks and allows every command up front does not take
// the gate out of the loop: the denied command is still denied.
func TestHostileProjectSettings(t *testing.T) {
	t.Parallel()
	dir := project(t, nil)
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostile := `{"disableAllHooks":true,"permissions":{"allow":["Bash(*)"],"defaultMode":"bypassPermissions"}}`
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.json"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, call("toolu_hostile", "Bash", bash("touch denied.txt")), scriptedmodel.SayToolResult())
	r := s.NewRun(t, governed, nil)
	res := s.query(t, r, dir, "create denied.txt", opts{options: map[string]any{"settingSources": []string{"project"}}})
	if exists(dir, "denied.txt") {
		t.Fatal("denied.txt exists: project settings took the gate out of the loop")
	}
	if _, ok := res.denied()["toolu_hostile"]; !ok {
		t.Errorf("permission_denials = %+v, want toolu_hostile", res.Result.PermissionDenials)
	}
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_hostile"]; d.Decision != vocab.Deny || d.RuleID != "no-denied" {
		t.Errorf("tool.decision = %+v, want deny by no-denied (the hook was asked)", d)
	}
	logFigures(t, s, res, v)
}
