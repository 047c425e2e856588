//go:build e2e

// The approvals page in headless Chromium (make e2e-browser; never make
// test): a reviewer signs in through a real OIDC issuer on loopback
// (authorization code with PKCE) and decides a waiting call; the page at
// phone width; the page's render.js against the Go renderer on the same
// inputs. Chromium comes from Debian's chromium package; FLUIDBOX_CHROMIUM
// names another binary.

package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/browsertest"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/render"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const (
	adminToken = "web-e2e-admin-token-0123456789"
	clientID   = "fluidbox-approvals"
	// Phone: the narrowest width the page must fit.
	phoneWidth, phoneHeight = 390, 844
)

const testPolicy = `{"name":"web","default_verdict":"deny","approval":{"scope":"once","ttl_seconds":900},"rules":[
 {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"}]}`

// shadowPolicy, every run's shadow, would deny what testPolicy asks about.
const shadowPolicy = `{"name":"web-shadow","default_verdict":"deny","rules":[
 {"id":"no-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"deny"},
 {"id":"ls","tool":"Bash","match":{"command_prefix":["ls"]},"verdict":"allow"}]}`

type stack struct {
	url    string
	admin  *client.Client
	issuer *oidcissuer.Issuer
	st     *store.Store
	dbURL  string
}

// newStack runs the whole API (what fluidbox dev serves) on 127.0.0.1
// over minidyn, in SSO mode with a test issuer when sso is set.
func newStack(t *testing.T, withSSO bool) *stack {
	t.Helper()
	ctx := context.Background()
	st, db := testenv.StoreOn(t)
	cfg := api.Config{AdminToken: adminToken, Ledger: ledger.New(st, time.Now)}
	s := &stack{st: st, dbURL: db.URL}
	if withSSO {
		s.issuer = oidcissuer.Start(t, clientID)
		v, err := sso.NewVerifier(ctx, sso.Config{Issuer: s.issuer.URL, Audience: clientID})
		if err != nil {
			t.Fatal(err)
		}
		cfg.OIDC = v
	}
	h, err := api.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	if s.admin, err = client.New(srv.URL, adminToken); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitingCall creates a run and has its runner ask for command, which the
// policy sends to a human; it returns the run, the approval and where the
// runner's answer arrives.
func (s *stack) waitingCall(t *testing.T, command string) (string, client.Approval, <-chan client.Answer) {
	t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	var shadow struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(shadowPolicy), &shadow); err != nil {
		t.Fatalf("create shadow policy: %v", err)
	}
	var ses struct{ ID, Token string }
	body := map[string]any{"policy_id": pol.ID, "shadow_policy_id": shadow.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 5}}
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	runner, err := client.New(s.url, ses.Token)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan client.Answer, 1)
	go func() {
		in, _ := json.Marshal(map[string]string{"command": command, "description": "clean the build"})
		ans, err := runner.Permission(context.Background(), ses.ID,
			client.PermissionRequest{ToolCallID: "toolu_web_1", ToolName: "Bash", Input: in}, 90*time.Second)
		if err != nil {
			ans = client.Answer{Decision: vocab.Decision("error: " + err.Error())}
		}
		got <- ans
	}()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		list, err := s.admin.Approvals(ctx)
		if err != nil {
			t.Fatalf("list approvals: %v", err)
		}
		for _, a := range list {
			if a.SessionID == ses.ID {
				return ses.ID, a, got
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no pending approval for run %s", ses.ID)
	return "", client.Approval{}, nil
}

// fromPullRequest records on run runID's head that a GitHub pull request
// from a fork created it, as a webhook delivery does (the trigger's own
// tests cover the delivery), so the page has every review fact to show.
func (s *stack) fromPullRequest(t *testing.T, runID string) {
	t.Helper()
	m := map[string]types.AttributeValue{
		"trigger_id":      &types.AttributeValueMemberS{Value: "trg_web"},
		"repository":      &types.AttributeValueMemberS{Value: "acme/app"},
		"head_repository": &types.AttributeValueMemberS{Value: "mallory/app\u202e"},
		"pull_request":    &types.AttributeValueMemberN{Value: "42"},
		"head_sha":        &types.AttributeValueMemberS{Value: "0123456789abcdef0123456789abcdef01234567"},
		"fork":            &types.AttributeValueMemberBOOL{Value: true},
	}
	_, err := devstack.DynamoClient(s.dbURL).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(s.st.Table()),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RUN#" + runID},
			"sk": &types.AttributeValueMemberS{Value: "HEAD"},
		},
		UpdateExpression:          aws.String("SET github = :g, #trigger = :t"),
		ExpressionAttributeNames:  map[string]string{"#trigger": "trigger"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": &types.AttributeValueMemberM{Value: m}, ":t": &types.AttributeValueMemberS{Value: "github"}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %.80s: %v", js, err)
	}
	return v
}

// TestBrowserSignInAndDecide: with SSO on, the page asks for no token: the
// reviewer signs in at the issuer (code + PKCE), the page shows who is
// signed in, keeps no code or token in the address bar, shows the facts
// a reviewer decides by and each button's scope, and a deny with a reason
// reaches the waiting runner, decided by the signed-in person. At phone
// width nothing spills off the screen. (The timeline itself, as an admin
// sees it, is cmd/fluidbox's TestBrowserApproveByClick.)
func TestBrowserSignInAndDecide(t *testing.T) {
	s := newStack(t, true)
	s.issuer.SignInAs(map[string]any{"sub": "u-alice", "email": "alice@example.com", "fluidbox_roles": []string{"approver"}})
	ses, apr, answered := s.waitingCall(t, "rm -rf build/\u202e --no-preserve-root")
	s.fromPullRequest(t, ses)

	for _, size := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"desktop", 1280, 900, false}, {"phone", phoneWidth, phoneHeight, true}} {
		t.Run(size.name, func(t *testing.T) {
			ctx := browsertest.Start(t, size.width, size.height, size.mobile)
			step, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			card := `li.approval[data-approval-id="` + apr.ID + `"]`
			signInFromPage(t, step, s, ses, card, apr.ID, size.name, size.width, size.height)
			checkCard(t, step, card, ses, size.width)
			shot(t, step, size.name+"-pending.png", size.width, size.height)
			if err := chromedp.Do(step, chromedp.ScrollIntoView(chromedp.CSS(card+" .actions"))); err != nil {
				t.Fatal(err)
			}
			shot(t, step, size.name+"-pending-buttons.png", size.width, size.height)
			if size.name != "phone" {
				return // decide once, on the phone
			}
			followAndDeny(t, step, s, ses, card, apr, answered)
			shot(t, step, size.name+"-decided.png", size.width, size.height)

			// Signing out forgets the token; the page asks to sign in again.
			if err := chromedp.Do(step, chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitVisible(chromedp.ID("sign-in"))); err != nil {
				t.Fatalf("sign out: %v", err)
			}
			if tok := eval[string](t, step, `sessionStorage.getItem("fluidbox.token") || ""`); tok != "" {
				t.Error("after signing out the tab still holds a token")
			}
		})
	}
}

// signInFromPage opens the page, which offers SSO and no token input,
// signs in at the issuer (one code redeemed with its PKCE verifier), and
// checks who the header names and that the address keeps no code, state
// or token.
func signInFromPage(t *testing.T, step context.Context, s *stack, ses, card, aprID, sizeName string, width, height int64) {
	t.Helper()
	err := chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
	)
	if err != nil {
		t.Fatalf("open the page: %v", err)
	}
	if n := eval[int](t, step, `document.querySelectorAll("input[type=password]:not([hidden])").length - document.querySelectorAll("#token-panel[hidden] input[type=password]").length`); n != 0 {
		t.Errorf("with SSO on the page shows %d token inputs, want none", n)
	}
	shot(t, step, sizeName+"-sign-in.png", width, height)
	before := s.issuer.Exchanged()
	err = chromedp.Do(step,
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.CSS(card)),
	)
	if err != nil {
		t.Fatalf("sign in and find approval %s: %v", aprID, err)
	}
	if got := s.issuer.Exchanged(); got != before+1 {
		t.Errorf("the issuer redeemed %d codes with a good PKCE verifier, want 1", got-before)
	}
	if who := text(t, step, "#who"); who != "signed in as alice@example.com (approver)" {
		t.Errorf("header says %q, want who is signed in", who)
	}
	href := eval[string](t, step, `location.href`)
	tok := eval[string](t, step, `sessionStorage.getItem("fluidbox.token") || ""`)
	if tok == "" || strings.Contains(href, "code=") || strings.Contains(href, "state=") || strings.Contains(href, tok) || strings.TrimSuffix(href, "#run="+ses) != s.url+"/" {
		t.Errorf("after sign-in the address is %q (token kept: %v); want %s/ with no code, state or token", href, tok != "", s.url)
	}
}

// checkCard checks that the approval's card shows the facts a reviewer
// decides by and each button's scope, escapes the bidi override, and
// keeps the page within the window's width.
func checkCard(t *testing.T, step context.Context, card, ses string, width int64) {
	t.Helper()
	got := text(t, step, card)
	for _, want := range []string{
		"Bash", `rm -rf build/\u{202E} --no-preserve-root`, "clean the build", "rule ask-rm",
		"why", "policy", "trust tier", "trusted", "trigger", "github", "requested", "ago", ses, "timeline", "left",
		"repository", "acme/app #42", "head", `mallory/app\u{202E} (a fork) @ 0123456789ab`,
		"Approve once", "allows this one call only; the next one asks again",
		"Approve for run", "allows every `rm ...` command for the rest of this run (" + ses + ")",
		"Deny", "refuses this call; the agent is told it was denied, with your reason",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the card reads %q, want %q in it", got, want)
		}
	}
	if strings.Contains(got, "\u202e") {
		t.Errorf("the card shows a raw bidi override: %q", got)
	}
	if w := eval[int](t, step, `document.documentElement.scrollWidth`); w > int(width) {
		t.Errorf("the page is %d px wide in a %d px window: it spills off the screen", w, width)
	}
}

// followAndDeny follows the run through the card's timeline link (open to
// an approver who is not an admin: GET /v1/sessions/{id}/events is open
// to reviewers, the ledger holds no input), then denies with a reason,
// which reaches the waiting runner, decided by the signed-in person.
func followAndDeny(t *testing.T, step context.Context, s *stack, ses, card string, apr client.Approval, answered <-chan client.Answer) {
	t.Helper()
	if err := chromedp.Do(step, chromedp.Click(chromedp.CSS(card+" a.timeline-link"))); err != nil {
		t.Fatal(err)
	}
	waitText(t, step, "#run-status", "following "+ses)
	if href := eval[string](t, step, `location.href`); href != s.url+"/#run="+ses {
		t.Errorf("after the timeline link the address is %q, want %s/#run=%s", href, s.url, ses)
	}
	const reason = "not on a Friday"
	err := chromedp.Do(step,
		chromedp.Click(chromedp.CSS(card+" button.deny")),
		chromedp.WaitVisible(chromedp.CSS(card+" input.deny-reason")),
		chromedp.SendKeys(chromedp.CSS(card+" input.deny-reason"), reason),
		chromedp.Click(chromedp.CSS(card+" button.deny-confirm")),
	)
	if err != nil {
		t.Fatalf("deny with a reason: %v", err)
	}
	select {
	case a := <-answered:
		if a.Decision != vocab.Deny || !strings.Contains(a.Reason, reason) {
			t.Errorf("the runner's waiting request = %+v; want deny with the reason %q", a, reason)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runner got no answer after the deny")
	}
	if err := chromedp.Do(step, chromedp.WaitNotPresent(chromedp.CSS(card))); err != nil {
		t.Fatalf("the card after the deny: %v", err)
	}
	waitText(t, step, "#notice", apr.ID+" denied: applied")
	a, err := s.admin.Approval(context.Background(), apr.ID)
	if err != nil || a.Status != vocab.ApprovalDenied || a.DecidedBy != "u-alice" || a.Reason != reason {
		t.Errorf("approval = %+v, %v; want denied by u-alice with the reason", a, err)
	}
}

// TestBrowserSignInRefused: a sign-in the issuer refuses, and a redirect
// carrying a code for a sign-in this tab never started, sign nobody in.
func TestBrowserSignInRefused(t *testing.T) {
	s := newStack(t, true)
	ctx := browsertest.Start(t, 1280, 900, false)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	s.issuer.SignInAs(nil)
	err := chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitText(t, step, "#conn", "access_denied")
	if err := chromedp.Do(step,
		chromedp.Navigate(s.url+"/?code=forged&state=forged"),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, step, "#conn", "does not match a sign-in started here")
	if href := eval[string](t, step, `location.href`); href != s.url+"/" {
		t.Errorf("address after a forged redirect = %q, want the code taken out", href)
	}
	if tok := eval[string](t, step, `sessionStorage.getItem("fluidbox.token") || ""`); tok != "" || !eval[bool](t, step, `document.getElementById("app").hidden`) {
		t.Error("a refused or forged sign-in left the page signed in")
	}
}

// TestBrowserSingleAdminOnPhone: without SSO the page offers the admin
// token form and no sign-in; at phone width the admin approves, follows
// the run through the card's link, and the timeline fits the screen.
func TestBrowserSingleAdminOnPhone(t *testing.T) {
	s := newStack(t, false)
	ses, apr, answered := s.waitingCall(t, "rm -rf dist/")
	ctx := browsertest.Start(t, phoneWidth, phoneHeight, true)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(step, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
		t.Fatal(err)
	}
	if eval[bool](t, step, `!document.getElementById("sso-panel").hidden`) {
		t.Error("a single-admin page offers SSO sign-in")
	}
	card := `li.approval[data-approval-id="` + apr.ID + `"]`
	err := chromedp.Do(step,
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(chromedp.CSS(card)),
		chromedp.Click(chromedp.CSS(card+" a.timeline-link")),
		chromedp.WaitVisible(chromedp.CSS(`#timeline-body tr[data-seq="1"]`)),
		chromedp.Click(chromedp.CSS(card+" button.approve-once")),
		chromedp.WaitVisible(chromedp.CSS(`#timeline-body tr.allow`)),
	)
	if err != nil {
		t.Fatalf("approve and follow the run: %v", err)
	}
	select {
	case a := <-answered:
		if a.Decision != vocab.Allow {
			t.Errorf("the runner's answer = %+v, want allow", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runner got no answer")
	}
	if tl := text(t, step, "#timeline-body"); !strings.Contains(tl, "approved_once by admin") || !strings.Contains(text(t, step, "#run-status"), "following "+ses) {
		t.Errorf("timeline reads %q, want the approval by admin", tl)
	}
	if tl := text(t, step, "#timeline-body"); strings.Count(tl, "[shadow: deny, rule no-rm]") != 2 || !strings.Contains(tl, " shadow pol_") {
		t.Errorf("timeline reads %q, want the run's shadow policy, and its deny on the approval and on the decision", tl)
	}
	if w := eval[int](t, step, `document.documentElement.scrollWidth`); w > phoneWidth {
		t.Errorf("with the timeline the page is %d px wide in a %d px window", w, phoneWidth)
	}
	if err := chromedp.Do(step, chromedp.ScrollIntoView(chromedp.ID("timeline-panel"))); err != nil {
		t.Fatal(err)
	}
	shot(t, step, "phone-admin-timeline.png", phoneWidth, phoneHeight)
}

func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		got = text(t, ctx, sel)
		if strings.Contains(got, want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("%s reads %q, want %q in it", sel, got, want)
}

// TestBrowserRenderMatchesGo: render.js gives what shared/render gives on
// the corpus (shared/render/testdata/corpus.json) and on generated inputs
// full of the characters that hide or fake text.
func TestBrowserRenderMatchesGo(t *testing.T) {
	s := newStack(t, false)
	ctx := browsertest.Start(t, 1280, 900, false)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(step, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
		t.Fatal(err)
	}

	calls, clips, scopes := loadRenderCorpus(t)
	moreCalls, moreClips, moreScopes := generatedRenderCases(t)
	calls, clips, scopes = append(calls, moreCalls...), append(clips, moreClips...), append(scopes, moreScopes...)
	want := goRender(calls, clips, scopes)
	args, err := json.Marshal(map[string]any{"calls": calls, "clips": clips, "scopes": scopes})
	if err != nil {
		t.Fatal(err)
	}
	js := fmt.Sprintf(`(() => {
		const R = window.fluidboxRender, a = %s;
		const clips = a.clips.map((c) => R.clip(c.Lines ? R.block(c.Text) : R.line(c.Text), c.MaxChars, c.MaxLines));
		return JSON.stringify({
			calls: a.calls.map((c) => R.callText(c.Tool, c.Input)),
			clips, notes: clips.map(R.notice),
			scopes: a.scopes.map((c) => R.scope(c.Key, c.Run, c.Default)),
		});
	})()`, args)
	var got renderResult
	if err := json.Unmarshal([]byte(eval[string](t, step, js)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Calls) != len(want.Calls) || len(got.Clips) != len(want.Clips) || len(got.Scopes) != len(want.Scopes) {
		t.Fatalf("render.js answered %d/%d/%d cases, want %d/%d/%d", len(got.Calls), len(got.Clips), len(got.Scopes), len(want.Calls), len(want.Clips), len(want.Scopes))
	}
	mismatches := compareRender(t, calls, want, got)
	t.Logf("render.js and shared/render compared on %d calls, %d clips, %d scopes: %d differ", len(calls), len(clips), len(scopes), mismatches)
}

// The cases render.js and shared/render are compared on.
type (
	callCase struct{ Tool, Input string }
	clipCase struct {
		Text               string
		Lines              bool
		MaxChars, MaxLines int
	}
	scopeCase struct{ Key, Run, Default string }
)

// renderResult is what each renderer gives for the cases.
type renderResult struct {
	Calls  []render.View    `json:"calls"`
	Clips  []render.Clipped `json:"clips"`
	Notes  []string         `json:"notes"`
	Scopes []render.Scopes  `json:"scopes"`
}

// loadRenderCorpus reads shared/render/testdata/corpus.json's cases.
func loadRenderCorpus(t *testing.T) ([]callCase, []clipCase, []scopeCase) {
	t.Helper()
	var corpus struct {
		Calls []struct{ Tool, Input string } `json:"calls"`
		Clips []struct {
			Text     string `json:"text"`
			Lines    bool   `json:"lines"`
			MaxChars int    `json:"max_chars"`
			MaxLines int    `json:"max_lines"`
		} `json:"clips"`
		Scopes []struct {
			ScopeKey     string `json:"scope_key"`
			RunID        string `json:"run_id"`
			DefaultScope string `json:"default_scope"`
		} `json:"scopes"`
	}
	raw, err := os.ReadFile("../render/testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	var calls []callCase
	var clips []clipCase
	var scopes []scopeCase
	for _, c := range corpus.Calls {
		calls = append(calls, callCase{c.Tool, c.Input})
	}
	for _, c := range corpus.Clips {
		clips = append(clips, clipCase{c.Text, c.Lines, c.MaxChars, c.MaxLines})
	}
	for _, c := range corpus.Scopes {
		scopes = append(scopes, scopeCase{c.ScopeKey, c.RunID, c.DefaultScope})
	}
	return calls, clips, scopes
}

// generatedRenderCases are strings from an alphabet of the characters that
// matter (controls, bidi, zero-width, separators, odd spaces, astral,
// backslashes, escapes' look-alikes), as every tool and shape: 300 of
// each kind, from a fixed seed.
func generatedRenderCases(t *testing.T) ([]callCase, []clipCase, []scopeCase) {
	t.Helper()
	alphabet := []rune("ab \\\"{}x×u0123\n\t\r\x00\x1b\x7f\u0085\u00a0\u034f\u061c\u180e\u200b\u200d\u202a\u202e\u2066\u2069\u2028\u2029\u3000\u3164\ufe0f\ufeff\ue000\U000e0041\U000e0100\U0001f600é")
	rng := rand.New(rand.NewPCG(19, 2026))
	gen := func() string {
		n := rng.IntN(40)
		if rng.IntN(8) == 0 {
			n += 200
		}
		var b strings.Builder
		for range n {
			r := alphabet[rng.IntN(len(alphabet))]
			if rng.IntN(10) == 0 {
				b.WriteString(strings.Repeat(string(r), 2+rng.IntN(12)))
			} else {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	tools := []string{"Bash", "Write", "Edit", "mcp__x__y", "Read"}
	fields := [][]string{{"command"}, {"file_path", "content"}, {"file_path", "old_string", "new_string"}, {"url", "n"}, {"file_path"}}
	var calls []callCase
	var clips []clipCase
	var scopes []scopeCase
	for i := range 300 {
		k := rng.IntN(len(tools))
		in := map[string]any{}
		for _, f := range fields[k] {
			in[f] = gen()
		}
		if i%5 == 0 {
			in[gen()] = []any{gen(), json.Number("1.50"), json.Number("12345678901234567890"), nil, true, map[string]any{gen(): gen()}}
		}
		if i%7 == 0 {
			in["n"] = nil
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, callCase{tools[k], string(b)})
		clips = append(clips, clipCase{gen(), i%2 == 0, 1 + rng.IntN(60), 1 + rng.IntN(6)})
		scopes = append(scopes, scopeCase{[]string{"", "Bash:", "Bash:"}[i%3] + gen(), "ses_" + gen(), []string{"once", "session"}[i%2]})
	}
	return calls, clips, scopes
}

// goRender is shared/render's answer on the cases.
func goRender(calls []callCase, clips []clipCase, scopes []scopeCase) renderResult {
	var want renderResult
	for _, c := range calls {
		want.Calls = append(want.Calls, render.Call(c.Tool, []byte(c.Input)))
	}
	for _, c := range clips {
		r := render.Line(c.Text)
		if c.Lines {
			r = render.Block(c.Text)
		}
		cl := render.Clip(r, c.MaxChars, c.MaxLines)
		want.Clips = append(want.Clips, cl)
		want.Notes = append(want.Notes, cl.Notice())
	}
	for _, c := range scopes {
		want.Scopes = append(want.Scopes, render.Scope(c.Key, c.Run, c.Default))
	}
	return want
}

// compareRender reports each case where render.js differs from
// shared/render (the first ten in full) and returns how many differ.
func compareRender(t *testing.T, calls []callCase, want, got renderResult) int {
	t.Helper()
	mismatches := 0
	check := func(what string, i int, w, g any) {
		if diff := cmp.Diff(w, g); diff != "" {
			mismatches++
			if mismatches <= 10 {
				t.Errorf("%s %d: render.js differs from shared/render (-go +js):\n%s", what, i, diff)
			}
		}
	}
	for i := range want.Calls {
		check(fmt.Sprintf("call %.60q", calls[i].Input), i, want.Calls[i], got.Calls[i])
	}
	for i := range want.Clips {
		check("clip", i, want.Clips[i], got.Clips[i])
		check("notice", i, want.Notes[i], got.Notes[i])
	}
	for i := range want.Scopes {
		check("scope", i, want.Scopes[i], got.Scopes[i])
	}
	return mismatches
}

// shot saves a PNG of the viewport among the test's artifacts (under
// -outputdir with -artifacts, as make e2e-browser runs it).
func shot(t *testing.T, ctx context.Context, name string, width, height int64) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if len(b) < 1000 || int64(cfg.Width) != width || int64(cfg.Height) != height {
		t.Errorf("screenshot %s: %d bytes, %dx%d; want a non-empty %dx%d PNG", name, len(b), cfg.Width, cfg.Height, width, height)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%dx%d, %d bytes)", path, cfg.Width, cfg.Height, len(b))
}
