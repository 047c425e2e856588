package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/export"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/otlpreceiver"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/sweep"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/telemetry/otlp"
)

// The sweep's canaries. A secret canary (a credential, a prompt, a model
// response, a webhook's payload or header) may appear nowhere the control
// plane keeps or says anything. A tool-input canary may appear only in an
// approval row's attributes: an approval keeps the call's input whole, by
// design, so the human deciding it sees what they approve. Never in a key,
// the ledger, a log line, a notification or an error body.
const (
	secretMark = "SECRETCANARY"
	toolMark   = "TOOLCANARY"
)

var canaryRE = regexp.MustCompile(`(SECRETCANARY|TOOLCANARY)-[a-z0-9-]+`)

// canaryPolicy: a require_approval rule without command_prefix (its scope
// key must come from the parse, never the raw command), asks for Write and
// Edit, a short-lived Edit approval for the sweep, and the broker's tools.
const canaryPolicy = `{"name":"canary","default_verdict":"deny","rules":[
 {"id":"read","tool":"Read","verdict":"allow"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
 {"id":"ask-curl","tool":"Bash","match":{"command_prefix":["curl"]},"verdict":"require_approval","scope":"session"},
 {"id":"ask-bash","tool":"Bash","verdict":"require_approval","scope":"session"},
 {"id":"ask-write","tool":"Write","verdict":"require_approval"},
 {"id":"ask-edit","tool":"Edit","verdict":"require_approval","ttl_seconds":1},
 {"id":"echo","tool":"mcp__jira__echo","verdict":"allow"},
 {"id":"issues","tool":"mcp__jira__create_issue","verdict":"require_approval"}]}`

// errorBodies keeps every response the API answered with a status >= 400.
type errorBodies struct {
	mu     sync.Mutex
	bodies []string
}

func (e *errorBodies) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &errRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status >= 400 {
			e.mu.Lock()
			e.bodies = append(e.bodies, fmt.Sprintf("%d %s %s: %s", rec.status, r.Method, r.URL.Path, rec.body.String()))
			e.mu.Unlock()
		}
	})
}

type errRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *errRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *errRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 400 {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

func (r *errRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// details collects the EventBridge details the notifier would publish.
type details struct {
	mu  sync.Mutex
	out []string
}

func (d *details) Publish(_ context.Context, entries []notify.Entry) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range entries {
		b, err := json.Marshal(e.Detail)
		if err != nil {
			return err
		}
		d.out = append(d.out, string(e.Type)+" "+string(b))
	}
	return nil
}

// canarySweep is TestCanarySweep's stack and what it keeps to sweep.
type canarySweep struct {
	t       *testing.T
	ctx     context.Context
	s       *brokerStack
	led     *ledger.Ledger
	log     *slog.Logger
	logs    *syncBuffer
	metrics *syncBuffer // CloudWatch metrics (EMF lines)
	notes   *details
	errs    *errorBodies
	otlpRcv *otlpreceiver.Receiver
	tel     *otlp.Provider
	pol     string
	id, tok string // the gate's run
	bid     string // the brokered run
}

// TestCanarySweep runs every flow with canaries in everything a sandbox,
// an upstream or GitHub sends, then reads every stored item, every ledger
// event, every log line, every notification and every error body.
func TestCanarySweep(t *testing.T) {
	t.Parallel()
	c := newCanarySweep(t)
	c.gateFlows()
	c.refusedRequests()
	c.expireEdit()
	c.brokeredCall()
	c.modelCall()
	c.githubDelivery()

	// Now read everything.
	t.Run("items", c.sweepItems)
	t.Run("ledger", c.sweepLedger)
	t.Run("export", c.sweepExport)
	t.Run("logs and metrics", c.sweepLogsAndMetrics)
	t.Run("notifications", c.sweepNotifications)
	t.Run("telemetry", c.sweepTelemetry)
	t.Run("error bodies", c.sweepErrorBodies)
}

func newCanarySweep(t *testing.T) *canarySweep {
	ctx := context.Background()
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Code that logs to the default logger is captured too. Other tests of
	// the package may log here meanwhile; their text holds no canary of
	// this test.
	prev := slog.Default()
	slog.SetDefault(log)
	t.Cleanup(func() { slog.SetDefault(prev) })
	notes := &details{}
	errs := &errorBodies{}
	// Telemetry exports to a receiver on loopback; what it gets is swept too.
	otlpRcv := otlpreceiver.Start(t)
	tel, err := otlp.New(ctx, otlpRcv.URL, "fluidbox-canary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	// CloudWatch metrics (EMF lines) are written here, and swept too.
	metrics := &syncBuffer{}
	h := api.New(api.Config{Egress: testenv.Loopback, Telemetry: telemetry.WithCloudWatch(tel.Telemetry(), metrics, func(string) string { return "" }),
		AdminToken: adminToken, Ledger: led, Logger: log, Sealer: localSealer(t),
		Observer: notify.NewHandler(notes, nil, log).Observer(), GitHubWebhookSecret: webhookSecret,
	})
	srv := httptest.NewServer(errs.wrap(roles.Serve(h)))
	t.Cleanup(srv.Close)
	s := &brokerStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, logs: logs, responses: &syncBuffer{}}
	return &canarySweep{t: t, ctx: ctx, s: s, led: led, log: log, logs: logs, metrics: metrics,
		notes: notes, errs: errs, otlpRcv: otlpRcv, tel: tel, pol: s.policy(canaryPolicy)}
}

// gateFlows: allow, deny, pending; approvals decided; a session grant
// used and revoked.
func (c *canarySweep) gateFlows() {
	t, s := c.t, c.s
	c.id, c.tok = s.gateRun(c.pol, runOpts{budget: 1})
	id, tok := c.id, c.tok
	for _, tc := range []struct {
		call, want string
		input      map[string]any
	}{
		{"c-allow", "allow", map[string]any{"file_path": "/src/" + toolMark + "-read", "offset": 1, "limit": 2}},
		{"c-deny", "deny", map[string]any{"command": "git push origin " + toolMark + "-deny", "description": toolMark + "-description"}},
	} {
		tool := "Bash"
		if tc.want == "allow" {
			tool = "Read"
		}
		if r := s.ask(id, tok, tc.call, tool, tc.input); r.body["decision"] != tc.want {
			t.Fatalf("%v = %s, want %s", tc.input, r.raw, tc.want)
		}
	}
	c.sessionGrant()

	write := s.ask(id, tok, "c-write", "Write", map[string]any{"file_path": "/src/" + toolMark + "-path", "content": toolMark + "-content"})
	if write.body["decision"] != "pending" {
		t.Fatalf("Write = %s, want pending", write.raw)
	}
	s.must(200, "POST", "/v1/approvals/"+write.body["approval_id"].(string)+"/decision", adminToken, map[string]any{"decision": "denied", "reason": "no"})
	edit := s.ask(id, tok, "c-edit", "Edit", map[string]any{"file_path": "/src/" + toolMark + "-edit", "old_string": toolMark + "-old", "new_string": toolMark + "-new"})
	if edit.body["decision"] != "pending" {
		t.Fatalf("Edit = %s, want pending", edit.raw)
	}
	// An input the schema refuses: the deny's reason goes to the caller,
	// never the ledger.
	if r := s.ask(id, tok, "c-bad", "Write", map[string]any{"file_path": toolMark + "-bad", "contents": toolMark + "-bad"}); r.body["decision"] != "deny" {
		t.Fatalf("a Write with a wrong property = %s, want deny", r.raw)
	}
}

// sessionGrant: a curl with a bearer token approved for the session, the
// grant used by the next curl, then revoked.
func (c *canarySweep) sessionGrant() {
	t, s, id, tok := c.t, c.s, c.id, c.tok
	curl := func(c string) string {
		return "curl -H 'Authorization: Bearer sk-live-" + toolMark + "-" + c + "' https://example.invalid/" + toolMark + "-url"
	}
	apr := s.pending(id, tok, "c-curl", curl("bearer"))
	if got := s.decide(apr, "approved_session"); got["status"] != "approved_session" {
		t.Fatalf("decision = %v", got)
	}
	if r := s.ask(id, tok, "c-curl-again", "Bash", bash(curl("again"))); r.body["decision"] != "allow" {
		t.Errorf("the same program under the run's grant = %s, want allow", r.raw)
	}
	grants := s.must(200, "GET", "/v1/sessions/"+id+"/grants", adminToken, nil)["grants"].([]any)
	if len(grants) != 1 {
		t.Fatalf("grants = %v", grants)
	}
	// The key is the asking rule's prefix, not the command line with its
	// bearer token.
	scope := grants[0].(map[string]any)["scope_key"].(string)
	if scope != "Bash:curl" {
		t.Errorf("scope key = %q, want Bash:curl", scope)
	}
	s.must(200, "DELETE", "/v1/sessions/"+id+"/grants/"+url.PathEscape(scope), adminToken, nil)
}

// refusedRequests: requests the API refuses; their error bodies are read
// by the sweep.
func (c *canarySweep) refusedRequests() {
	t, s, id, tok := c.t, c.s, c.id, c.tok
	if r := s.ask(id, tok, "c-str", "Bash", toolMark+"-not-an-object"); r.status != 400 {
		t.Fatalf("a string input = %d %s, want 400", r.status, r.raw)
	}
	if r := s.ask(id, secretMark+"-forged-token", "c-forged", "Bash", bash(toolMark+"-forged")); r.status != 401 {
		t.Fatalf("a forged token = %d %s, want 401", r.status, r.raw)
	}
}

// expireEdit: the sweep expires the Edit's approval (ttl 1 s) an hour
// later.
func (c *canarySweep) expireEdit() {
	later := func() time.Time { return time.Now().Add(time.Hour) }
	sweeper := sweep.Sweeper{Approvals: approval.NewService(c.led, later), Inputs: elicitation.NewService(c.led, later, c.log),
		Reservations: admission.New(c.led, nil, later), ReservationsAfter: 2 * time.Hour, Now: later, Log: c.log}
	if got, err := sweeper.Sweep(c.ctx); err != nil || got.ExpiredApprovals < 1 {
		c.t.Fatalf("Sweep = %+v, %v; want the Edit's approval expired", got, err)
	}
}

// brokeredCall: a brokered call to an MCP server from the official Go SDK.
func (c *canarySweep) brokeredCall() {
	t, s := c.t, c.s
	up := newMCPUpstream(t, secretMark+"-connection-token")
	con := s.connection("jira", up.url(), "shared", secretMark+"-connection-token")
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	bid, btok := s.brokeredRun(c.pol, con, "")
	c.bid = bid
	if r := s.toolsCall(bid, btok, "b-echo", "mcp__jira__echo", map[string]any{"text": toolMark + "-echo"}); r.status != 200 || resultText(t, r) != toolMark+"-echo" {
		t.Fatalf("brokered echo = %d %s", r.status, r.raw)
	}
	if r := s.toolsCall(bid, btok, "b-issue", "mcp__jira__create_issue", map[string]any{"title": toolMark + "-issue"}); r.body["decision"] != "pending" && r.status != 202 {
		t.Fatalf("brokered create_issue = %d %s, want it pending", r.status, r.raw)
	}
}

// modelCall: the model proxy against a loopback upstream.
func (c *canarySweep) modelCall() {
	t, s := c.t, c.s
	model := scriptedmodel.New(scriptedmodel.SayText(secretMark + "-model-reply"))
	defer model.Close()
	model.RequireAPIKey(secretMark + "-upstream-key")
	s.must(200, "PUT", "/v1/model-upstream", adminToken, map[string]any{
		"url": model.URL(), "credential": map[string]any{"type": "header", "name": "x-api-key", "value": secretMark + "-upstream-key"}})
	p := &proxyStack{stack: s.stack, logs: &lockedBuffer{}}
	params := userMessage(secretMark + "-prompt")
	params.System[0].Text = secretMark + "-system"
	client := p.sdk(c.id, c.tok)
	msg, err := client.Messages.New(c.ctx, params)
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != secretMark+"-model-reply" {
		t.Fatalf("model call = %+v, %v", msg, err)
	}
	p.waitSettled(c.id, 1)
}

// githubDelivery: a GitHub delivery with canaries in the payload and a
// header.
func (c *canarySweep) githubDelivery() {
	t, s := c.t, c.s
	s.trigger("Codertocat/Hello-World", nil)
	var pr map[string]any
	if err := json.Unmarshal(payload(t, "same_repo.opened.json"), &pr); err != nil {
		t.Fatal(err)
	}
	pull := pr["pull_request"].(map[string]any)
	pull["title"], pull["body"] = secretMark+"-pr-title", secretMark+"-pr-body"
	body, _ := json.Marshal(pr)
	req, _ := http.NewRequest("POST", s.url+"/v1/triggers/github", bytes.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/" + secretMark + "-agent",
		"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "canary-delivery-1",
		"X-Hub-Signature-256": sign(webhookSecret, body), "X-Canary": secretMark + "-header",
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("GitHub delivery = %d, want 201", resp.StatusCode)
	}
}

// sweepItems: no secret canary in any item, no tool-input canary in a key
// or outside an approval row.
func (c *canarySweep) sweepItems(t *testing.T) {
	approvalRows := 0
	for _, it := range c.s.items() {
		pk, sk := unquoteAttr(it["pk"]), unquoteAttr(it["sk"])
		isApproval := strings.HasPrefix(pk, "RUN#") && strings.HasPrefix(sk, "APR#")
		for _, name := range sortedAttrs(it) {
			checkAttrCanaries(t, it[name], fmt.Sprintf("item %s / %s, attribute %s", pk, sk, name),
				name == "pk" || name == "sk" || strings.HasPrefix(name, "gsi"), isApproval)
		}
		if isApproval && strings.Contains(fmt.Sprint(it), toolMark) {
			approvalRows++
		}
	}
	// The approvals (curl, Write, Edit, create_issue) do hold their inputs:
	// the check above is looking at the rows that carry them.
	if approvalRows < 4 {
		t.Errorf("%d approval rows hold their call's input, want at least 4", approvalRows)
	}
}

// checkAttrCanaries checks one attribute's value v.
func checkAttrCanaries(t *testing.T, v, where string, isKey, isApproval bool) {
	t.Helper()
	for _, c := range canaryRE.FindAllString(v, -1) {
		switch {
		case strings.HasPrefix(c, secretMark):
			t.Errorf("%s holds %s", where, c)
		case isKey:
			t.Errorf("%s (a key) holds %s", where, c)
		case !isApproval:
			t.Errorf("%s holds %s; only approval rows keep a call's input", where, c)
		}
	}
}

func (c *canarySweep) sweepLedger(t *testing.T) {
	for _, run := range []string{c.id, c.bid} {
		for _, e := range c.s.ledger(run) {
			if m := canaryRE.FindString(string(e.Data)); m != "" {
				t.Errorf("ledger event %s of %s holds %s: %s", e.Type, run, m, e.Data)
			}
		}
	}
}

// sweepExport: the ledger as the stack delivers it to S3, written with the
// export function's role.
func (c *canarySweep) sweepExport(t *testing.T) {
	objects := &memBucket{objects: map[string][]byte{}}
	x := export.New(c.s.st, objects, time.Now, c.log)
	for _, run := range []string{c.id, c.bid} {
		if n, err := x.Run(roles.As(c.ctx, "ExportFunction"), run); err != nil || n == 0 {
			t.Errorf("export of %s = %d events, %v", run, n, err)
		}
	}
	for key, body := range objects.objects {
		if m := canaryRE.FindString(string(body)); m != "" {
			t.Errorf("exported object %s holds %s", key, m)
		}
	}
}

func (c *canarySweep) sweepLogsAndMetrics(t *testing.T) {
	for _, line := range strings.Split(c.logs.String(), "\n") {
		if m := canaryRE.FindString(line); m != "" {
			t.Errorf("log line holds %s: %s", m, line)
		}
	}
	if !strings.Contains(c.metrics.String(), `"Decisions":1`) {
		t.Errorf("no decision was written as a CloudWatch metric: %q", c.metrics.String())
	}
	if m := canaryRE.FindString(c.metrics.String()); m != "" {
		t.Errorf("CloudWatch metrics hold %s", m)
	}
}

func (c *canarySweep) sweepNotifications(t *testing.T) {
	c.notes.mu.Lock()
	defer c.notes.mu.Unlock()
	if len(c.notes.out) == 0 {
		t.Error("no notification was published; the sweep did not see them")
	}
	for _, d := range c.notes.out {
		if m := canaryRE.FindString(d); m != "" {
			t.Errorf("notification holds %s: %s", m, d)
		}
	}
}

// sweepTelemetry: the spans and metrics exported over OTLP are there, say
// what happened, and hold no canary.
func (c *canarySweep) sweepTelemetry(t *testing.T) {
	if err := c.tel.Flush(c.ctx); err != nil {
		t.Fatal(err)
	}
	spans := map[string]int{}
	for _, sp := range c.otlpRcv.Spans() {
		spans[sp.Name]++
		a := otlpreceiver.Attrs(sp.Attributes)
		if sp.Name == "fluidbox.permission.decide" && a["fluidbox.tool_call.id"] == "c-deny" &&
			(a["fluidbox.decision"] != "deny" || a["fluidbox.source"] != "policy" || a["fluidbox.rule.id"] != "no-push" || a["fluidbox.run.id"] != c.id) {
			t.Errorf("the c-deny decision's span = %v, want deny by policy rule no-push of %s", a, c.id)
		}
		if sp.Name == "fluidbox.broker.call" && (a["fluidbox.tool.name"] != "mcp__jira__echo" || a["fluidbox.outcome"] != "ok") {
			t.Errorf("brokered call span = %v, want mcp__jira__echo, ok", a)
		}
	}
	for _, name := range []string{"fluidbox.permission.decide", "fluidbox.approval.wait", "fluidbox.broker.call", "fluidbox.model.request"} {
		if spans[name] == 0 {
			t.Errorf("no %s span was exported (got %v)", name, spans)
		}
	}
	if m := c.otlpRcv.Metrics(); m["fluidbox.decisions"] == nil || m["fluidbox.approval.wait"] == nil || m["fluidbox.broker.duration"] == nil || m["fluidbox.model.tokens"] == nil {
		t.Errorf("exported metrics = %v, want decisions, approval wait, broker duration and model tokens", m)
	}
	if m := canaryRE.FindString(c.otlpRcv.Dump()); m != "" {
		t.Errorf("exported telemetry holds %s", m)
	}
}

func (c *canarySweep) sweepErrorBodies(t *testing.T) {
	c.errs.mu.Lock()
	defer c.errs.mu.Unlock()
	if len(c.errs.bodies) == 0 {
		t.Error("no error body was recorded; the sweep did not see them")
	}
	for _, b := range c.errs.bodies {
		if m := canaryRE.FindString(b); m != "" {
			t.Errorf("error body holds %s: %s", m, b)
		}
	}
}

// unquoteAttr turns an item attribute as items() renders it back into its
// string value ("" for a non-string).
func unquoteAttr(raw string) string {
	var v struct{ Value string }
	_ = json.Unmarshal([]byte(raw), &v)
	return v.Value
}

func sortedAttrs(it map[string]string) []string {
	names := make([]string, 0, len(it))
	for k := range it {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// memBucket is an export.Bucket in memory: what is swept here is the lines
// the exporter writes, not S3 (shared/export's tests run it against one).
type memBucket struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (b *memBucket) Create(_ context.Context, key string, body []byte) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[key]; ok {
		return false, nil
	}
	b.objects[key] = slices.Clone(body)
	return true, nil
}

func (b *memBucket) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.objects[key]), nil
}
