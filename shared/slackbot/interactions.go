package slackbot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/render"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Bounds of an interaction request.
const (
	// maxSkew is how far a request's timestamp may be from now.
	maxSkew = 5 * time.Minute
	// maxBody bounds the body read before the signature is checked.
	maxBody = 256 << 10
	// answerWithin is what Slack allows (3 s) less a margin for the trip.
	answerWithin = 2500 * time.Millisecond
	// replyWithin bounds the ephemeral reply after a decision.
	replyWithin = time.Second
)

// Decider is the approval service's public decision API.
type Decider interface {
	Get(ctx context.Context, id string) (store.Approval, error)
	View(ctx context.Context, who auth.Principal, id string) (store.Approval, error)
	DecideWithReason(ctx context.Context, who auth.Principal, id string, decision vocab.Choice, reason string) (store.Approval, bool, error)
}

var _ Decider = (*approval.Service)(nil)

// Seen records signed requests so a replay is refused.
type Seen interface {
	ClaimRequest(ctx context.Context, digest, at string, expiresEpoch int64) error
}

// API is the part of the Slack Web API the interaction handler calls.
type API interface {
	UserInfo
	OpenViewContext(ctx context.Context, triggerID string, view slack.ModalViewRequest) (*slack.ViewResponse, error)
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
}

var _ API = (*slack.Client)(nil)

// Interactions serves POST /v1/integrations/slack/interactions.
type Interactions struct {
	secret    Secret
	api       API
	decider   Decider
	seen      Seen
	users     *Directory
	log       *slog.Logger
	now       func() time.Time
	replyHost string
	// inputs answers input requests (WithInputs); nil: it does not.
	inputs InputDecider
}

// NewInteractions returns the interaction handler. Replies to a click go
// only to response URLs on Slack's hooks host (or, when cfg.APIURL points
// elsewhere, as in tests, on that URL's host).
func NewInteractions(cfg Config, api API, decider Decider, seen Seen, members Members, log *slog.Logger, now func() time.Time) *Interactions {
	host := "hooks.slack.com"
	if cfg.APIURL != "" {
		if u, err := url.Parse(cfg.APIURL); err == nil {
			host = u.Host
		}
	}
	return &Interactions{
		secret: cfg.SigningSecret, api: api, decider: decider, seen: seen,
		users: NewDirectory(api, members, cfg.Users, cfg.RolesMaxAge, now), log: log, now: now, replyHost: host,
	}
}

// ServeHTTP verifies, deduplicates and acts on one interaction.
func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), answerWithin)
	defer cancel()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "the request body is over 256 KiB")
		return
	}
	ts, err := h.verify(r.Header, body)
	if err != nil {
		h.log.WarnContext(ctx, "slack interaction refused", "err", err)
		writeError(w, http.StatusUnauthorized, "unauthenticated", "the request is not signed by Slack with this app's signing secret, or is too old")
		return
	}
	// The replay key is the signed content itself, not the signature
	// header: the header's hex is decoded case-insensitively, so one
	// signature has many spellings, and a key on its text would let a
	// captured request through again with its hex re-cased.
	signed := sha256.Sum256([]byte("v0:" + r.Header.Get("X-Slack-Request-Timestamp") + ":" + string(body)))
	err = h.seen.ClaimRequest(ctx, hex.EncodeToString(signed[:]), store.FormatTime(h.now()), ts.Add(maxSkew+time.Minute).Unix())
	if errors.Is(err, store.ErrReplayed) {
		h.log.WarnContext(ctx, "slack interaction refused", "err", "replayed")
		writeError(w, http.StatusConflict, "conflict", "this request was already received")
		return
	}
	if err != nil {
		h.log.ErrorContext(ctx, "slack interaction", "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the control plane cannot record this request; try again")
		return
	}
	form, err := url.ParseQuery(string(body))
	var cb slack.InteractionCallback
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &cb)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the body is not a Slack interaction payload")
		return
	}
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		h.blockActions(ctx, w, cb)
	case slack.InteractionTypeViewSubmission:
		h.viewSubmission(ctx, w, cb)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// verify checks the v0 signature and the timestamp's freshness, before
// anything else looks at the request.
func (h *Interactions) verify(header http.Header, body []byte) (time.Time, error) {
	sec, err := strconv.ParseInt(header.Get("X-Slack-Request-Timestamp"), 10, 64)
	if err != nil {
		return time.Time{}, errors.New("no timestamp")
	}
	ts := time.Unix(sec, 0)
	if d := h.now().Sub(ts); d > maxSkew || d < -maxSkew {
		return time.Time{}, fmt.Errorf("timestamp %s off by %s", ts.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	v, err := slack.NewSecretsVerifier(header, h.secret.Reveal())
	if err != nil {
		return time.Time{}, err
	}
	if _, err := v.Write(body); err != nil {
		return time.Time{}, err
	}
	// hmac.Equal inside: a constant-time comparison.
	return ts, v.Ensure()
}

func (h *Interactions) blockActions(ctx context.Context, w http.ResponseWriter, cb slack.InteractionCallback) {
	w.WriteHeader(http.StatusOK)
	if len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	act := cb.ActionCallback.BlockActions[0]
	id := act.Value
	if act.ActionID == ActionInputDone || act.ActionID == ActionInputDecline {
		if ids.Valid("inp_", id) {
			h.inputAction(ctx, cb, act.ActionID, id)
		}
		return
	}
	if !ids.Valid("apr_", id) {
		return
	}
	var decision vocab.Choice
	switch act.ActionID {
	case ActionApproveOnce:
		decision = vocab.ChoiceApprovedOnce
	case ActionApproveSession:
		decision = vocab.ChoiceApprovedSession
	case ActionDeny:
		h.openDeny(ctx, cb, id)
		return
	default:
		return
	}
	who, err := h.users.Principal(ctx, cb.User.ID)
	if err != nil {
		h.reply(ctx, cb, refusal(err))
		return
	}
	h.reply(ctx, cb, h.decide(ctx, who, id, decision, ""))
}

// openDeny opens the reason modal for whoever may decide, and only for
// them: the modal shows the call, which is not everyone's to read.
func (h *Interactions) openDeny(ctx context.Context, cb slack.InteractionCallback, id string) {
	who, err := h.users.Principal(ctx, cb.User.ID)
	if err != nil {
		h.reply(ctx, cb, refusal(err))
		return
	}
	a, err := h.decider.View(ctx, who, id)
	if errors.Is(err, approval.ErrForbidden) {
		h.reply(ctx, cb, forbidden)
		return
	}
	if err != nil {
		h.log.ErrorContext(ctx, "slack deny: read approval", "approval", id, "err", err)
		h.reply(ctx, cb, "fluidbox could not read this approval; try again, or deny it on the approvals page")
		return
	}
	if a.Status != vocab.ApprovalPending {
		h.reply(ctx, cb, settled(a))
		return
	}
	if _, err := h.api.OpenViewContext(ctx, cb.TriggerID, DenyModal(a)); err != nil {
		h.log.ErrorContext(ctx, "slack deny: views.open", "approval", id, "err", err)
		h.reply(ctx, cb, "Slack could not open the reason dialog. Deny with `fluidbox deny "+id+" --reason TEXT` or on the approvals page.")
	}
}

func (h *Interactions) viewSubmission(ctx context.Context, w http.ResponseWriter, cb slack.InteractionCallback) {
	if cb.View.CallbackID != CallbackDeny || !ids.Valid("apr_", cb.View.PrivateMetadata) {
		w.WriteHeader(http.StatusOK)
		return
	}
	var reason string
	if cb.View.State != nil {
		reason = cb.View.State.Values[reasonBlock][reasonInput].Value
	}
	who, err := h.users.Principal(ctx, cb.User.ID)
	var text string
	if err != nil {
		text = refusal(err)
	} else {
		text = h.decide(ctx, who, cb.View.PrivateMetadata, vocab.ChoiceDenied, reason)
	}
	writeJSON(w, slack.NewUpdateViewSubmissionResponse(ResultModal(text)))
}

// decide settles an approval through the approval service and says how
// it went: applied, or the settled state someone else (or expiry) left.
func (h *Interactions) decide(ctx context.Context, who auth.Principal, id string, decision vocab.Choice, reason string) string {
	a, applied, err := h.decider.DecideWithReason(ctx, who, id, decision, reason)
	var bad *approval.InvalidError
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return "There is no approval " + id + "."
	case errors.Is(err, approval.ErrForbidden):
		return forbidden
	case errors.As(err, &bad):
		return "Not decided: " + bad.Message
	case err != nil:
		h.log.ErrorContext(ctx, "slack decide", "approval", id, "err", err)
		// Whether or not this attempt got through, the committed state is
		// the answer: a loser of a race that ran out of time is shown what
		// won.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replyWithin)
		defer cancel()
		if cur, gerr := h.decider.Get(rctx, id); gerr == nil && cur.Status != vocab.ApprovalPending {
			return settled(cur)
		}
		return "fluidbox could not record the decision; nothing was decided. Try again, or use the approvals page."
	}
	h.log.InfoContext(ctx, "approval decided", "approval", id, "run", a.RunID, "by", who.Subject, "via", "slack", "status", a.Status, "applied", applied)
	if applied {
		return fmt.Sprintf("Done: %s %s (%s).", render.Line(a.ID), render.Line(string(a.Status)), render.Line(a.ToolName))
	}
	return settled(a)
}

const forbidden = "You may not decide this approval: it needs an approver (role admin or approver), and a call on a personal connection only its owner decides."

func settled(a store.Approval) string {
	s := fmt.Sprintf("Already settled: %s is %s", render.Line(a.ID), render.Line(string(a.Status)))
	if a.DecidedBy != "" {
		s += " by " + render.Line(a.DecidedBy)
	}
	return s + "."
}

func refusal(err error) string {
	var stale *StaleError
	switch {
	case errors.As(err, &stale):
		return fmt.Sprintf("fluidbox last saw your roles %s ago, longer than the %s it trusts them for here. Sign in to fluidbox again (the approvals page), then click again. Nothing was decided.",
			stale.Age.Round(time.Minute), stale.MaxAge)
	case errors.Is(err, ErrInactive):
		return "Your fluidbox membership has been deactivated; nothing was decided."
	case errors.Is(err, ErrAmbiguous):
		return "More than one fluidbox member has your email; ask an admin to map your Slack user explicitly. Nothing was decided."
	case errors.Is(err, ErrUnknownUser):
		return "fluidbox does not know you: sign in to fluidbox once with SSO (with this Slack account's email), or ask an admin to map your Slack user. Nothing was decided."
	}
	return "fluidbox could not tell who you are right now; nothing was decided. Try again, or use the approvals page."
}

// reply sends the clicker an ephemeral message through the click's
// response URL, if it is Slack's; a failure is logged, never retried: the
// decision is already settled, and the message will show it.
func (h *Interactions) reply(ctx context.Context, cb slack.InteractionCallback, text string) {
	u, err := url.Parse(cb.ResponseURL)
	if err != nil || u.Host != h.replyHost || !(u.Scheme == "https" || (u.Scheme == "http" && loopback(u.Hostname()))) {
		h.log.WarnContext(ctx, "slack reply: response URL refused", "host", hostOf(u))
		return
	}
	// Its own short budget: the decision may have used the request's.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), replyWithin)
	defer cancel()
	_, _, err = h.api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cb.ResponseURL, slack.ResponseTypeEphemeral), slack.MsgOptionText(text, true))
	if err != nil {
		h.log.WarnContext(ctx, "slack reply failed", "err", err)
	}
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hostOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Host
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
