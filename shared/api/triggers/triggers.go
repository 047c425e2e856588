package triggers

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Trigger configurations say which run a repository's events start: the
// same policy, bundles, connections, autonomy and budget a POST
// /v1/sessions body names, checked the same way (run.Service.Check) when
// the configuration is made. A repository has at most one configuration,
// so which run a pull request starts never depends on which of two
// configurations a lookup happens to find.

// eventPullRequest is the only event type a trigger can name today.
const eventPullRequest = "pull_request"

type triggerRequest struct {
	Repository    string `json:"repository"`
	PolicyID      string `json:"policy_id"`
	PolicyVersion int    `json:"policy_version,omitempty"`
	// ShadowPolicyID (and ShadowPolicyVersion, else the latest at the
	// event) is evaluated beside the policy in every run it starts.
	ShadowPolicyID      string   `json:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int      `json:"shadow_policy_version,omitempty"`
	Capabilities        []string `json:"capabilities"`
	Connections         []string `json:"connections,omitempty"`
	Autonomous          bool     `json:"autonomous"`
	Budget              *struct {
		LimitUSD *float64 `json:"limit_usd"`
	} `json:"budget"`
	TrustTier string   `json:"trust_tier,omitempty"`
	Events    []string `json:"events,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	// Verify is what the model proxy does in the trigger's runs when a
	// tool result answers a call the gate did not allow: "halt" (the
	// default) or "record".
	Verify run.Verify `json:"verify,omitempty"`
	// OwnWebhookSecret gives the trigger its own webhook secret, returned
	// once (in the answer of the creation or of the update that turns it
	// on), instead of the server's.
	OwnWebhookSecret bool `json:"own_webhook_secret,omitempty"`
	// SlackChannel, a Slack channel id, takes the approval messages of the
	// trigger's runs instead of FLUIDBOX_SLACK_CHANNEL.
	SlackChannel string `json:"slack_channel,omitempty"`
	// Prompt is what a launched run's agent is asked; Report how its
	// result goes back to the pull request; TimeoutSeconds how long the
	// agent may run (launch.go).
	Prompt         string `json:"prompt,omitempty"`
	Report         string `json:"report,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
	// Schedule, an EventBridge cron(...) or rate(...) expression, also
	// starts runs on the head of branch Ref (default: the repository's
	// default branch) at each due time (schedule.go).
	Schedule string `json:"schedule,omitempty"`
	Ref      string `json:"ref,omitempty"`
	// RotateRunnerKey, on an update, replaces the trigger's runner key
	// with a new one, returned once (the old one stops working).
	RotateRunnerKey bool `json:"rotate_runner_key,omitempty"`
}

type triggerBudget struct {
	LimitUSD float64 `json:"limit_usd"`
}

type triggerView struct {
	ID         string `json:"id"`
	Repository string `json:"repository"`
	PolicyID   string `json:"policy_id"`
	// PolicyVersion is absent when runs take the policy's latest version
	// at the time of the event.
	PolicyVersion       int           `json:"policy_version,omitempty"`
	ShadowPolicyID      string        `json:"shadow_policy_id,omitempty"`
	ShadowPolicyVersion int           `json:"shadow_policy_version,omitempty"`
	Capabilities        []string      `json:"capabilities"`
	Connections         []string      `json:"connections"`
	Autonomous          bool          `json:"autonomous"`
	Budget              triggerBudget `json:"budget"`
	TrustTier           string        `json:"trust_tier,omitempty"`
	Events              []string      `json:"events"`
	Workspace           string        `json:"workspace,omitempty"`
	Verify              run.Verify    `json:"verify"`
	// OwnWebhookSecret: deliveries must be signed with the trigger's own
	// secret. WebhookSecret is that secret, only in the answer that gave
	// it to the trigger.
	OwnWebhookSecret bool   `json:"own_webhook_secret,omitempty"`
	WebhookSecret    string `json:"webhook_secret,omitempty"`
	SlackChannel     string `json:"slack_channel,omitempty"`
	Prompt           string `json:"prompt,omitempty"`
	Report           string `json:"report"`
	TimeoutSeconds   int    `json:"timeout_seconds"`
	Schedule         string `json:"schedule,omitempty"`
	Ref              string `json:"ref,omitempty"`
	// RunnerKey may have the tokens of this trigger's runs issued (POST
	// /v1/sessions/{id}/token), once each; in the answer of the creation
	// (or of an update that rotates it) only.
	RunnerKey string `json:"runner_key,omitempty"`
	CreatedAt string `json:"created_at"`
	CreatedBy string `json:"created_by"`
	Revision  int    `json:"revision"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// repositoryPattern is GitHub's "owner/name": an owner of at most 39
// letters, digits and hyphens, a name of at most 100 letters, digits,
// '.', '-' and '_'.
var repositoryPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)

// slackChannelPattern is a Slack conversation id: a public (C) or private
// (G) channel. Names are refused: they can be renamed under a trigger.
var slackChannelPattern = regexp.MustCompile(`^[CG][A-Z0-9]{2,30}$`)

func validRepository(repo string) bool {
	if !repositoryPattern.MatchString(repo) {
		return false
	}
	name := repo[strings.IndexByte(repo, '/')+1:]
	return name != "." && name != ".."
}

// runRequest is the run a configuration starts, as a POST /v1/sessions body.
func (req triggerRequest) runRequest() run.CreateRequest {
	return run.CreateRequest{
		PolicyID:            req.PolicyID,
		PolicyVersion:       req.PolicyVersion,
		ShadowPolicyID:      req.ShadowPolicyID,
		ShadowPolicyVersion: req.ShadowPolicyVersion,
		Capabilities:        req.Capabilities,
		Connections:         req.Connections,
		Autonomous:          req.Autonomous,
		Budget:              req.Budget,
		TrustTier:           req.TrustTier,
		Workspace:           req.Workspace,
		Verify:              req.Verify,
	}
}

// RunRequest is the run a stored configuration starts, as a POST
// /v1/sessions body.
func RunRequest(t store.Trigger) run.CreateRequest {
	limit := budget.Micros(t.BudgetLimit).USD()
	req := triggerRequest{
		PolicyID:            t.PolicyID,
		PolicyVersion:       t.PolicyVersion,
		ShadowPolicyID:      t.ShadowPolicyID,
		ShadowPolicyVersion: t.ShadowPolicyVersion,
		Capabilities:        t.Capabilities,
		Connections:         t.Connections,
		Autonomous:          t.Autonomous,
		TrustTier:           t.TrustTier,
		Workspace:           t.Workspace,
		Verify:              run.Verify(t.Verify),
	}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	return req.runRequest()
}

func triggerOut(t store.Trigger) triggerView {
	return triggerView{
		ID:                  t.ID,
		Repository:          t.Repository,
		PolicyID:            t.PolicyID,
		PolicyVersion:       t.PolicyVersion,
		ShadowPolicyID:      t.ShadowPolicyID,
		ShadowPolicyVersion: t.ShadowPolicyVersion,
		Capabilities:        nonNilStrings(t.Capabilities),
		Connections:         nonNilStrings(t.Connections),
		Autonomous:          t.Autonomous,
		Budget:              triggerBudget{LimitUSD: budget.Micros(t.BudgetLimit).USD()},
		TrustTier:           t.TrustTier,
		Events:              nonNilStrings(t.Events),
		Workspace:           t.Workspace,
		Verify:              run.VerifyOf(store.Head{Verify: t.Verify}),
		OwnWebhookSecret:    t.OwnSecret,
		SlackChannel:        t.SlackChannel,
		Prompt:              t.Prompt,
		Report:              reportOrDefault(t.Report),
		TimeoutSeconds:      timeoutOrDefault(t.TimeoutSeconds),
		Schedule:            t.Schedule,
		Ref:                 t.Ref,
		CreatedAt:           t.CreatedAt,
		CreatedBy:           t.CreatedBy,
		Revision:            t.Revision,
		UpdatedAt:           t.UpdatedAt,
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) createTrigger(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	var req triggerRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	if req.RotateRunnerKey {
		return invalid("rotate_runner_key: only an update rotates the key; a new configuration always gets one")
	}
	t, err := s.checkTrigger(r, req)
	if err != nil {
		return err
	}
	t.ID = ids.New("trg_")
	t.CreatedAt = store.FormatTime(s.cfg.Now())
	t.CreatedBy = who.Subject
	if t.Schedule != "" {
		t.ScheduleSince = t.CreatedAt
	}
	key, keyHash, err := auth.NewTriggerKey()
	if err != nil {
		return err
	}
	t.RunnerKeyHash = keyHash
	err = s.st.PutTrigger(r.Context(), t)
	if errors.Is(err, store.ErrRepositoryTaken) {
		return conflict("repository %s already has a trigger configuration; a repository has at most one", req.Repository)
	}
	if err != nil {
		return fmt.Errorf("api: create trigger: %w", err)
	}
	out := triggerOut(t)
	if t.OwnSecret {
		out.WebhookSecret = triggerSecret(s.cfg.GitHubWebhookSecret, t.ID)
	}
	out.RunnerKey = key.Reveal()
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// checkTrigger validates a configuration as creation and update take it and
// returns what it stores, without id, creation or keys.
func (s *Server) checkTrigger(r *http.Request, req triggerRequest) (store.Trigger, error) {
	if !validRepository(req.Repository) {
		return store.Trigger{}, invalid("repository: must be a GitHub repository as \"owner/name\"")
	}
	if req.SlackChannel != "" && !slackChannelPattern.MatchString(req.SlackChannel) {
		return store.Trigger{}, invalid("slack_channel: must be a Slack channel id (C... or G...)")
	}
	if err := checkLaunch(req); err != nil {
		return store.Trigger{}, err
	}
	if err := s.checkSchedule(req); err != nil {
		return store.Trigger{}, err
	}
	if len(req.Events) == 0 && req.Schedule == "" {
		// A scheduled trigger handles pull requests only when it says so.
		req.Events = []string{eventPullRequest}
	}
	for i, ev := range req.Events {
		if ev != eventPullRequest {
			return store.Trigger{}, invalid("events[%d]: %q is not an event a trigger handles (only %q)", i, ev, eventPullRequest)
		}
		if slices.Index(req.Events, ev) != i {
			return store.Trigger{}, invalid("events[%d]: %q is listed twice", i, ev)
		}
	}
	// The same checks, in the same words, as creating the run by hand.
	if err := s.runs.Check(r.Context(), req.runRequest()); err != nil {
		return store.Trigger{}, err
	}
	if req.OwnWebhookSecret && s.cfg.GitHubWebhookSecret == "" {
		// The trigger's secret is derived from the server's.
		return store.Trigger{}, &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "own_webhook_secret needs FLUIDBOX_GITHUB_WEBHOOK_SECRET set on the server"}
	}
	limit, err := budget.FromUSD(*req.Budget.LimitUSD) // Check proved it converts
	if err != nil {
		return store.Trigger{}, invalid("budget.limit_usd: must be a non-negative amount in USD")
	}
	return store.Trigger{
		Repository:          req.Repository,
		PolicyID:            req.PolicyID,
		PolicyVersion:       req.PolicyVersion,
		ShadowPolicyID:      req.ShadowPolicyID,
		ShadowPolicyVersion: req.ShadowPolicyVersion,
		Capabilities:        req.Capabilities,
		Connections:         req.Connections,
		Autonomous:          req.Autonomous,
		BudgetLimit:         int64(limit),
		TrustTier:           req.TrustTier,
		Events:              req.Events,
		Workspace:           req.Workspace,
		Verify:              string(req.Verify),
		OwnSecret:           req.OwnWebhookSecret,
		SlackChannel:        req.SlackChannel,
		Prompt:              req.Prompt,
		Report:              reportOrDefault(req.Report),
		TimeoutSeconds:      timeoutOrDefault(req.TimeoutSeconds),
		Schedule:            req.Schedule,
		Ref:                 req.Ref,
	}, nil
}

// listTriggers serves GET /v1/triggers: configurations newest first, one
// page at a time (limit, cursor, created_after, created_before).
func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	q, err := route.ParseList(r)
	if err != nil {
		return err
	}
	page, err := s.st.ListTriggerPage(r.Context(), q)
	if err != nil {
		return err
	}
	out := make([]triggerView, len(page.Triggers))
	for i, t := range page.Triggers {
		out[i] = triggerOut(t)
	}
	writeJSON(w, http.StatusOK, route.WithCursor(map[string]any{"triggers": out}, page.Next))
	return nil
}

func (s *Server) getTrigger(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id := r.PathValue("id")
	if !ids.Valid("trg_", id) {
		return notFound("trigger " + id)
	}
	t, err := s.st.GetTrigger(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("trigger " + id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, triggerOut(t))
	return nil
}
