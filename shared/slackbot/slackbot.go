// Package slackbot brings approvals to Slack: a message per approval in a
// channel, kept in step with the approval's committed state, and buttons
// that decide it through the same approval service as the API. An input
// request (a brokered call waiting for a person to open a link, package
// elicitation) is shown and answered the same way (inputs.go).
//
// What it guarantees:
//   - A message shows only committed state. The Notifier is fed by the
//     notify path (approval.requested / approval.decided, after the commit)
//     and renders the approval row as it reads it then; nothing the click
//     handler hopes for is ever shown. Once settled, a message loses its
//     buttons and never goes back to pending.
//   - A call's input reaches Slack only through package render (every
//     hidden character escaped, long inputs cut with how much is hidden and
//     how to see it) and only as literal text (plain_text and rich-text
//     preformatted elements: no mrkdwn, so no mention or link can be forged).
//   - An interaction is acted on only after its Slack signature (v0,
//     HMAC-SHA256 over "v0:<timestamp>:<body>" with the signing secret)
//     verifies, in constant time, with a timestamp within five minutes;
//     nothing is read or written before that, and a request seen before is
//     refused (its digest is claimed in the table).
//   - A click decides with the authority of the fluidbox member it maps to
//     (an explicit mapping, or the member whose verified SSO email is the
//     Slack user's email as Slack has confirmed it, for a user of the
//     app's own team: a Slack Connect user
//     from another organization is matched by nothing, since that
//     organization chose the address) and the approval service's own
//     rules: approvers by role,
//     a personal connection's call only by its owner, approve and deny
//     alike, and only with roles seen within a window (RolesMaxAge): a
//     click carries no token, so past it the person is asked to sign in
//     again and nothing is decided. Someone who loses a race is shown the
//     settled answer.
//   - A personal connection's call is shown to its owner alone, as a direct
//     message to the Slack user a click of theirs maps back to, and to no
//     channel; without such a user it is shown in Slack to nobody.
//   - Slack being down never blocks a decision: the page and the CLI decide
//     without it, and the Notifier's failures are logged and retried (in
//     AWS: Lambda's asynchronous retries, then the retry queue that
//     HandleRetries drains, then a dead-letter queue to re-drive).
//   - The bot token and signing secret are never logged.
package slackbot

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/config"
)

// Config is what Slack needs, from FLUIDBOX_SLACK_*.
type Config struct {
	// BotToken is the bot's OAuth token (xoxb-...), a secret.
	BotToken Secret
	// SigningSecret verifies interaction requests, a secret.
	SigningSecret Secret
	// Channel is where approval messages are posted.
	Channel string
	// APIURL is Slack's Web API base; "" is Slack's own.
	APIURL string
	// Users maps Slack user ids to fluidbox subjects, ahead of the email
	// match; the subject "admin" is the operator, and only an explicit
	// mapping can name it.
	Users map[string]string
	// RolesMaxAge is how long ago a member's roles may have been seen for
	// a click to decide with them; 0 is DefaultRolesMaxAge.
	RolesMaxAge time.Duration
}

// Secret is a credential that never prints.
type Secret string

func (Secret) String() string               { return "[redacted]" }
func (Secret) GoString() string             { return "[redacted]" }
func (Secret) LogValue() slog.Value         { return slog.StringValue("[redacted]") }
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// ErrConfig: the configuration cannot work.
var ErrConfig = errors.New("slackbot: incomplete configuration")

// Enabled reports whether Slack is configured at all.
func (c Config) Enabled() bool {
	return c.BotToken != "" || c.SigningSecret != "" || c.Channel != ""
}

// Check reports what a configured Slack lacks.
func (c Config) Check() error {
	var missing []string
	if c.BotToken == "" {
		missing = append(missing, "FLUIDBOX_SLACK_BOT_TOKEN")
	}
	if c.SigningSecret == "" {
		missing = append(missing, "FLUIDBOX_SLACK_SIGNING_SECRET")
	}
	if c.Channel == "" {
		missing = append(missing, "FLUIDBOX_SLACK_CHANNEL")
	}
	if len(missing) > 0 {
		return errors.Join(ErrConfig, errors.New("missing "+strings.Join(missing, ", ")))
	}
	return nil
}

// ParseUsers reads FLUIDBOX_SLACK_USERS: "U123=alice-sub,U456=admin".
func ParseUsers(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		user, sub, ok := strings.Cut(pair, "=")
		if !ok || user == "" || sub == "" {
			return nil, errors.New("slackbot: FLUIDBOX_SLACK_USERS wants SLACK_USER_ID=SUBJECT pairs separated by commas")
		}
		out[strings.TrimSpace(user)] = strings.TrimSpace(sub)
	}
	return out, nil
}

// NewClient returns a Slack Web API client for cfg, with a timeout on
// every call so Slack can never hold up a caller for long.
func NewClient(cfg Config) *slack.Client {
	url := cfg.APIURL
	if url == "" {
		url = DefaultAPIURL
	}
	if !strings.HasSuffix(url, "/") {
		url += "/"
	}
	return slack.New(cfg.BotToken.Reveal(),
		slack.OptionAPIURL(url),
		slack.OptionHTTPClient(&http.Client{Timeout: 5 * time.Second}),
	)
}

// FromConfig is the Slack part of a function's or the dev server's
// configuration (FLUIDBOX_SLACK_*).
func FromConfig(cfg config.Config) (Config, error) {
	users, err := ParseUsers(cfg.SlackUsers)
	if err != nil {
		return Config{}, fmt.Errorf("slackbot: %w", err)
	}
	return Config{
		BotToken:      Secret(cfg.SlackBotToken),
		SigningSecret: Secret(cfg.SlackSigningSecret),
		Channel:       cfg.SlackChannel,
		APIURL:        cfg.SlackAPIURL,
		Users:         users,
		RolesMaxAge:   cfg.SlackRolesMaxAge,
	}, nil
}
