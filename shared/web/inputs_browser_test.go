//go:build e2e

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fluidbox/fluidbox/shared/browsertest"
	"github.com/fluidbox/fluidbox/shared/elicitation/elicitationtest"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// newRun creates a run under the test policy and returns its id.
func (s *stack) newRun(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	var ses struct{ ID string }
	body := map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return ses.ID
}

// fileInput files a pending input request on run runID, as the broker
// does, and returns its id.
func (s *stack) fileInput(t *testing.T, runID, callID, server, url string) string {
	t.Helper()
	return elicitationtest.File(t, ledger.New(s.st, time.Now), store.InputRequest{RunID: runID, ToolCallID: callID, Server: server, URL: url}).ID
}

// TestBrowserLinksToOpen: at phone width, the "Links to open" panel shows
// each input request with the connection's name escaped and its link as
// text; an https link is offered in a new tab with no opener or referrer,
// a javascript: link never becomes a link; a long link does not spill off
// the screen. Done and Decline answer the requests as the signed-in
// admin, and the panel and its count follow.
func TestBrowserLinksToOpen(t *testing.T) {
	s := newStack(t, false)
	ses := s.newRun(t)
	const consent = "https://auth.example.test/consent?state=st8&pad="
	long := consent + strings.Repeat("x", 1500)
	open := s.fileInput(t, ses, "c1", "docs\u202e", long)
	script := s.fileInput(t, ses, "c2", "odd", "javascript:alert(document.cookie)")
	ctx := browsertest.Start(t, phoneWidth, phoneHeight, true)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	card := func(id string) string { return `li.input-request[data-input-request-id="` + id + `"]` }
	err := chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(chromedp.CSS(card(open))),
		chromedp.WaitVisible(chromedp.CSS(card(script))),
	)
	if err != nil {
		t.Fatalf("sign in and find the links: %v", err)
	}
	checkOpenCard(t, step, card(open), ses, consent)
	checkScriptCard(t, step, card(script))
	if n := eval[int](t, step, `document.querySelectorAll('a[href^="javascript"], a[href^="JAVASCRIPT"]').length`); n != 0 {
		t.Errorf("the page holds %d javascript: links", n)
	}
	if w := eval[int](t, step, `document.documentElement.scrollWidth`); w > phoneWidth {
		t.Errorf("with a %d-character link the page is %d px wide in a %d px window", len(long), w, phoneWidth)
	}
	waitText(t, step, "#inputs-count", "2")
	shot(t, step, "phone-links-to-open.png", phoneWidth, phoneHeight)

	answerInCard(t, step, card(open), "button.input-done", open+" completed: applied")
	answerInCard(t, step, card(script), "button.input-decline", script+" declined: applied")
	waitText(t, step, "#inputs-count", "0")
	if !eval[bool](t, step, `!document.getElementById("inputs-empty").hidden`) {
		t.Error("with every link answered the panel does not say none are waiting")
	}
	for id, want := range map[string]string{open: "completed", script: "declined"} {
		var r struct {
			Status    string `json:"status"`
			DecidedBy string `json:"decided_by"`
		}
		if err := s.admin.Do(context.Background(), "GET", "/v1/input-requests/"+id, nil, &r); err != nil || r.Status != want || r.DecidedBy != "admin" {
			t.Errorf("input request %s = %+v, %v; want %s by admin", id, r, err, want)
		}
	}
}

// checkOpenCard: the https request's card names the connection with its
// bidi override escaped, shows the link (its query included) as text,
// and offers it in a new tab with no opener and no referrer.
func checkOpenCard(t *testing.T, step context.Context, card, ses, consent string) {
	t.Helper()
	got := text(t, step, card)
	for _, want := range []string{"mcp__docs__connect", `connection docs\u{202E}`, consent, ses, "Done", "Decline"} {
		if !strings.Contains(got, want) {
			t.Errorf("the card reads %q, want %q in it", got, want)
		}
	}
	if strings.ContainsRune(got, '\u202e') {
		t.Errorf("the card shows a raw bidi override: %q", got)
	}
	var a struct {
		Href, Target, Rel, Referrer string
	}
	raw := eval[string](t, step, `JSON.stringify((() => { const a = document.querySelector('`+card+` a.open-link');
		return a ? {Href: a.href, Target: a.target, Rel: a.rel, Referrer: a.referrerPolicy} : {}; })())`)
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Href, consent) || a.Target != "_blank" || a.Rel != "noopener noreferrer" || a.Referrer != "no-referrer" {
		t.Errorf("the card's link = %+v, want the https link in a new tab, noopener noreferrer, no referrer", a)
	}
}

// checkScriptCard: the javascript: request's card shows the link as text
// and says it is not offered, with no link in it.
func checkScriptCard(t *testing.T, step context.Context, card string) {
	t.Helper()
	got := text(t, step, card)
	if !strings.Contains(got, "javascript:alert(document.cookie)") || !strings.Contains(got, "not an http or https URL, so it is not offered") {
		t.Errorf("the javascript: card reads %q, want the link as text and that it is not offered", got)
	}
	if n := eval[int](t, step, `document.querySelectorAll('`+card+` a').length`); n != 0 {
		t.Errorf("the javascript: card holds %d links", n)
	}
}

// answerInCard clicks a card's button and waits for the notice and for
// the card to go.
func answerInCard(t *testing.T, step context.Context, card, button, notice string) {
	t.Helper()
	if err := chromedp.Do(step, chromedp.ScrollIntoView(chromedp.CSS(card+" "+button)), chromedp.Click(chromedp.CSS(card+" "+button))); err != nil {
		t.Fatalf("click %s: %v", button, err)
	}
	waitText(t, step, "#notice", notice)
	if err := chromedp.Do(step, chromedp.WaitNotPresent(chromedp.CSS(card))); err != nil {
		t.Fatalf("the card after %s: %v", button, err)
	}
}

// TestBrowserOpensWhatSlackOpens: the page offers a link to click for
// exactly the cases of shared/slackbot/testdata/openable.json that say
// so, the file slackbot.Openable is held to: the page and Slack agree on
// which text becomes a link.
func TestBrowserOpensWhatSlackOpens(t *testing.T) {
	b, err := os.ReadFile("../slackbot/testdata/openable.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		URL  string `json:"url"`
		Open bool   `json:"open"`
		Why  string `json:"why"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, false)
	ses := s.newRun(t)
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = s.fileInput(t, ses, fmt.Sprintf("c%02d", i), "docs", c.URL)
	}
	ctx := browsertest.Start(t, phoneWidth, phoneHeight, true)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("token-save")),
	)
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
	waitText(t, step, "#inputs-count", strconv.Itoa(len(cases)))
	for i, c := range cases {
		card := `li.input-request[data-input-request-id="` + ids[i] + `"]`
		if got := eval[int](t, step, `document.querySelectorAll('`+card+` a.open-link').length`) == 1; got != c.Open {
			t.Errorf("%.60q (%s): the page offers it as a link: %v, want %v", c.URL, c.Why, got, c.Open)
		}
	}
}
