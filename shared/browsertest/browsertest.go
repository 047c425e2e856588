// Package browsertest starts the headless Chromium the e2e browser tests drive
// (the approvals page's in shared/web, the CLI's in cmd/fluidbox): one set
// of flags for this machine, so the tests cannot drift apart in how the
// browser is started.
//
// Chromium comes from Debian's chromium package (`make e2e` installs it);
// FLUIDBOX_CHROMIUM names another binary.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is the browser binary, or the test fails saying how to get
// one.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FLUIDBOX_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: install Debian's chromium package (apt-get install -y chromium) or set FLUIDBOX_CHROMIUM; `make e2e` installs it")
	return ""
}

// Start starts headless Chromium (as root, no sandbox; no background
// networking on a closed network) with an empty profile, its viewport
// width x height (a phone's when mobile), and returns its context; the
// browser stops when the test ends. extra flags are appended.
func Start(t testing.TB, width, height int64, mobile bool, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ChromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	var vopts []chromedp.EmulateViewportOption
	if mobile {
		vopts = append(vopts, chromedp.EmulateMobile, chromedp.EmulateScale(1))
	}
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height, vopts...)); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}
