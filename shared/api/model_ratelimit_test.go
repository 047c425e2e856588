package api_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
)

// TestModelProxyRateLimited: the model proxy's requests count against the
// run's per-run limit like its other session-token requests; past it the
// answer is Anthropic's 429 rate_limit_error with Retry-After, nothing is
// forwarded and nothing is appended to the ledger (a sandbox cannot flood
// it with refusals).
func TestModelProxyRateLimited(t *testing.T) {
	t.Parallel()
	up := scriptedmodel.New(scriptedmodel.SayText("one"), scriptedmodel.SayText("two"), scriptedmodel.SayText("three"))
	defer up.Close()
	p := newProxyStack(t, up.URL(), func(c *api.Config) { c.RunRequestsPerMinute, c.Now = 3, testenv.MinuteStart() })
	id, tok := p.gateRun(p.policy(basicPolicy), runOpts{budget: 1})
	ctx := context.Background()
	client := p.sdk(id, tok)
	for i := range 3 {
		if _, err := client.Messages.New(ctx, userMessage("hello")); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	p.waitSettled(id, 3)
	before := len(p.ledger(id))
	_, err := client.Messages.New(ctx, userMessage("hello"), option.WithMaxRetries(0))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Type() != "rate_limit_error" {
		t.Fatalf("4th request = %v, want 429 rate_limit_error", err)
	}
	if secs, err := strconv.Atoi(ae.Response.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 60 {
		t.Errorf("Retry-After = %q, want 1..60 s", ae.Response.Header.Get("Retry-After"))
	}
	if n := len(up.Requests()); n != 3 {
		t.Errorf("the upstream saw %d requests, want 3", n)
	}
	if after := len(p.ledger(id)); after != before {
		t.Errorf("the limited request appended %d events", after-before)
	}
}
