//go:build e2e

package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fluidbox/fluidbox/shared/browsertest"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// dangerPolicy lets reads through and asks about removals and pushes.
const dangerPolicy = `{"name":"web-danger","default_verdict":"deny","rules":[
 {"id":"reads","tool":"Bash","match":{"command_prefix":["git status","ls"]},"verdict":"allow"},
 {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"},
 {"id":"ask-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session"}]}`

// TestBrowserDangerousCard: a card for a destructive line says so above
// the call, highlights the part of the compound line the rule asked about,
// names the policy, and makes Deny the primary button instead of Approve;
// a push rule's "Approve for run" says it covers force pushes. An ordinary
// card has none of it.
func TestBrowserDangerousCard(t *testing.T) {
	s := newStack(t, false)
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(dangerPolicy), &pol); err != nil {
		t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		t.Fatal(err)
	}
	runner, err := client.New(s.url, ses.Token)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for call, line := range map[string]string{"c-rm": "git status && rm -rf /srv/app && ls", "c-push": "git push --force origin main", "c-plain": "rm build.log"} {
		in, _ := json.Marshal(map[string]string{"command": line})
		ans, err := runner.Permission(ctx, ses.ID, client.PermissionRequest{ToolCallID: call, ToolName: "Bash", Input: in}, 0)
		if err != nil || ans.Decision != vocab.Pending {
			t.Fatalf("%s: %q = %+v (%v), want pending", call, line, ans, err)
		}
		ids[call] = ans.ApprovalID
	}
	card := func(call string) string { return `li.approval[data-approval-id="` + ids[call] + `"]` }

	b := browsertest.Start(t, 1280, 1400, false)
	step, cancel := context.WithTimeout(b, 60*time.Second)
	defer cancel()
	err = chromedp.Do(step, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(chromedp.CSS(card("c-rm"))), chromedp.WaitVisible(chromedp.CSS(card("c-plain"))), chromedp.WaitVisible(chromedp.CSS(card("c-push"))))
	if err != nil {
		t.Fatalf("the page: %v", err)
	}
	if got := text(t, step, card("c-rm")+" .danger"); !strings.Contains(got, "destructive: rm removes recursively or by force") {
		t.Errorf("the rm card's warning reads %q", got)
	}
	if got := text(t, step, card("c-rm")+" .matched mark"); got != "rm -rf /srv/app" {
		t.Errorf("the highlighted part reads %q, want rm -rf /srv/app", got)
	}
	if got := text(t, step, card("c-rm")+" .matched"); !strings.Contains(got, "part 2 of 3") {
		t.Errorf("the matched part reads %q, want part 2 of 3", got)
	}
	if got := text(t, step, card("c-rm")+" .facts"); !strings.Contains(got, "web-danger ("+pol.ID+" v1)") {
		t.Errorf("the facts read %q, want the policy by name", got)
	}
	bg := func(sel string) string {
		return eval[string](t, step, `getComputedStyle(document.querySelector('`+sel+`')).backgroundColor`)
	}
	const white = "rgb(255, 255, 255)"
	if once, deny := bg(card("c-rm")+" button.approve-once"), bg(card("c-rm")+" button.deny"); once != white || deny == white {
		t.Errorf("on a dangerous card Approve once is %s and Deny %s; want Approve plain and Deny the filled, primary button", once, deny)
	}
	if once, deny := bg(card("c-plain")+" button.approve-once"), bg(card("c-plain")+" button.deny"); once == white || deny != white {
		t.Errorf("on an ordinary card Approve once is %s and Deny %s; want Approve primary", once, deny)
	}
	if n := eval[int](t, step, `document.querySelectorAll('`+card("c-plain")+` .danger, `+card("c-plain")+` .matched').length`); n != 0 {
		t.Errorf("an ordinary card has %d warnings", n)
	}
	if got := text(t, step, card("c-push")+" .danger"); !strings.Contains(got, "force push") {
		t.Errorf("the push card's warning reads %q", got)
	}
	if got := text(t, step, card("c-push")+" .choice:nth-child(2) .scope"); !strings.Contains(got, "force pushes and pushes to protected branches included") {
		t.Errorf("the push card's Approve for run reads %q, want what it covers", got)
	}
	if err := chromedp.Do(step, chromedp.ScrollIntoView(chromedp.CSS(card("c-rm")))); err != nil {
		t.Fatal(err)
	}
	shot(t, step, "dangerous-card.png", 1280, 1400)
}
