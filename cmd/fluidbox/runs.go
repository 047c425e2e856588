package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
)

// runView is a run as the CLI shows it: the fields of GET /v1/sessions/{id}
// it prints, and the rest kept whole for --json.
type runView struct {
	ID            string   `json:"id"`
	Status        string   `json:"status"`
	TrustTier     string   `json:"trust_tier"`
	Autonomous    bool     `json:"autonomous"`
	Trigger       string   `json:"trigger"`
	CreatedAt     string   `json:"created_at"`
	PolicyID      string   `json:"policy_id"`
	PolicyVersion int      `json:"policy_version"`
	Workspace     string   `json:"workspace"`
	Tools         []string `json:"tools"`
	Warnings      []string `json:"warnings"`
	GitHub        *struct {
		Repository  string `json:"repository"`
		PullRequest int    `json:"pull_request"`
		HeadSHA     string `json:"head_sha"`
	} `json:"github"`
	Budget struct {
		LimitUSD float64 `json:"limit_usd"`
		SpentUSD float64 `json:"spent_usd"`
	} `json:"budget"`
	TokenPending bool `json:"token_pending"`
}

const runsCreateUsage = "runs create --policy POLICY_ID --budget USD [--policy-version N] [--capabilities LIST] [--connections LIST] [--workspace DIR] [--tier read_only] [--autonomous] [--shadow-policy POLICY_ID] [--json]"

// runs is `fluidbox runs list|get|create|token`.
func runs(ctx context.Context, args []string, e cmdEnv) error {
	if len(args) == 0 || isHelp(args[0]) {
		c, _ := lookup("runs")
		fmt.Fprint(e.stderr, commandHelp(c)+"\nsubcommands (each takes --json and --jq EXPR):\n  list [--status S] [--trigger T] [--repository OWNER/NAME] [--since T] [--until T] [--limit N] [--all] [--cursor C] [--json]\n  get ID [--json]\n  "+runsCreateUsage+"\n      create a run and print its tokens as export lines, shown once\n  token ID [--json]   issue a triggered run's tokens, once (admin token, or FLUIDBOX_TRIGGER_KEY)\n")
		if len(args) == 0 {
			return usagef("want a subcommand: list, get, create or token")
		}
		return nil
	}
	switch args[0] {
	case "list":
		return runsList(ctx, args[1:], e)
	case "get":
		return runsGet(ctx, args[1:], e)
	case "create":
		return runsCreate(ctx, args[1:], e)
	case "token":
		return runsToken(ctx, args[1:], e)
	}
	return usagef("unknown subcommand %q: want list, get, create or token", args[0])
}

// parseTime reads an RFC 3339 time or a duration before now ("24h").
func parseTime(s string, now time.Time) (string, error) {
	if s == "" {
		return "", nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d).UTC().Format(time.RFC3339), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Format(time.RFC3339), nil
	}
	return "", usagef("%q is neither an RFC 3339 time nor a duration such as 24h", s)
}

// setWindow sets a listing's created_after and created_before from --since
// and --until (each a time or a duration before now; "" for none).
func setWindow(q url.Values, since, until string, now time.Time) error {
	for k, v := range map[string]string{"created_after": since, "created_before": until} {
		t, err := parseTime(v, now)
		if err != nil {
			return err
		}
		if t != "" {
			q.Set(k, t)
		}
	}
	return nil
}

func runsList(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("runs list", e.stderr, "runs list [--status S] [--trigger T] [--repository OWNER/NAME] [--since T] [--until T] [--limit N] [--all] [--cursor C] [--json]")
	f := addAPIFlags(fs, e.getenv)
	status := fs.String("status", "", "only runs in this status: running, awaiting_approval or ended")
	trigger := fs.String("trigger", "", "only runs started by this trigger: manual or github")
	repo := fs.String("repository", "", "only runs a GitHub delivery of this owner/name started")
	since := fs.String("since", "", "only runs created at or after this (RFC 3339, or a duration ago such as 24h)")
	until := fs.String("until", "", "only runs created at or before this (RFC 3339, or a duration ago)")
	limit := fs.Int("limit", 50, "runs per page (1-100)")
	all := fs.Bool("all", false, "follow every page to the end (progress on stderr)")
	cursor := fs.String("cursor", "", "continue from a page's next_cursor")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	now := time.Now()
	q := url.Values{}
	for k, v := range map[string]string{"status": *status, "trigger": *trigger, "repository": *repo} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if err := setWindow(q, *since, *until, now); err != nil {
		return err
	}
	q.Set("limit", fmt.Sprint(*limit))
	c, err := f.client()
	if err != nil {
		return err
	}
	list, next, err := readPages(ctx, c, "/v1/sessions", "sessions", q, *cursor, *all, e.stderr)
	if err != nil {
		return err
	}
	return printListing(e, f.outFlags, "sessions", list, next, "no runs", "RUN\tSTATUS\tTIER\tTRIGGER\tPULL REQUEST\tSPENT\tCREATED", func(raw json.RawMessage) (string, error) {
		var r runView
		if err := json.Unmarshal(raw, &r); err != nil {
			return "", fmt.Errorf("a run in the answer is not what fluidbox sends: %w", err)
		}
		pr := "-"
		if r.GitHub != nil {
			pr = fmt.Sprintf("%s#%d", clean(r.GitHub.Repository, 60), r.GitHub.PullRequest)
		}
		st := clean(r.Status, 20)
		if r.TokenPending {
			st += " (no token yet)"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t$%.4f of $%.2f\t%s", clean(r.ID, 64), st, clean(r.TrustTier, 12), clean(r.Trigger, 12), pr, r.Budget.SpentUSD, r.Budget.LimitUSD, clean(r.CreatedAt, 30)), nil
	}, "more runs: --cursor "+next+" (or --all)")
}

func runsGet(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("runs get", e.stderr, "runs get ID [--json]")
	f := addAPIFlags(fs, e.getenv)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one run id (ses_...)")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var r runView
	if done, err := fetch(ctx, c, f.outFlags, e.stdout, "GET", "/v1/sessions/"+url.PathEscape(pos[0]), nil, &r, "a run"); done {
		return err
	}
	tier := clean(r.TrustTier, 12)
	if r.Autonomous {
		tier += " (autonomous)"
	}
	workspace := clean(r.Workspace, 200)
	if workspace == "" {
		workspace = "(none: the policy's relative path globs match nothing)"
	}
	fmt.Fprintf(e.stdout, "run        %s\nstatus     %s\ntier       %s\ntrigger    %s\ncreated    %s\npolicy     %s\nworkspace  %s\nbudget     $%.4f spent of $%.2f\n",
		clean(r.ID, 64), clean(r.Status, 20), tier, clean(r.Trigger, 12), clean(r.CreatedAt, 30), policyName(ctx, c, r), workspace, r.Budget.SpentUSD, r.Budget.LimitUSD)
	if r.GitHub != nil {
		fmt.Fprintf(e.stdout, "github     %s#%d at %s\n", clean(r.GitHub.Repository, 100), r.GitHub.PullRequest, clean(r.GitHub.HeadSHA, 40))
	}
	if r.TokenPending {
		fmt.Fprintf(e.stdout, "tokens     none issued yet: fluidbox runs token %s\n", clean(r.ID, 64))
	}
	return nil
}

// policyName is a run's frozen policy as a human reads it: its name, id
// and version; the id and version alone when the name cannot be read.
func policyName(ctx context.Context, c *client.Client, r runView) string {
	id := fmt.Sprintf("%s version %d", clean(r.PolicyID, 40), r.PolicyVersion)
	var p struct {
		Document struct {
			Name string `json:"name"`
		} `json:"document"`
	}
	if err := c.Do(ctx, "GET", policyPath(r.PolicyID, r.PolicyVersion), nil, &p); err != nil || p.Document.Name == "" {
		return id
	}
	return fmt.Sprintf("%q (%s)", clean(p.Document.Name, 80), id)
}

// runsCreate creates a run (POST /v1/sessions) from flags and prints its
// tokens as the export lines the hook and the runner read; the policy's
// warnings for the run go to stderr.
func runsCreate(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("runs create", e.stderr, runsCreateUsage)
	f := addAPIFlags(fs, e.getenv)
	policyID := fs.String("policy", "", "the policy (pol_...) the run freezes")
	version := fs.Int("policy-version", 0, "a version of it (default: the latest)")
	budget := fs.Float64("budget", 0, "the run's budget in USD (model requests and brokered calls draw on it)")
	capabilities := fs.String("capabilities", "claude-code", "tool bundles, comma-separated (names or cap_ ids)")
	connections := fs.String("connections", "", "connections (con_...) whose tools the run may call, comma-separated")
	workspace := fs.String("workspace", "", "the absolute directory the agent works in; relative path globs resolve against it")
	tier := fs.String("tier", "", "read_only to narrow the run (default trusted)")
	autonomous := fs.Bool("autonomous", false, "no human is waited for: require_approval takes the policy's fallback")
	shadow := fs.String("shadow-policy", "", "a second policy evaluated beside the enforced one and recorded where it differs")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case *policyID == "":
		return usagef("--policy is required")
	case *budget <= 0:
		return usagef("--budget is required: the run's limit in USD, above 0")
	}
	body := map[string]any{"policy_id": *policyID, "capabilities": splitList(*capabilities), "budget": map[string]any{"limit_usd": *budget}, "autonomous": *autonomous}
	if *version > 0 {
		body["policy_version"] = *version
	}
	for k, v := range map[string]string{"workspace": *workspace, "trust_tier": *tier, "shadow_policy_id": *shadow} {
		if v != "" {
			body[k] = v
		}
	}
	if list := splitList(*connections); len(list) > 0 {
		body["connections"] = list
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, "POST", "/v1/sessions", body, &raw); err != nil {
		return explain(err)
	}
	if f.json {
		return f.write(e.stdout, raw)
	}
	var v struct {
		runView
		Token       string `json:"token"`
		RunnerToken string `json:"runner_token"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("the answer is not a run: %w", err)
	}
	for _, w := range v.Warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", clean(w, 400))
	}
	fmt.Fprintf(e.stderr, "run %s created (%s, %d tools); its tokens are shown this once:\n", clean(v.ID, 64), clean(v.TrustTier, 12), len(v.Tools))
	return printTokens(e.stdout, v.ID, v.Token, v.RunnerToken)
}

// splitList reads a comma-separated flag value, without empty items.
func splitList(s string) []string {
	list := []string{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			list = append(list, x)
		}
	}
	return list
}

// printTokens prints a run's tokens as shell export lines, refusing any
// that a shell line could not hold as it is.
func printTokens(w io.Writer, sessionID, token, runnerToken string) error {
	for _, v := range []string{sessionID, token, runnerToken} {
		if strings.ContainsAny(v, " \t\n'\"$`\\") {
			return fmt.Errorf("the server's answer holds characters a shell line cannot")
		}
	}
	_, err := fmt.Fprintf(w, "export FLUIDBOX_SESSION_ID=%s\nexport FLUIDBOX_SESSION_TOKEN=%s\nexport FLUIDBOX_RUNNER_TOKEN=%s\n", sessionID, token, runnerToken)
	return err
}

// runsToken issues a triggered run's tokens and prints them as the
// variables the hook and the runner read.
func runsToken(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("runs token", e.stderr, "runs token ID [--key KEY] [--json]")
	f := addAPIFlags(fs, e.getenv)
	key := fs.String("key", e.getenv("FLUIDBOX_TRIGGER_KEY"), "a trigger's runner key instead of the admin token (FLUIDBOX_TRIGGER_KEY)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one run id (ses_...)")
	}
	if *key != "" {
		f.token = *key
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var t struct {
		SessionID   string `json:"session_id"`
		Token       string `json:"token"`
		RunnerToken string `json:"runner_token"`
	}
	if err := c.Do(ctx, "POST", "/v1/sessions/"+url.PathEscape(pos[0])+"/token", nil, &t); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == 409 {
			return fmt.Errorf("%w (a run's tokens are issued once)", err)
		}
		return explain(err)
	}
	if f.json {
		return f.write(e.stdout, t)
	}
	return printTokens(e.stdout, t.SessionID, t.Token, t.RunnerToken)
}
