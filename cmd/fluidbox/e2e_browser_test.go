//go:build e2e

// The approvals page end to end, in headless Chromium: run by `make e2e`
// (go test -tags e2e), never by `make test`. Chromium comes from Debian's
// chromium package; FLUIDBOX_CHROMIUM names another binary.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fluidbox/fluidbox/shared/browsertest"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const (
	screenWidth  = 1280
	screenHeight = 900
)

// browser starts headless Chromium in a window of the screen's size.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, screenWidth, screenHeight, false, chromedp.WindowSize(screenWidth, screenHeight))
}

// TestBrowserApproveByClick: a runner waits on a pending call; a human
// opens the page, enters the token, sees the call in the attention strip
// and clicks "Approve once"; the runner's waiting request gets allow, and
// the run's timeline on the page shows the decision.
func TestBrowserApproveByClick(t *testing.T) {
	s := newStack(t, nil)
	ses, token := s.newRun(t)

	runner, err := client.New(s.url, token)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		ans client.Answer
		err error
	}
	got := make(chan answer, 1)
	go func() {
		in, _ := json.Marshal(map[string]string{"command": "rm -rf build/"})
		ans, err := runner.Permission(context.Background(), ses,
			client.PermissionRequest{ToolCallID: "toolu_e2e_click", ToolName: "Bash", Input: in}, 90*time.Second)
		got <- answer{ans, err}
	}()
	apr := s.pendingFor(t, ses)

	ctx := browser(t)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	card := `li.approval[data-approval-id="` + apr.ID + `"]`
	err = chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(chromedp.CSS(card)),
		chromedp.SendKeys(chromedp.ID("run-id"), ses),
		chromedp.Click(chromedp.ID("run-follow")),
		chromedp.WaitVisible(chromedp.CSS(`#timeline-body tr[data-seq="1"]`)),
	)
	if err != nil {
		t.Fatalf("open the page and find approval %s: %v", apr.ID, err)
	}
	text, err := chromedp.Run(step, chromedp.Text(chromedp.CSS(card)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Bash", "rm -rf build/", "rule ask-rm", ses, "left", "Approve once", "Approve for run", "Deny"} {
		if !strings.Contains(text, want) {
			t.Errorf("the approval card reads %q, want %q in it", text, want)
		}
	}
	shot(t, step, "pending.png")

	select {
	case a := <-got:
		t.Fatalf("the runner was answered before anyone clicked: %+v, %v", a.ans, a.err)
	default:
	}
	if err := chromedp.Do(step, chromedp.Click(chromedp.CSS(card+" button.approve-once"))); err != nil {
		t.Fatalf("click Approve once: %v", err)
	}
	select {
	case a := <-got:
		if a.err != nil || a.ans.Decision != vocab.Allow {
			t.Fatalf("the runner's waiting request = %+v, %v; want allow", a.ans, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runner's waiting request got no answer after the click")
	}

	err = chromedp.Do(step,
		chromedp.WaitNotPresent(chromedp.CSS(card)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline-body tr.allow`)),
	)
	if err != nil {
		t.Fatalf("the page after the click: %v", err)
	}
	notice, _ := chromedp.Run(step, chromedp.Text(chromedp.ID("notice")))
	if !strings.Contains(notice, apr.ID+" approved_once: applied") {
		t.Errorf("notice = %q, want %q", notice, apr.ID+" approved_once: applied")
	}
	timeline, _ := chromedp.Run(step, chromedp.Text(chromedp.ID("timeline-body")))
	for _, want := range []string{"approval.requested", "approval.decided", "approved_once by admin", "→ allow"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline reads %q, want %q in it", timeline, want)
		}
	}
	a, err := s.admin.Approval(context.Background(), apr.ID)
	if err != nil || a.Status != vocab.ApprovedOnce || a.DecidedBy != "admin" {
		t.Errorf("approval after the click = %+v, %v; want approved_once by admin", a, err)
	}
	shot(t, step, "decided.png")
}

// shot saves a PNG screenshot of the viewport in the test's artifact
// directory (kept under -outputdir with -artifacts, as make e2e runs it)
// and checks it is a PNG of the window's size.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if len(b) < 1000 || cfg.Width != screenWidth || cfg.Height != screenHeight {
		t.Errorf("screenshot %s: %d bytes, %dx%d; want a non-empty %dx%d PNG", name, len(b), cfg.Width, cfg.Height, screenWidth, screenHeight)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%dx%d, %d bytes)", path, cfg.Width, cfg.Height, len(b))
}
