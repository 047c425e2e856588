package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sync/errgroup"

	"github.com/fluidbox/fluidbox/shared/internal/rie"
)

// Built once per test binary, in TestMain: the emulator and each
// function's bootstrap, by function name.
var (
	emulator   string
	bootstraps = map[string]string{}
)

// functionsWithEvents are the functions events/ has sample events for.
var functionsWithEvents = []string{"control", "gate", "github", "approvals", "expire", "sweep", "notify", "launch"}

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds what the cases run, two builds at a time, then runs
// them: each case would otherwise build its function and the emulator.
func buildAndRun(m *testing.M) int {
	if err := os.Chdir("../../.."); err != nil { // the repository root
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	work, err := os.MkdirTemp("", "invoke-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	g.Go(func() (err error) {
		emulator, err = rie.BuildRIE(gctx, work)
		return err
	})
	var mu sync.Mutex
	for _, fn := range functionsWithEvents {
		g.Go(func() error {
			path, err := rie.BuildFunction(gctx, "./functions/"+fn, filepath.Join(work, fn))
			mu.Lock()
			bootstraps[fn] = path
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// TestSampleEvents posts every sample event in events/ through the real
// emulator and the built bootstrap, and checks the answer each one is for:
// the status of an HTTP event, the result of any other.
func TestSampleEvents(t *testing.T) {
	type want struct {
		status    int    // HTTP functions: the response status
		result    string // other functions: the JSON result
		published int    // entries put on the EventBridge stand-in
	}
	cases := map[string]want{
		"events/control/healthz.json":                       {status: 200},
		"events/control/create-policy.json":                 {status: 201},
		"events/control/create-session.json":                {status: 201},
		"events/control/list-capabilities.json":             {status: 200},
		"events/control/create-session-unknown-policy.json": {status: 400},
		"events/control/create-trigger-own-secret.json":     {status: 201},
		"events/gate/permission-allow.json":                 {status: 200},
		"events/gate/permission-pending.json":               {status: 200},
		"events/gate/permission-schema.json":                {status: 200},
		"events/gate/admission.json":                        {status: 201},
		"events/github/pull-request-fork.json":              {status: 201},
		"events/github/pull-request-bad-signature.json":     {status: 401},
		"events/approvals/list-pending.json":                {status: 200},
		"events/approvals/get-approval.json":                {status: 200},
		"events/approvals/decide-approved-once.json":        {status: 200},
		"events/approvals/list-session-approvals.json":      {status: 200},
		"events/approvals/list-grants.json":                 {status: 200},
		"events/expire/overdue.json":                        {result: `{"approval_id":"apr_fixtureoverdue","expired":true,"status":"expired"}`},
		"events/expire/unknown.json":                        {result: `{"approval_id":"apr_nosuchapproval","expired":false,"not_found":true}`},
		"events/sweep/scheduled.json":                       {result: `{"declined_input_requests":0,"denied_for_run":0,"expired":1,"expired_input_requests":0,"pending_approvals":1,"settled_reservations":0}`},
		"events/notify/insert-pending.json":                 {result: `{"batchItemFailures":[]}`, published: 1},
		"events/notify/modify-approved-once.json":           {result: `{"batchItemFailures":[]}`, published: 1},
		"events/notify/modify-expired.json":                 {result: `{"batchItemFailures":[]}`, published: 1},
		"events/notify/unrelated-event-row.json":            {result: `{"batchItemFailures":[]}`},
		"events/notify/insert-triggered-run.json":           {result: `{"batchItemFailures":[]}`, published: 1},
		"events/notify/insert-halted.json":                  {result: `{"batchItemFailures":[]}`, published: 1},
		"events/notify/insert-unsequenced-event.json":       {result: `{"batchItemFailures":[]}`},
		"events/launch/start-manual-run.json":               {result: `{"launched":false}`},
		"events/launch/finish-after-failed-start.json":      {result: `{"reason":"failed"}`},
	}
	for _, dir := range functionsWithEvents {
		files, _ := filepath.Glob("events/" + dir + "/*.json")
		for _, f := range files {
			if _, ok := cases[f]; !ok {
				t.Errorf("%s: the test does not know this event: add it here", f)
			}
		}
	}
	// In parallel: each case has its own minidyn, emulator and bootstrap
	// process, and mostly waits for them.
	for _, f := range sortedKeys(cases) {
		w := cases[f]
		fn := strings.Split(f, "/")[1]
		t.Run(strings.TrimPrefix(f, "events/"), func(t *testing.T) {
			t.Parallel()
			args := []string{"-fn", fn, "-event", f, "-bootstrap", bootstraps[fn], "-emulator", emulator}
			if f == "events/control/healthz.json" {
				args = args[:4] // one case builds, as `make invoke` does
			}
			var out, errs bytes.Buffer
			if err := run(context.Background(), args, &out, &errs); err != nil {
				t.Fatalf("invoke %s: %v\n%s", f, err, errs.String())
			}
			if n := strings.Count("\n"+errs.String(), "\npublished "); n != w.published {
				t.Errorf("invoke %s published %d entries, want %d:\n%s", f, n, w.published, errs.String())
			}
			if w.result != "" {
				var got, want any
				if err := json.Unmarshal(out.Bytes(), &got); err != nil {
					t.Fatalf("invoke %s printed %q: %v", f, out.String(), err)
				}
				_ = json.Unmarshal([]byte(w.result), &want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("invoke %s (-want +got):\n%s", f, diff)
				}
				return
			}
			var resp struct {
				StatusCode int    `json:"statusCode"`
				Body       string `json:"body"`
			}
			if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
				t.Fatalf("invoke %s printed %q: %v", f, out.String(), err)
			}
			if resp.StatusCode != w.status {
				t.Errorf("invoke %s = %d %s, want %d", f, resp.StatusCode, resp.Body, w.status)
			}
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
