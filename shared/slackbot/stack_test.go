package slackbot_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const (
	adminToken    = "fbx_admin_slack_test_token_000000000000"
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	botToken      = "xoxb-test-bot-token-never-logged"
	channel       = "C0APPROVALS"
	// homeTeam is the team slacktest's auth.test names: the app's own.
	homeTeam = "T024BE7LD"
)

const policyDoc = `{"name":"slack","default_verdict":"require_approval","rules":[
 {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"},
 {"id":"ask-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","ttl_seconds":1}]}`

// fakeSlack is slack-go's slacktest server on loopback with the Web API
// methods the bot uses answered and recorded: chat.postMessage (with a
// distinct ts per message), chat.update, views.open, users.info (emails
// from users), and response URLs under /response/.
type fakeSlack struct {
	srv   *slacktest.Server
	users map[string]string // Slack user id -> email
	// teams puts a user in another Slack team than the app's (slacktest's
	// auth.test team, homeTeam): a Slack Connect user from an external
	// organization in a shared channel.
	teams map[string]string
	// unconfirmed users have an email on their profile that they never
	// confirmed with Slack (is_email_confirmed false).
	unconfirmed map[string]bool
	fail        atomic.Bool // every Web API method answers 500

	mu        sync.Mutex
	seq       int
	posts     []message
	updates   []message
	views     []slack.ModalViewRequest
	responses []string
	userInfos int
	tokens    []string
}

type message struct {
	Channel, TS, Text string
	Blocks            slack.Blocks
}

func newFakeSlack(t *testing.T, users map[string]string) *fakeSlack {
	t.Helper()
	f := &fakeSlack{users: users, teams: map[string]string{}, unconfirmed: map[string]bool{}}
	f.srv = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", f.message(true))
		c.Handle("/chat.update", f.message(false))
		c.Handle("/views.open", f.viewsOpen)
		c.Handle("/users.info", f.usersInfo)
		c.Handle("/users.lookupByEmail", f.lookupByEmail)
		c.Handle("/response/", f.response)
	})
	f.srv.Start()
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeSlack) url() string { return f.srv.GetAPIURL() }

func (f *fakeSlack) refuse(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	f.tokens = append(f.tokens, r.FormValue("token")+r.Header.Get("Authorization"))
	f.mu.Unlock()
	if f.fail.Load() {
		http.Error(w, "slack is down", http.StatusInternalServerError)
		return true
	}
	return false
}

func (f *fakeSlack) message(post bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if f.refuse(w, r) {
			return
		}
		var blocks slack.Blocks
		if err := json.Unmarshal([]byte(r.FormValue("blocks")), &blocks); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		m := message{Channel: r.FormValue("channel"), TS: r.FormValue("ts"), Text: r.FormValue("text"), Blocks: blocks}
		if post {
			f.seq++
			m.TS = fmt.Sprintf("1700000000.%06d", f.seq)
			f.posts = append(f.posts, m)
		} else {
			f.updates = append(f.updates, m)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS})
	}
}

func (f *fakeSlack) viewsOpen(w http.ResponseWriter, r *http.Request) {
	if f.refuse(w, r) {
		return
	}
	var req struct {
		TriggerID string                 `json:"trigger_id"`
		View      slack.ModalViewRequest `json:"view"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.views = append(f.views, req.View)
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "view": map[string]any{"id": "V1"}})
}

func (f *fakeSlack) usersInfo(w http.ResponseWriter, r *http.Request) {
	if f.refuse(w, r) {
		return
	}
	id := r.FormValue("user")
	f.mu.Lock()
	f.userInfos++
	email, ok := f.users[id]
	team, external := f.teams[id]
	confirmed := !f.unconfirmed[id]
	f.mu.Unlock()
	if !ok {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "user_not_found"})
		return
	}
	if !external {
		team = homeTeam
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": map[string]any{"id": id, "team_id": team, "is_email_confirmed": confirmed, "profile": map[string]any{"email": email}}})
}

// lookupByEmail answers users.lookupByEmail from users, as users.info
// would answer for the user found.
func (f *fakeSlack) lookupByEmail(w http.ResponseWriter, r *http.Request) {
	if f.refuse(w, r) {
		return
	}
	email := r.FormValue("email")
	f.mu.Lock()
	id := ""
	for u, e := range f.users {
		if e == email {
			id = u
		}
	}
	team, external := f.teams[id]
	confirmed := !f.unconfirmed[id]
	f.mu.Unlock()
	if id == "" {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "users_not_found"})
		return
	}
	if !external {
		team = homeTeam
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": map[string]any{"id": id, "team_id": team, "is_email_confirmed": confirmed, "profile": map[string]any{"email": email}}})
}

func (f *fakeSlack) response(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text string `json:"text"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.responses = append(f.responses, r.URL.Path+" "+body.Text)
	f.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (f *fakeSlack) snapshot() (posts, updates []message, responses []string, views int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]message(nil), f.posts...), append([]message(nil), f.updates...), append([]string(nil), f.responses...), len(f.views)
}

// stack is the API handler with Slack wired as `fluidbox dev` wires it:
// the notifier observes committed approval transitions, the interaction
// route decides through the same approval service.
type stack struct {
	t        *testing.T
	url      string
	st       *store.Store
	dbURL    string
	slack    *fakeSlack
	notifier *slackbot.Notifier
	admin    *client.Client
	logs     *syncBuffer
	expirer  *approval.Service
	led      *ledger.Ledger
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newStack(t *testing.T, users map[string]string, explicit map[string]string) *stack {
	t.Helper()
	return newStackWith(t, users, explicit, nil)
}

// newStackWith is newStack with more of the API's configuration (SSO, a
// sealer) set by with.
func newStackWith(t *testing.T, users map[string]string, explicit map[string]string, with func(*api.Config)) *stack {
	t.Helper()
	st, db := testenv.StoreOn(t)
	led := ledger.New(st, time.Now)
	fs := newFakeSlack(t, users)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	cfg := slackbot.Config{BotToken: botToken, SigningSecret: signingSecret, Channel: channel, APIURL: fs.url(), Users: explicit}
	sc := slackbot.NewClient(cfg)
	n := slackbot.NewNotifier(sc, st, channel, log, time.Now)
	n.Retry = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}
	n.WithUsers(explicit)
	acfg := api.Config{AdminToken: adminToken, Ledger: led, Logger: log, Observer: n.Observer(), Slack: cfg, SlackAPI: sc}
	if with != nil {
		with(&acfg)
	}
	h := api.New(acfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	admin, err := client.New(srv.URL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	expirer := approval.NewService(led, time.Now)
	expirer.Observe(n.Observer())
	return &stack{t: t, url: srv.URL, st: st, dbURL: db.URL, slack: fs, notifier: n, admin: admin, logs: logs, expirer: expirer, led: led}
}

// run creates a run under the test policy and returns its id and token.
func (s *stack) run() (string, string) {
	s.t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(policyDoc), &pol); err != nil {
		s.t.Fatalf("create policy: %v", err)
	}
	var ses struct{ ID, Token string }
	body := map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		s.t.Fatalf("create session: %v", err)
	}
	return ses.ID, ses.Token
}

// pending asks for a Bash call that needs a human and returns its approval.
func (s *stack) pending(runID, token, call, cmd string) string {
	s.t.Helper()
	c, err := client.New(s.url, token)
	if err != nil {
		s.t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]string{"command": cmd})
	ans, err := c.Permission(context.Background(), runID, client.PermissionRequest{ToolCallID: call, ToolName: "Bash", Input: in}, 0)
	if err != nil || ans.Decision != vocab.Pending {
		s.t.Fatalf("ask %q = %+v, %v; want pending", cmd, ans, err)
	}
	return ans.ApprovalID
}

func (s *stack) answer(runID, token, call, cmd string) client.Answer {
	s.t.Helper()
	c, _ := client.New(s.url, token)
	in, _ := json.Marshal(map[string]string{"command": cmd})
	ans, err := c.Permission(context.Background(), runID, client.PermissionRequest{ToolCallID: call, ToolName: "Bash", Input: in}, 0)
	if err != nil {
		s.t.Fatalf("ask %q: %v", cmd, err)
	}
	return ans
}

func (s *stack) member(sub, email string, roles ...string) {
	s.t.Helper()
	now := store.FormatTime(time.Now())
	if err := s.st.PutMember(context.Background(), store.Member{Sub: sub, Status: store.MemberActive, Roles: roles, Email: email, FirstSeen: now, LastSeen: now}); err != nil {
		s.t.Fatal(err)
	}
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sign returns Slack's headers for body at ts with secret.
func sign(secret string, ts time.Time, body string) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", stamp, body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// clickBody is a block_actions payload: user clicks action on approval.
func (s *stack) clickBody(user, action, approvalID string, n int) string {
	p := map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user}, "trigger_id": fmt.Sprintf("trigger-%d", n),
		"response_url": s.slack.url() + fmt.Sprintf("response/%d", n),
		"actions":      []map[string]any{{"action_id": action, "block_id": "fluidbox_decide", "type": "button", "value": approvalID, "action_ts": fmt.Sprintf("1700000000.%d", n)}},
	}
	b, _ := json.Marshal(p)
	return url.Values{"payload": {string(b)}}.Encode()
}

// denyBody is the deny modal's view_submission with reason.
func (s *stack) denyBody(user, approvalID, reason string, n int) string {
	p := map[string]any{
		"type": "view_submission", "user": map[string]any{"id": user}, "trigger_id": fmt.Sprintf("trigger-%d", n),
		"view": map[string]any{
			"id": fmt.Sprintf("V%d", n), "callback_id": slackbot.CallbackDeny, "private_metadata": approvalID,
			"state": map[string]any{"values": map[string]any{"reason": map[string]any{"reason": map[string]any{"type": "plain_text_input", "value": reason}}}},
		},
	}
	b, _ := json.Marshal(p)
	return url.Values{"payload": {string(b)}}.Encode()
}

type reply struct {
	status int
	body   string
}

func (s *stack) post(h http.Header, body string) reply {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/v1/integrations/slack/interactions", strings.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("post interaction: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b)}
}

func (s *stack) interact(body string) reply {
	s.t.Helper()
	return s.post(sign(signingSecret, time.Now(), body), body)
}

func (s *stack) status(id string) vocab.ApprovalStatus {
	s.t.Helper()
	a, err := s.admin.Approval(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return a.Status
}

// markPersonal makes an approval a call on a personal connection of
// owner's: the approval row's personal flag and the run's invoker, as the
// broker and run creation record them.
func (s *stack) markPersonal(runID, toolCallID, owner string) {
	s.t.Helper()
	db := devstack.DynamoClient(s.dbURL)
	for _, u := range []struct {
		sk, expr string
		v        types.AttributeValue
	}{
		{"APR#" + toolCallID, "SET personal = :v", &types.AttributeValueMemberBOOL{Value: true}},
		{"HEAD", "SET invoker = :v", &types.AttributeValueMemberS{Value: owner}},
	} {
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.st.Table()),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + runID}, "sk": &types.AttributeValueMemberS{Value: u.sk}},
			UpdateExpression:          aws.String(u.expr),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": u.v},
		})
		if err != nil {
			s.t.Fatalf("mark personal: %v", err)
		}
	}
}

func blockTypes(b slack.Blocks) []string {
	var out []string
	for _, bl := range b.BlockSet {
		out = append(out, string(bl.BlockType()))
	}
	return out
}

func blocksText(b slack.Blocks) string {
	raw, _ := json.Marshal(b)
	var v any
	_ = json.Unmarshal(raw, &v)
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				sb.WriteString(t + "\n")
			}
			for k, e := range x {
				if k != "text" {
					walk(e)
				} else if m, ok := e.(map[string]any); ok {
					walk(m)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}

func scanKeys(t *testing.T, s *stack) []string {
	t.Helper()
	db := devstack.DynamoClient(s.dbURL)
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(s.st.Table())})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range out.Items {
		if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
			keys = append(keys, pk.Value)
		}
	}
	return keys
}
