package slackbot_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/elicitation/elicitationtest"
	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/store"
)

// The state in the link's query: the approver is shown it (the upstream's
// page needs it), nothing else keeps it.
const (
	consentLink = "https://auth.example.test/consent"
	consentURL  = consentLink + "?state=st8-never-kept-elsewhere&client=fbx"
	queryMark   = "st8-never-kept-elsewhere"
)

// fileInput files a pending input request on run runID, as the broker
// does, with url as the link to open, and returns it.
func (s *stack) fileInput(runID, callID, url string, personal bool, ttl time.Duration) store.InputRequest {
	s.t.Helper()
	return elicitationtest.File(s.t, s.led, store.InputRequest{RunID: runID, ToolCallID: callID, Server: "docs\u202e", Link: consentLink, URL: url,
		Personal: personal, ExpiresAt: store.FormatTime(time.Now().Add(ttl))})
}

// inputRow reads an input request's row as the table's stream carries it.
func (s *stack) inputRow(r store.InputRequest) map[string]events.DynamoDBAttributeValue {
	s.t.Helper()
	k := store.InputRequestKey(r.RunID, r.ToolCallID, r.ID)
	out, err := devstack.DynamoClient(s.dbURL).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(s.st.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k.PK}, "sk": &types.AttributeValueMemberS{Value: k.SK}},
	})
	if err != nil || out.Item == nil {
		s.t.Fatalf("read input request row: %v", err)
	}
	raw, err := attributevalue.MarshalMapJSON(out.Item)
	if err != nil {
		s.t.Fatal(err)
	}
	var img map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal(raw, &img); err != nil {
		s.t.Fatal(err)
	}
	return img
}

// stream delivers one change of an input request's row the way AWS does:
// the table's stream record through the notify function's handler, its
// notification through the bus to the Slack function's entry point.
func (s *stack) stream(r store.InputRequest, old, now map[string]events.DynamoDBAttributeValue) {
	s.t.Helper()
	k := store.InputRequestKey(r.RunID, r.ToolCallID, r.ID)
	name := "MODIFY"
	if old == nil {
		name = "INSERT"
	}
	rec := events.DynamoDBEventRecord{EventID: "ev-" + r.ID, EventName: name, Change: events.DynamoDBStreamRecord{
		Keys:     map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(k.PK), "sk": events.NewStringAttribute(k.SK)},
		OldImage: old, NewImage: now, SequenceNumber: "1",
	}}
	h := notify.NewHandler(bus{s.notifier}, nil, slog.New(slog.DiscardHandler))
	resp, err := h.Stream(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		s.t.Fatalf("stream %s of %s = %+v, %v", name, r.ID, resp, err)
	}
}

// bus is the EventBridge leg: each notification is an event for the Slack
// function's entry point.
type bus struct{ n *slackbot.Notifier }

func (b bus) Publish(ctx context.Context, entries []notify.Entry) error {
	for i, e := range entries {
		raw, err := json.Marshal(e.Detail)
		if err == nil {
			err = b.n.HandleEvent(ctx, events.EventBridgeEvent{ID: "e", Source: notify.Source, DetailType: string(e.Type), Detail: raw})
		}
		if err != nil {
			return &notify.PublishError{First: i, Err: err}
		}
	}
	return nil
}

// openURLs are the URLs a message's buttons open.
func openURLs(b slack.Blocks) []string {
	var out []string
	for _, bl := range b.BlockSet {
		if ab, ok := bl.(*slack.ActionBlock); ok {
			for _, e := range ab.Elements.ElementSet {
				if be, ok := e.(*slack.ButtonBlockElement); ok && be.URL != "" {
					out = append(out, be.URL)
				}
			}
		}
	}
	return out
}

// TestInputRequestMessage: a pending input request is posted, from its
// row's insert on the stream, to the run's channel with the connection's
// name (escaped), the link with its query and an Open button for it, Done
// and Decline; only the request's row holds the query. An approver's Done
// settles it, the clicker is told, and the settled row's change updates
// the message: no buttons, the link cut to what the ledger keeps. A
// second delivery changes nothing.
func TestInputRequestMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ALICE": "alice@example.com"}, nil)
	s.member("alice-sub", "alice@example.com", "approver")
	runID, _ := s.run()
	r := s.fileInput(runID, "c1", consentURL, false, elicitation.DefaultTTL)
	pending := s.inputRow(r)
	s.stream(r, nil, pending)

	posts, _, _, _ := s.slack.snapshot()
	if len(posts) != 1 || posts[0].Channel != channel {
		t.Fatalf("posts = %+v, want one, in %s", posts, channel)
	}
	m := posts[0]
	text := blocksText(m.Blocks)
	for _, want := range []string{
		`Link to open for docs\u{202E}`, consentURL, "Run: " + runID, "Tool: mcp__docs__connect",
		`Connection: docs\u{202E} (con_docs)`, "Time left: ", "Open link", "Done", "Decline",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("message reads:\n%s\nwant %q in it", text, want)
		}
	}
	if strings.ContainsRune(text, '\u202e') || strings.ContainsRune(m.Text, '\u202e') {
		t.Error("the message carries the server name's raw bidi override")
	}
	if got := openURLs(m.Blocks); !slices.Equal(got, []string{consentURL}) {
		t.Errorf("the message's buttons open %q, want the link with its query", got)
	}
	if strings.Contains(m.Text, queryMark) {
		t.Errorf("the notification text %q carries the query", m.Text)
	}
	onlyTheRowHoldsTheQuery(t, s)

	if rep := s.interact(s.clickBody("U_ALICE", slackbot.ActionInputDone, r.ID, 1)); rep.status != 200 {
		t.Fatalf("click = %+v", rep)
	}
	got, err := elicitation.NewService(s.led, time.Now, nil).Get(context.Background(), r.ID)
	if err != nil || got.Status != string(elicitation.Completed) || got.DecidedBy != "alice-sub" {
		t.Fatalf("after Done the request is %+v, %v; want completed by alice-sub", got, err)
	}
	waitFor(t, "the reply", func() bool { _, _, rs, _ := s.slack.snapshot(); return len(rs) == 1 })
	if _, _, rs, _ := s.slack.snapshot(); !strings.Contains(rs[0], "Done: "+r.ID+" completed") {
		t.Errorf("reply to the clicker = %q", rs)
	}

	settled := s.inputRow(r)
	s.stream(r, pending, settled)
	s.stream(r, pending, settled) // delivered again
	_, updates, _, _ := s.slack.snapshot()
	if len(updates) != 1 {
		t.Fatalf("updates = %d, want 1 (a second delivery changes nothing)", len(updates))
	}
	u := updates[0]
	ut := blocksText(u.Blocks)
	if u.TS != m.TS || u.Channel != channel || slices.Contains(blockTypes(u.Blocks), "actions") ||
		!strings.Contains(ut, `Done by alice-sub: docs\u{202E}`) || !strings.Contains(ut, consentLink) || strings.Contains(ut, queryMark) {
		t.Errorf("update = ts %s, blocks %v:\n%s\nwant message %s, settled, without buttons or the query", u.TS, blockTypes(u.Blocks), ut, m.TS)
	}
}

// onlyTheRowHoldsTheQuery: of every item in the table (ledger events,
// Slack message records, the id pointer, the index), only the input
// request's own row holds the link's query.
func onlyTheRowHoldsTheQuery(t *testing.T, s *stack) {
	t.Helper()
	out, err := devstack.DynamoClient(s.dbURL).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(s.st.Table())})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		raw, _ := attributevalue.MarshalMapJSON(it)
		if !strings.Contains(string(raw), queryMark) {
			continue
		}
		if sk, _ := it["sk"].(*types.AttributeValueMemberS); sk == nil || !strings.HasPrefix(sk.Value, "INP#") {
			t.Errorf("item %s holds the link's query", raw)
		}
	}
}

// TestInputRequestOnlyHTTPLinksOpen: a link that is not an absolute http
// or https URL without user info is shown as escaped text and never behind
// a button; Openable decides every case of testdata/openable.json as it
// says (the page's safeHref is held to the same file).
func TestInputRequestOnlyHTTPLinksOpen(t *testing.T) {
	t.Parallel()
	for _, c := range OpenableCases(t) {
		if _, ok := slackbot.Openable(c.URL); ok != c.Open {
			t.Errorf("Openable(%.60q) = %v, want %v: %s", c.URL, ok, c.Open, c.Why)
		}
	}

	s := newStack(t, nil, nil)
	runID, _ := s.run()
	r := s.fileInput(runID, "c1", "javascript:alert(document.cookie)", false, elicitation.DefaultTTL)
	s.stream(r, nil, s.inputRow(r))
	posts, _, _, _ := s.slack.snapshot()
	if len(posts) != 1 {
		t.Fatalf("posts = %+v, want one", posts)
	}
	if got := openURLs(posts[0].Blocks); len(got) != 0 {
		t.Errorf("a javascript: link is behind a button: %q", got)
	}
	if text := blocksText(posts[0].Blocks); !strings.Contains(text, "javascript:alert(document.cookie)") || !strings.Contains(text, "Decline") {
		t.Errorf("message reads:\n%s\nwant the link as text and the buttons to answer", text)
	}
}

// TestInputRequestPersonal: a personal connection's request goes to the
// run's invoker alone, by direct message; an approver's Done and Decline
// are refused and change nothing; the owner's Decline settles it, and an
// expired request's message says so.
func TestInputRequestPersonal(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ALICE": "alice@example.com", "U_BOB": "bob@example.com"}, nil)
	s.member("alice-sub", "alice@example.com", "approver")
	s.member("bob-sub", "bob@example.com", "member")
	runID, _ := s.run()
	s.setInvoker(runID, "bob-sub")
	r := s.fileInput(runID, "c1", consentURL, true, elicitation.DefaultTTL)
	pending := s.inputRow(r)
	s.stream(r, nil, pending)
	posts, _, _, _ := s.slack.snapshot()
	if len(posts) != 1 || posts[0].Channel != "U_BOB" || !strings.Contains(blocksText(posts[0].Blocks), "Only you answer this") {
		t.Fatalf("posts = %+v, want one, to U_BOB, saying only they answer", posts)
	}
	for i, action := range []string{slackbot.ActionInputDone, slackbot.ActionInputDecline} {
		s.interact(s.clickBody("U_ALICE", action, r.ID, 10+i))
	}
	waitFor(t, "the refusals", func() bool { _, _, rs, _ := s.slack.snapshot(); return len(rs) == 2 })
	_, _, replies, _ := s.slack.snapshot()
	for _, rep := range replies {
		if !strings.Contains(rep, "You may not answer this input request") {
			t.Errorf("reply to an approver's click = %q, want refused", rep)
		}
	}
	svc := elicitation.NewService(s.led, time.Now, nil)
	if got, _ := svc.Get(context.Background(), r.ID); got.Status != string(elicitation.Pending) {
		t.Fatalf("after the approver's clicks the request is %s, want pending", got.Status)
	}
	s.interact(s.clickBody("U_BOB", slackbot.ActionInputDecline, r.ID, 20))
	if got, _ := svc.Get(context.Background(), r.ID); got.Status != string(elicitation.Declined) || got.DecidedBy != "bob-sub" {
		t.Fatalf("after the owner's Decline the request is %+v, want declined by bob-sub", got)
	}
	s.stream(r, pending, s.inputRow(r))
	if _, updates, _, _ := s.slack.snapshot(); len(updates) != 1 || updates[0].Channel != "U_BOB" ||
		!strings.Contains(blocksText(updates[0].Blocks), "Declined by bob-sub (the call is refused)") {
		t.Errorf("updates = %+v, want the owner's message declined", updates)
	}

	// Nobody answers the next one: the sweep expires it, and its message
	// says the call is refused.
	late := s.fileInput(runID, "c2", consentURL, true, 200*time.Millisecond)
	latePending := s.inputRow(late)
	s.stream(late, nil, latePending)
	time.Sleep(300 * time.Millisecond)
	if sw, err := svc.Sweep(context.Background()); err != nil || sw.Expired != 1 {
		t.Fatalf("sweep = %+v, %v; want 1 expired", sw, err)
	}
	s.stream(late, latePending, s.inputRow(late))
	_, updates, _, _ := s.slack.snapshot()
	if len(updates) != 2 || !strings.Contains(blocksText(updates[1].Blocks), "Expired (nobody answered in time, so the call is refused)") ||
		slices.Contains(blockTypes(updates[1].Blocks), "actions") {
		t.Errorf("updates = %+v, want the late request's message expired, without buttons", updates)
	}
}

// setInvoker records who invoked run runID on its head, as run creation
// does for an SSO user.
func (s *stack) setInvoker(runID, sub string) {
	s.t.Helper()
	_, err := devstack.DynamoClient(s.dbURL).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.st.Table()),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + runID}, "sk": &types.AttributeValueMemberS{Value: "HEAD"}},
		UpdateExpression:          aws.String("SET invoker = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: sub}},
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// TestInputObserverPosts: in `fluidbox dev` (no table stream) the
// elicitation service's observer feeds the Slack code: a filed request is
// posted, its settlement updates the message, and a transition that is no
// notification posts nothing.
func TestInputObserverPosts(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nil)
	runID, _ := s.run()
	r := s.fileInput(runID, "c1", consentURL, false, elicitation.DefaultTTL)
	observe := s.notifier.InputObserver()
	observe(context.Background(), r, r)
	observe(context.Background(), store.InputRequest{}, r)
	waitFor(t, "the post", func() bool { posts, _, _, _ := s.slack.snapshot(); return len(posts) == 1 })
	inputs := elicitation.NewService(s.led, time.Now, nil)
	inputs.Observe(observe)
	if _, ok, err := inputs.Decide(context.Background(), auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, r.ID, elicitation.DecisionDecline); err != nil || !ok {
		t.Fatalf("Decide = %t, %v", ok, err)
	}
	// The post's own follow-up and the decision's observer may both find
	// the message pending and update it: each shows the settled state.
	waitFor(t, "the update", func() bool { _, updates, _, _ := s.slack.snapshot(); return len(updates) >= 1 })
	posts, updates, _, _ := s.slack.snapshot()
	if len(posts) != 1 {
		t.Errorf("posts %d, want 1", len(posts))
	}
	for _, u := range updates {
		if text := blocksText(u.Blocks); !strings.Contains(text, "Declined by admin") || strings.Contains(text, queryMark) {
			t.Errorf("update reads:\n%s\nwant declined without the query", text)
		}
	}
}

// OpenableCase is one case of testdata/openable.json: whether URL may be
// offered as a link to click, and why.
type OpenableCase struct {
	URL  string `json:"url"`
	Open bool   `json:"open"`
	Why  string `json:"why"`
}

// OpenableCases reads testdata/openable.json.
func OpenableCases(t *testing.T) []OpenableCase {
	t.Helper()
	b, err := os.ReadFile("testdata/openable.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []OpenableCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}
