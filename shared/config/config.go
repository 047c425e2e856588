// Package config reads fluidbox's environment (docs/api.md, "Environment") into one typed value, reporting every problem at once. Only
// mains call it; nothing else in shared/ reads the environment.
package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/egress"
)

// Config is the server's configuration.
type Config struct {
	// Addr is where `fluidbox dev` listens.
	Addr string
	// AdminToken is the operator's bearer token.
	AdminToken string
	// Table is the DynamoDB table.
	Table string
	// DynamoDBEndpoint overrides the SDK's endpoint (AWS_ENDPOINT_URL_DYNAMODB).
	DynamoDBEndpoint string
	// SequenceOnRead (dev, FLUIDBOX_SEQUENCER=read): this process numbers
	// a run's events only when it reads them, leaving the rest to another
	// process, as a Lambda function leaves it to the notify function; the
	// default (background) numbers them right after each append.
	SequenceOnRead bool
	// UpstreamToolsTTLSeconds is how long the broker may trust its last
	// look at an upstream's tool list.
	UpstreamToolsTTLSeconds int
	// RequireSSO turns on SSO mode (FLUIDBOX_REQUIRE_SSO=true): people
	// present OIDC JWTs from OIDCIssuer for OIDCAudience, with roles in the
	// claim OIDCRolesClaim. The admin token keeps working for the operator.
	RequireSSO     bool
	OIDCIssuer     string
	OIDCAudience   string
	OIDCRolesClaim string
	// StateMachineARN is the approval-expiry state machine: the notify
	// function starts one execution per new approval it sees on the
	// table's stream. Empty: no timer (lazy expiry and the sweep still
	// expire overdue approvals).
	StateMachineARN string
	// EventBus is the EventBridge bus the notify function publishes to.
	EventBus string
	// GitHubWebhookSecret verifies GitHub webhook deliveries. Optional:
	// unset, POST /v1/triggers/github refuses every delivery.
	GitHubWebhookSecret string
	// MaxPendingApprovals is how many approvals one run may have waiting
	// at once (FLUIDBOX_MAX_PENDING_APPROVALS); 0 is the gate's default.
	MaxPendingApprovals int
	// KMSKeyID is the key that seals credentials (FLUIDBOX_KMS_KEY_ID):
	// Encrypt in the broker only, Decrypt in the broker (and the schedule
	// function, for the GitHub App's key). Empty in dev: a local sealer
	// stands in.
	KMSKeyID string
	// PricesFile overrides or adds model prices (FLUIDBOX_PRICES_FILE), in
	// the format of shared/budget/prices.json, merged over the shipped table.
	PricesFile string
	// ReservationSweepAfter is how old an open budget reservation must be
	// before the sweep settles it as spent (FLUIDBOX_RESERVATION_SWEEP_AFTER_SECONDS).
	ReservationSweepAfter time.Duration
	// ModelUpstreamURL and ModelUpstreamKey (dev only) make `fluidbox dev`
	// seal and store the model proxy's upstream at startup, as
	// PUT /v1/model-upstream would.
	ModelUpstreamURL string
	ModelUpstreamKey string
	// Slack (FLUIDBOX_SLACK_*): the bot token and signing secret are
	// secrets; the channel takes approval messages; the API URL defaults
	// to Slack's; SlackUsers maps Slack user ids to subjects explicitly
	// ("U123=alice-sub,U456=admin"). Set all of token, secret and channel,
	// or none.
	SlackBotToken      string
	SlackSigningSecret string
	SlackChannel       string
	SlackAPIURL        string
	SlackUsers         string
	// SlackRolesMaxAge is how long ago a member's roles may have been seen
	// (at a sign-in or request) for a Slack click to decide with them
	// (FLUIDBOX_SLACK_ROLES_MAX_AGE_SECONDS); 0 is the bot's default.
	SlackRolesMaxAge time.Duration
	// ConnectionAllowCIDRs are the internal ranges connection and model
	// upstream URLs may reach (FLUIDBOX_CONNECTION_ALLOW_CIDRS); every
	// other loopback, link-local, private or special address is refused at
	// creation and at every dial. Unset in dev: loopback (egress.Loopback).
	ConnectionAllowCIDRs []netip.Prefix
	// PublicURL is the API's public base URL (FLUIDBOX_PUBLIC_URL), when
	// it is served under a custom domain: the OAuth redirect URI is
	// PublicURL+"/v1/oauth/callback". Empty: derived from the request (API
	// Gateway's domain and stage; in dev, the request's host).
	PublicURL string
	// RunRequestsPerMinute is how many requests one run's tokens may make
	// per minute on the API (FLUIDBOX_RUN_REQUESTS_PER_MINUTE); 0 is
	// ratelimit.DefaultPerMinute.
	RunRequestsPerMinute int
	// RunMaxOpenRequests is how many requests one run's session token may
	// have open at once on the API, long polls included
	// (FLUIDBOX_RUN_MAX_OPEN_REQUESTS); 0 is ratelimit.DefaultMaxOpen.
	RunMaxOpenRequests int
}

// DefaultReservationSweepAfter is the sweep's default horizon: well past
// the longest model request a Lambda function can serve (15 minutes).
const DefaultReservationSweepAfter = time.Hour

// DefaultRolesClaim is the OIDC claim roles are read from unless
// FLUIDBOX_OIDC_ROLES_CLAIM names another.
const DefaultRolesClaim = "fluidbox_roles"

// Mode says which defaults apply.
type Mode int

const (
	// Lambda: every required variable must be set.
	Lambda Mode = iota
	// Dev: local defaults fill the gaps.
	Dev
	// Task: a Lambda function outside the API (expire, sweep): the table
	// is required, the admin token is not.
	Task
	// Notify: the stream's function (EventBridge notifications, ledger
	// numbering): the bus and the table are required.
	Notify
	// Broker: the function that seals and opens credentials: the table and the KMS
	// key are required, the admin token is not.
	Broker
	// GitHub: the GitHub webhook function: the table and the webhook
	// secret are required; it takes no admin token, having no use for one.
	GitHub
	// Slack: the function that keeps Slack messages in step with approvals:
	// the table and the Slack variables are required.
	Slack
)

// Load reads the configuration through getenv.
func Load(getenv func(string) string, mode Mode) (Config, error) {
	var problems []string
	c := Config{
		Addr:             getenv("FLUIDBOX_ADDR"),
		AdminToken:       getenv("FLUIDBOX_ADMIN_TOKEN"),
		Table:            getenv("FLUIDBOX_TABLE"),
		DynamoDBEndpoint: getenv("AWS_ENDPOINT_URL_DYNAMODB"),
		SequenceOnRead:   getenv("FLUIDBOX_SEQUENCER") == "read",
		StateMachineARN:  getenv("FLUIDBOX_STATE_MACHINE_ARN"),
		EventBus:         getenv("FLUIDBOX_EVENT_BUS"),

		GitHubWebhookSecret: getenv("FLUIDBOX_GITHUB_WEBHOOK_SECRET"),

		SlackBotToken:      getenv("FLUIDBOX_SLACK_BOT_TOKEN"),
		SlackSigningSecret: getenv("FLUIDBOX_SLACK_SIGNING_SECRET"),
		SlackChannel:       getenv("FLUIDBOX_SLACK_CHANNEL"),
		SlackAPIURL:        getenv("FLUIDBOX_SLACK_API_URL"),
		SlackUsers:         getenv("FLUIDBOX_SLACK_USERS"),

		KMSKeyID:              getenv("FLUIDBOX_KMS_KEY_ID"),
		PricesFile:            getenv("FLUIDBOX_PRICES_FILE"),
		ReservationSweepAfter: DefaultReservationSweepAfter,
	}
	problems = append(problems, c.loadNumbers(getenv)...)
	problems = append(problems, c.loadNetwork(getenv, mode)...)
	problems = append(problems, c.loadSSO(getenv, mode)...)
	problems = append(problems, c.checkSlack(mode)...)
	if mode == Dev {
		c.ModelUpstreamURL = getenv("FLUIDBOX_MODEL_UPSTREAM_URL")
		c.ModelUpstreamKey = getenv("FLUIDBOX_MODEL_UPSTREAM_KEY")
		if (c.ModelUpstreamURL == "") != (c.ModelUpstreamKey == "") {
			problems = append(problems, "FLUIDBOX_MODEL_UPSTREAM_URL and FLUIDBOX_MODEL_UPSTREAM_KEY must be set together")
		}
	}
	if v := getenv("FLUIDBOX_SEQUENCER"); v != "" && v != "read" && v != "background" {
		problems = append(problems, "FLUIDBOX_SEQUENCER must be read or background")
	}
	problems = append(problems, c.required(mode)...)
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		problems = append(problems, "FLUIDBOX_ADMIN_TOKEN must be at least 16 characters")
	}
	if c.GitHubWebhookSecret != "" && len(c.GitHubWebhookSecret) < 16 {
		problems = append(problems, "FLUIDBOX_GITHUB_WEBHOOK_SECRET must be at least 16 characters")
	}
	if len(problems) > 0 {
		return Config{}, fmt.Errorf("config: %w", errors.New(strings.Join(problems, "; ")))
	}
	return c, nil
}

// loadNumbers reads the numeric variables into c and returns what is
// wrong with them: each is an integer within its bounds, or unset.
func (c *Config) loadNumbers(getenv func(string) string) []string {
	var problems []string
	for _, v := range []struct {
		name     string
		min, max int
		problem  string
		set      func(int)
	}{
		{"FLUIDBOX_RESERVATION_SWEEP_AFTER_SECONDS", 60, math.MaxInt, "an integer of at least 60",
			func(n int) { c.ReservationSweepAfter = time.Duration(n) * time.Second }},
		{"FLUIDBOX_UPSTREAM_TOOLS_TTL_SECONDS", 0, math.MaxInt, "a non-negative integer",
			func(n int) { c.UpstreamToolsTTLSeconds = n }},
		{"FLUIDBOX_MAX_PENDING_APPROVALS", 1, 1000, "an integer from 1 to 1000",
			func(n int) { c.MaxPendingApprovals = n }},
		// At least an hour: a member's last_seen is refreshed at most
		// hourly, so a shorter window would refuse people signed in now.
		{"FLUIDBOX_SLACK_ROLES_MAX_AGE_SECONDS", 3600, 30 * 86400, "an integer from 3600 to 2592000 (30 days)",
			func(n int) { c.SlackRolesMaxAge = time.Duration(n) * time.Second }},
		{"FLUIDBOX_RUN_REQUESTS_PER_MINUTE", 1, 100000, "an integer from 1 to 100000",
			func(n int) { c.RunRequestsPerMinute = n }},
		{"FLUIDBOX_RUN_MAX_OPEN_REQUESTS", 1, 1000, "an integer from 1 to 1000",
			func(n int) { c.RunMaxOpenRequests = n }},
	} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min || n > v.max {
			problems = append(problems, v.name+" must be "+v.problem)
		}
		v.set(n)
	}
	return problems
}

// loadNetwork reads where connections may reach and the API's public URL
// into c and returns what is wrong with them. In dev, loopback is the
// default reach so local MCP servers work; a value set replaces it.
func (c *Config) loadNetwork(getenv func(string) string, mode Mode) []string {
	var problems []string
	if s := getenv(egress.AllowVariable); s != "" {
		allow, err := egress.ParseAllow(s)
		if err != nil {
			problems = append(problems, egress.AllowVariable+" must be CIDRs or addresses separated by commas")
		}
		c.ConnectionAllowCIDRs = allow
	} else if mode == Dev {
		c.ConnectionAllowCIDRs = egress.Loopback
	}
	if s := getenv("FLUIDBOX_PUBLIC_URL"); s != "" {
		u, ok := publicURL(s, mode == Dev)
		if !ok {
			problems = append(problems, "FLUIDBOX_PUBLIC_URL must be an https URL (http to loopback in dev) without credentials, query or fragment")
		}
		c.PublicURL = u
	}
	return problems
}

// required fills dev's defaults and returns which variables mode needs
// that are not set.
func (c *Config) required(mode Mode) []string {
	if mode == Dev {
		if c.Addr == "" {
			c.Addr = "127.0.0.1:8080"
		}
		if c.Table == "" {
			c.Table = "fluidbox"
		}
		return nil
	}
	// Every other mode reads or writes the table.
	var problems []string
	if c.Table == "" {
		problems = append(problems, "FLUIDBOX_TABLE is not set")
	}
	need := map[Mode][]struct{ name, value string }{
		Lambda: {{"FLUIDBOX_ADMIN_TOKEN", c.AdminToken}},
		Notify: {{"FLUIDBOX_EVENT_BUS", c.EventBus}},
		Broker: {{"FLUIDBOX_KMS_KEY_ID", c.KMSKeyID}},
		GitHub: {{"FLUIDBOX_GITHUB_WEBHOOK_SECRET", c.GitHubWebhookSecret}},
	}
	for _, v := range need[mode] {
		if v.value == "" {
			problems = append(problems, v.name+" is not set")
		}
	}
	if mode == Slack && (c.SlackBotToken == "" || c.SlackChannel == "") {
		problems = append(problems, "FLUIDBOX_SLACK_BOT_TOKEN and FLUIDBOX_SLACK_CHANNEL are not set")
	}
	return problems
}

// checkSlack reports what is wrong with the Slack variables: all of token,
// secret and channel or none (the Slack function needs no secret), and an
// API URL that is https, or http on loopback in dev.
func (c *Config) checkSlack(mode Mode) []string {
	var problems []string
	set := 0
	for _, v := range []string{c.SlackBotToken, c.SlackSigningSecret, c.SlackChannel} {
		if v != "" {
			set++
		}
	}
	if mode != Slack && set != 0 && set != 3 {
		problems = append(problems, "FLUIDBOX_SLACK_BOT_TOKEN, FLUIDBOX_SLACK_SIGNING_SECRET and FLUIDBOX_SLACK_CHANNEL must be set together")
	}
	if c.SlackAPIURL != "" {
		u, err := url.Parse(c.SlackAPIURL)
		loop := err == nil && u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost" || u.Hostname() == "::1")
		if err != nil || u.Host == "" || !(u.Scheme == "https" || (loop && mode == Dev)) {
			problems = append(problems, "FLUIDBOX_SLACK_API_URL must be an https URL (http only on loopback, in dev)")
		}
	}
	return problems
}

// loadSSO reads the SSO variables into c and returns what is wrong with
// them. The OIDC variables are read only when SSO is required; then issuer
// and audience must both be set, and outside dev the issuer must be https.
func (c *Config) loadSSO(getenv func(string) string, mode Mode) []string {
	var problems []string
	if s := getenv("FLUIDBOX_REQUIRE_SSO"); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return []string{"FLUIDBOX_REQUIRE_SSO must be true or false"}
		}
		c.RequireSSO = on
	}
	if !c.RequireSSO {
		return nil
	}
	c.OIDCIssuer = getenv("FLUIDBOX_OIDC_ISSUER")
	c.OIDCAudience = getenv("FLUIDBOX_OIDC_AUDIENCE")
	c.OIDCRolesClaim = getenv("FLUIDBOX_OIDC_ROLES_CLAIM")
	if c.OIDCRolesClaim == "" {
		c.OIDCRolesClaim = DefaultRolesClaim
	}
	if c.OIDCIssuer == "" {
		problems = append(problems, "FLUIDBOX_OIDC_ISSUER is not set (FLUIDBOX_REQUIRE_SSO is true)")
	} else if u, err := url.Parse(c.OIDCIssuer); err != nil || u.Host == "" || (u.Scheme != "https" && (mode != Dev || u.Scheme != "http")) {
		problems = append(problems, "FLUIDBOX_OIDC_ISSUER must be an https URL (http only for fluidbox dev)")
	}
	if c.OIDCAudience == "" {
		problems = append(problems, "FLUIDBOX_OIDC_AUDIENCE is not set (FLUIDBOX_REQUIRE_SSO is true)")
	}
	return problems
}

// publicURL checks a public base URL and drops its trailing slash: https
// with a host, no credentials, query or fragment (the redirect URI is built
// on it and must match what the operator registered); http to a loopback
// host too when loopback is true (dev).
func publicURL(s string, loopback bool) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	switch h := u.Hostname(); {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback && (h == "localhost" || h == "127.0.0.1" || h == "::1"):
	default:
		return "", false
	}
	return strings.TrimRight(u.String(), "/"), true
}
