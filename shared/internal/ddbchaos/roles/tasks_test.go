package roles_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slack-go/slack/slacktest"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/sweep"
)

const rolesAdmin = "roles-test-admin-token-0123456789"

// TestTaskFunctionsStayInTheirRoles: the functions no HTTP route reaches
// (expire, sweep, slack) do their table work within the IAM statements
// template.yaml gives them. The HTTP functions are checked by every
// stack of shared/api's tests (roles.Serve); these run their handlers
// here, as their main.go builds them, on a run the API made: the gate
// files two approvals and admits a model request, and a second run ends
// with a call waiting; the sweep denies that call's approval; a day later
// the expire task settles one approval, the sweep the other and the
// reservation, and the Slack function posts a message for each.
func TestTaskFunctionsStayInTheirRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	// As every function's main builds it (shared/function): numbering is
	// the notify function's, never a goroutine of the function that
	// appended, which would run under that function's role.
	led := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: rolesAdmin, Ledger: led})))
	t.Cleanup(srv.Close)
	call := func(want int, method, path, token string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %v, want %d", method, path, resp.StatusCode, out, want)
		}
		return out
	}
	pol := call(201, "POST", "/v1/policies", rolesAdmin, json.RawMessage(`{"name":"ask","default_verdict":"require_approval","rules":[]}`))["id"].(string)
	run := call(201, "POST", "/v1/sessions", rolesAdmin, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 2.5}})
	id, tok := run["id"].(string), run["token"].(string)
	var approvals []string
	for _, c := range []string{"c1", "c2"} {
		p := call(200, "POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": c, "tool_name": "Bash", "input": map[string]any{"command": "ls " + c}})
		a, _ := p["approval_id"].(string)
		if a == "" {
			t.Fatalf("permission = %v, want a pending approval", p)
		}
		approvals = append(approvals, a)
	}
	call(201, "POST", "/v1/sessions/"+id+"/admissions", tok, map[string]any{"request_id": "req-1", "model": "claude-haiku-4-5", "max_output_tokens": 100, "input_tokens_upper_bound": 100})
	// A second run, ended with a call still waiting: the sweep denies it.
	ended := call(201, "POST", "/v1/sessions", rolesAdmin, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	call(200, "POST", "/v1/sessions/"+ended["id"].(string)+"/permission", ended["token"].(string), map[string]any{"tool_call_id": "c1", "tool_name": "Bash", "input": map[string]any{"command": "ls"}})
	call(200, "POST", "/v1/sessions/"+ended["id"].(string)+"/end", rolesAdmin, map[string]any{"reason": "exited", "exit_status": 0})

	later := func() time.Time { return time.Now().Add(48 * time.Hour) }
	log := slog.New(slog.DiscardHandler)
	tasks := expiry.NewHandler(approval.NewService(led, later), log)
	res, err := tasks.Expire(roles.As(ctx, "ExpireFunction"), expiry.Task{ApprovalID: approvals[0]})
	if err != nil || !res.Expired {
		t.Errorf("expire = %+v, %v", res, err)
	}
	asSweep := roles.As(ctx, "SweepFunction")
	sweeper := func(now func() time.Time) sweep.Sweeper {
		return sweep.Sweeper{Approvals: approval.NewService(led, now), Inputs: elicitation.NewService(led, now, log),
			Reservations: admission.New(led, nil, now), ReservationsAfter: time.Hour, Now: now, Log: log}
	}
	if n, err := sweeper(time.Now).Sweep(asSweep); err != nil || n != (sweep.Swept{DeniedApprovals: 1, PendingApprovals: 1}) {
		t.Errorf("sweep now = %+v, %v; want the ended run's approval denied", n, err)
	}
	if n, err := sweeper(later).Sweep(asSweep); err != nil || n != (sweep.Swept{ExpiredApprovals: 1, SettledReservations: 1}) {
		t.Errorf("sweep a day later = %+v, %v; want the other approval expired and the reservation settled", n, err)
	}

	slack := slacktest.NewTestServer()
	slack.Start()
	t.Cleanup(slack.Stop)
	n := slackbot.NewNotifier(slackbot.NewClient(slackbot.Config{BotToken: "xoxb-roles", APIURL: slack.GetAPIURL()}), st, "C1", log, time.Now)
	for _, a := range approvals {
		if err := n.Show(roles.As(ctx, "SlackFunction"), a); err != nil {
			t.Errorf("slack message of %s: %v", a, err)
		}
	}
}
