package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	fbrun "github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// The run and approvals the sample events in events/expire, events/sweep
// and events/approvals name.
const (
	FixtureRun      = "ses_fixture"
	OverdueApproval = "apr_fixtureoverdue"
	PendingApproval = "apr_fixturepending"
)

// fixturePolicy is FixtureRun's frozen policy: the rule its approvals cite.
const fixturePolicy = `{"name":"fixture","default_verdict":"deny","rules":[{"id":"fixture","tool":"Bash","verdict":"require_approval"}]}`

// seedApprovals writes FixtureRun with two pending approvals, the way the
// gate records them (approval row, pending call, approval.requested, the
// run's pending count): one overdue a minute ago, one due in an hour.
func seedApprovals(ctx context.Context, st *store.Store, now time.Time) error {
	created, err := redact.New(redact.SessionCreated{SessionID: FixtureRun, TrustTier: "trusted", Trigger: "api", Invoker: "admin"})
	if err != nil {
		return err
	}
	at := store.FormatTime(now)
	err = st.CreateRun(ctx, store.NewRun{
		Head: store.Head{RunID: FixtureRun, Status: vocab.Running, Invoker: "admin", TrustTier: "trusted", CreatedAt: at, PolicyID: "pol_fixture", PolicyVersion: 1,
			// A budget, as every run has (run creation requires one).
			BudgetLimit: 1_000_000, BudgetAvailable: 1_000_000},
		Policy:  store.PolicySnapshot{PolicyID: "pol_fixture", Version: 1, Digest: "sha256:fixture", Document: fixturePolicy},
		Created: created,
	})
	if err != nil {
		return err
	}
	led := ledger.New(st, func() time.Time { return now })
	for _, a := range []struct {
		id, call, cmd      string
		requested, expires time.Duration
	}{
		{OverdueApproval, "toolu_overdue", "rm -rf build", -16 * time.Minute, -time.Minute},
		{PendingApproval, "toolu_pending", "git push origin main", -time.Minute, time.Hour},
	} {
		input := map[string]any{"command": a.cmd}
		digest, err := redact.DigestJSON(input)
		if err != nil {
			return err
		}
		asked := permission.Asked{RunID: FixtureRun, ToolCallID: a.call, ToolName: "Bash", Input: input, Digest: digest}
		d := gate.Decision{Outcome: policy.VerdictRequireApproval, RuleID: "fixture", Verdict: policy.VerdictRequireApproval,
			ScopeKey: "Bash:" + a.cmd, Scope: policy.ScopeOnce, TTL: a.expires - a.requested}
		_, err = led.Append(ctx, FixtureRun, func(h store.Head) (store.Batch, error) {
			rec, err := permission.Record(st, h, asked, d, permission.Pin{ApprovalID: a.id}, now.Add(a.requested))
			return rec.Batch, err
		})
		if err != nil {
			return fmt.Errorf("approval %s: %w", a.id, err)
		}
	}
	return nil
}

// startEventBridge serves PutEvents on loopback (httptest listens on
// 127.0.0.1), accepting every entry and printing it to w.
func startEventBridge(w io.Writer) *httptest.Server {
	var mu sync.Mutex
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var in struct {
			Entries []struct{ DetailType, Detail string }
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		type result struct{ EventId string }
		out := struct {
			FailedEntryCount int
			Entries          []result
		}{}
		mu.Lock()
		for i, e := range in.Entries {
			fmt.Fprintf(w, "published %s %s\n", e.DetailType, e.Detail)
			out.Entries = append(out.Entries, result{EventId: fmt.Sprintf("local-%d", i)})
		}
		mu.Unlock()
		rw.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(rw).Encode(out)
	}))
}

// startNoKMS stands in for KMS, which the sample events never need (the
// harness seals nothing): every call is refused, so a function that asks
// fails here rather than calling AWS.
func startNoKMS() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, `{"__type":"KMSInternalException","message":"no KMS in the invoke harness"}`, http.StatusServiceUnavailable)
	}))
}

// seedGateRun creates a run on the fixture policy pol_example with Claude
// Code's tools, the way POST /v1/sessions does. Its id and token are not
// known in advance, so event files name them ${FIXTURE_SESSION_ID} and
// ${FIXTURE_SESSION_TOKEN}, and the harness substitutes them.
func seedGateRun(ctx context.Context, st *store.Store) (id, token string, err error) {
	limit := 5.0
	req := fbrun.CreateRequest{PolicyID: "pol_example", Capabilities: []string{"claude-code"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{&limit}
	v, err := fbrun.NewService(ledger.New(st, time.Now), time.Now).Create(ctx, auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, req)
	if err != nil {
		return "", "", err
	}
	return v.ID, v.Token, nil
}

// WebhookSecret signs the sample GitHub deliveries in events/github.
const WebhookSecret = "local-invoke-webhook-secret-0123"

// seedTrigger configures the repository of the sample GitHub deliveries
// (KaTeX/KaTeX, from the real payloads in shared/api/testdata/github).
func seedTrigger(ctx context.Context, st *store.Store) error {
	return st.PutTrigger(ctx, store.Trigger{
		ID: "trg_fixture", Repository: "KaTeX/KaTeX", PolicyID: "pol_example",
		Capabilities: []string{"claude-code"}, BudgetLimit: 1_000_000, Events: []string{"pull_request"},
		CreatedAt: store.FormatTime(time.Now()), CreatedBy: "admin",
	})
}
