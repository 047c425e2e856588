//go:build unix

package slackbot_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fluidbox/fluidbox/shared/internal/rie"
)

// TestDeployedEntryPoint runs the Slack function's bootstrap, built as
// deployed, under the Lambda Runtime Interface Emulator: a bus
// notification it cannot deliver (Slack down) is a function error, so
// Lambda retries it and finally puts its failure record on the retry
// queue; a batch from that queue is answered with the message as a batch
// item failure while Slack is down, and with none, the message posted,
// once Slack is back.
func TestDeployedEntryPoint(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	work := t.TempDir()
	var emulator, bootstrap string
	var errRIE, errFn error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); emulator, errRIE = rie.BuildRIE(ctx, filepath.Join(work, "rie")) }()
	go func() {
		defer wg.Done()
		bootstrap, errFn = rie.BuildFunction(ctx, "github.com/fluidbox/fluidbox/functions/slack", filepath.Join(work, "slack"))
	}()
	wg.Wait()
	if err := errors.Join(errRIE, errFn); err != nil {
		t.Fatal(err)
	}

	s := newStack(t, nil, nil)
	s.slack.fail.Store(true)
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	// The dev server's in-process retries give up first, so what follows
	// is the function's doing alone.
	waitFor(t, "the in-process retries to give up", func() bool { return strings.Contains(s.logs.String(), "giving up on a message") })

	// The deployed function speaks to Slack over https only: slacktest
	// behind a TLS proxy on loopback, its certificate the one the
	// bootstrap trusts (SSL_CERT_FILE).
	target, err := url.Parse(s.slack.url())
	if err != nil {
		t.Fatal(err)
	}
	tlsSlack := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}))
	t.Cleanup(tlsSlack.Close)
	certFile := filepath.Join(work, "slack.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSlack.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	e, err := rie.Start(ctx, emulator, bootstrap, []string{
		"SSL_CERT_FILE=" + certFile,
		"FLUIDBOX_TABLE=" + s.st.Table(),
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.dbURL,
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"FLUIDBOX_SLACK_BOT_TOKEN=" + botToken,
		"FLUIDBOX_SLACK_CHANNEL=" + channel,
		"FLUIDBOX_SLACK_API_URL=" + tlsSlack.URL + target.Path,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Close()
		if t.Failed() {
			t.Logf("emulator output:\n%s", e.Logs())
		}
	})
	invoke := func(v any) ([]byte, error) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ictx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		return e.Invoke(ictx, b)
	}

	ev := requested(apr)
	var fe *rie.FunctionError
	if _, err := invoke(ev); !errors.As(err, &fe) {
		t.Fatalf("bus notification with Slack down = %v, want a function error (Lambda retries it)", err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", EventSource: "aws:sqs", Body: failureRecord(t, ev, fe.Message)}}}
	out, err := invoke(batch)
	if err != nil || string(out) != `{"batchItemFailures":[{"itemIdentifier":"m-1"}]}` {
		t.Fatalf("retry batch with Slack down = %s, %v; want m-1 as a batch item failure", out, err)
	}
	s.slack.fail.Store(false)
	out, err = invoke(batch)
	if err != nil || string(out) != `{"batchItemFailures":[]}` {
		t.Fatalf("retry batch with Slack back = %s, %v; want no failures", out, err)
	}
	if posts, _, _, _ := s.slack.snapshot(); len(posts) != 1 || !strings.Contains(blocksText(posts[0].Blocks), "rm a") {
		t.Errorf("posts = %+v, want the approval's one message", posts)
	}
	if strings.Contains(e.Logs(), botToken) {
		t.Error("the function logged the bot token")
	}
}
