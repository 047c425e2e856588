package triggers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// The GitHub webhook, POST /v1/triggers/github.
//
// A delivery carries no bearer token; it is authenticated by its
// X-Hub-Signature-256 header, the HMAC-SHA256 of the raw body, compared in
// constant time. The key is the server's secret
// (FLUIDBOX_GITHUB_WEBHOOK_SECRET) or, for a trigger created with
// own_webhook_secret, that trigger's own secret: an HMAC of the trigger id
// under the server's secret, so nothing secret is stored and a secret
// leaked from one repository's webhook settings signs for that repository
// only. The order of the checks is the security argument:
//
//  1. No secret configured: 503 before anything is read. An empty key is
//     a key anyone can sign with, so an unconfigured server accepts nothing.
//  2. The raw body is read, at most 25 MB (GitHub's own cap; 413), and
//     nothing is trusted yet.
//  3. The signature is checked over exactly those bytes (401 when missing,
//     malformed or wrong): first under the server's secret; failing that,
//     the unsigned body is read only for the repository it names, whose
//     trigger's own secret (if it has one) is tried. A trigger with its
//     own secret accepts nothing else, so the server's secret cannot sign
//     for it. Nothing before this point writes, and nothing after it
//     trusts a byte that was not signed.
//  4. Only then the headers and the payload are interpreted. Whatever is
//     not a pull_request opened/synchronize/reopened for a configured
//     repository is answered 202 "ignored" and writes nothing.
//  5. The trust tier comes from the payload (trust.FromPullRequest: a fork,
//     another repository, or a hidden head repository is read_only), and
//     the configuration can only narrow it (trust.Narrow, in run).
//
// Duplicates and replays: X-GitHub-Delivery is not covered by the
// signature, so a delivery id proves nothing. What is signed is the body,
// so the run's id is derived from the body's digest: GitHub's redelivery
// (same id, same body), a concurrent twin, a retry after a crash, and an
// attacker replaying a captured body under a fresh delivery id all name
// the same run, and whichever gets there either creates it or finds it.
// The run is written in one conditional transaction, so exactly one
// request creates it (201); every other answers 200 with the same
// session_id. The delivery id is still claimed (DELIVERY#<id>), for the
// audit trail and so a reused id keeps naming its first run.
//
// The run's session token is not returned: the response goes to GitHub.
// A trigger-created run is stored with the hash of a token nobody holds.

// Event types and actions the webhook acts on.
const (
	githubEventPing        = "ping"
	githubEventPullRequest = "pull_request"
)

var githubPullRequestActions = []string{"opened", "synchronize", "reopened"}

var (
	errWebhookUnconfigured = &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "GitHub webhooks are not configured on this server (FLUIDBOX_GITHUB_WEBHOOK_SECRET)"}
	errBadSignature        = &route.Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "X-Hub-Signature-256 is missing or does not match the body"}
	errNeedsOwnSecret      = &route.Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "this repository's trigger has its own webhook secret; the server's secret does not sign for it"}
)

// deliveryPattern bounds what a delivery id may be before it becomes part
// of a key. GitHub sends a GUID.
var deliveryPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// validSignature reports whether header is "sha256=" followed by the hex
// HMAC-SHA256 of body under secret. It compares in constant time.
func validSignature(secret string, body []byte, header string) bool {
	if secret == "" {
		return false
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

var runIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// DeliveryRunID is the id of the run a signed body creates (exported so a
// test can stage a claim whose run was never written): 128 bits of a
// hash of the body, in the alphabet of ids.New. The body is what the
// signature covers, so two deliveries share a run exactly when they carry
// the same signed bytes.
func DeliveryRunID(body []byte) string {
	h := sha256.New()
	h.Write([]byte("fluidbox/github-body/v1\x00"))
	h.Write(body)
	return "ses_" + strings.ToLower(runIDEncoding.EncodeToString(h.Sum(nil)[:16]))
}

// triggerSecret is a trigger's own webhook secret: an HMAC of its id under
// the server's secret, in hex. Deriving it means no secret is stored, and
// knowing one trigger's secret tells nothing about another's or the
// server's.
func triggerSecret(serverSecret, triggerID string) string {
	mac := hmac.New(sha256.New, []byte(serverSecret))
	mac.Write([]byte("fluidbox/github-trigger-secret/v1\x00" + triggerID))
	return hex.EncodeToString(mac.Sum(nil))
}

// unsignedRepository is the repository an unverified body names, read
// only to choose which trigger's secret to check it against. Nothing else
// of an unverified body is used.
func unsignedRepository(body []byte) string {
	var p struct {
		Repository *struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if json.Unmarshal(body, &p) != nil || p.Repository == nil || !validRepository(p.Repository.FullName) {
		return ""
	}
	return p.Repository.FullName
}

type webhookAnswer struct {
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
}

type webhookRun struct {
	SessionID string     `json:"session_id"`
	TrustTier trust.Tier `json:"trust_tier"`
	// Duplicate is true when the delivery had been seen and this answer
	// names the run it created then.
	Duplicate bool `json:"duplicate,omitempty"`
}

func (s *Server) githubWebhook(w http.ResponseWriter, r *http.Request) {
	if err := s.githubDelivery(w, r); err != nil {
		s.fail(w, r, err)
	}
}

// delivery is what githubDelivery has learnt of a delivery so far.
type delivery struct {
	body     []byte
	signedBy string // the id of the trigger whose own secret signed, or ""
	event    string
	id       string // X-GitHub-Delivery
	pr       trust.PullRequest
	cfg      store.Trigger
	runID    string
}

// githubDelivery takes the checks in the order the comment at the top of
// this file gives: the signature, the event, the trigger, the claim of the
// delivery, the run.
func (s *Server) githubDelivery(w http.ResponseWriter, r *http.Request) error {
	d, err := s.signedDelivery(w, r)
	if err != nil {
		return err
	}
	// Signed from here on.
	if answered, err := s.pullRequestEvent(w, r, d); answered || err != nil {
		return err
	}
	if answered, err := s.deliveryTrigger(w, r, d); answered || err != nil {
		return err
	}
	d.runID = DeliveryRunID(d.body)
	// A replay of a body seen before (under any delivery id) answers with
	// its run before writing anything.
	if done, err := s.answerDuplicate(w, r, d.runID); done || err != nil {
		return err
	}
	if done, err := s.claimDelivery(w, r, d); done || err != nil {
		return err
	}
	return s.createTriggeredRun(w, r, d)
}

// signedDelivery reads the body and checks its signature, under the
// server's secret or a trigger's own.
func (s *Server) signedDelivery(w http.ResponseWriter, r *http.Request) (*delivery, error) {
	secret := s.cfg.GitHubWebhookSecret
	if secret == "" {
		return nil, errWebhookUnconfigured
	}
	body, e := readBodyMax(w, r, trust.MaxPayloadBytes)
	if e != nil {
		return nil, e
	}
	d := &delivery{body: body}
	signature := r.Header.Get("X-Hub-Signature-256")
	if !validSignature(secret, body, signature) {
		id, err := s.ownSecretSigner(r, body, signature)
		if err != nil {
			return nil, err
		}
		if id == "" {
			s.log.WarnContext(r.Context(), "github delivery refused: bad signature", "delivery", safeDelivery(r))
			return nil, errBadSignature
		}
		d.signedBy = id
	}
	return d, nil
}

// pullRequestEvent checks the content type and the event; answered is true
// when the delivery has been answered (a ping, an event not handled).
func (s *Server) pullRequestEvent(w http.ResponseWriter, r *http.Request, d *delivery) (answered bool, err error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false, invalid("Content-Type: must be application/json (set the webhook's content type to application/json)")
	}
	d.event = r.Header.Get("X-GitHub-Event")
	switch d.event {
	case githubEventPing:
		writeJSON(w, http.StatusOK, webhookAnswer{Status: "pong"})
		return true, nil
	case githubEventPullRequest:
		return false, nil
	case "":
		return false, invalid("X-GitHub-Event: header is required")
	default:
		return true, s.ignore(w, r, "event %q is not handled", d.event)
	}
}

// deliveryTrigger checks the delivery id and the payload, and finds the
// trigger of the base repository; answered is true when the delivery has
// been answered as ignored.
func (s *Server) deliveryTrigger(w http.ResponseWriter, r *http.Request, d *delivery) (answered bool, err error) {
	d.id = r.Header.Get("X-GitHub-Delivery")
	if !deliveryPattern.MatchString(d.id) {
		return false, invalid("X-GitHub-Delivery: header is required (a delivery id of at most 100 letters, digits, '.', '-' and '_')")
	}
	pr, err := trust.FromPullRequest(d.body)
	if err != nil {
		return false, invalid("pull_request payload: %s", strings.TrimPrefix(err.Error(), trust.ErrMalformed.Error()+": "))
	}
	d.pr = pr
	if !slices.Contains(githubPullRequestActions, pr.Action) {
		return true, s.ignore(w, r, "pull_request action %q starts no run", pr.Action)
	}
	cfg, err := s.st.TriggerForRepository(r.Context(), pr.BaseRepo)
	if errors.Is(err, store.ErrNotFound) {
		return true, s.ignore(w, r, "no trigger is configured for repository %s", pr.BaseRepo)
	}
	if err != nil {
		return false, err
	}
	d.cfg = cfg
	if cfg.OwnSecret && d.signedBy != cfg.ID {
		s.log.WarnContext(r.Context(), "github delivery refused: server secret used for a trigger with its own", "delivery", safeDelivery(r), "trigger", cfg.ID)
		return false, errNeedsOwnSecret
	}
	if !slices.Contains(cfg.Events, githubEventPullRequest) {
		return true, s.ignore(w, r, "the trigger of repository %s does not handle pull_request", pr.BaseRepo)
	}
	return false, nil
}

// claimDelivery claims the delivery id for the run; done is true when the
// delivery was claimed before and its run exists (and has been answered).
func (s *Server) claimDelivery(w http.ResponseWriter, r *http.Request, d *delivery) (done bool, err error) {
	err = s.st.ClaimDelivery(r.Context(), store.Delivery{
		ID:         d.id,
		SessionID:  d.runID,
		TriggerID:  d.cfg.ID,
		Repository: d.pr.BaseRepo,
		Number:     d.pr.Number,
		HeadSHA:    d.pr.HeadSHA,
		BodyDigest: redact.DigestBytes(d.body).String(),
		ReceivedAt: store.FormatTime(s.cfg.Now()),
	})
	if !errors.Is(err, store.ErrDeliveryClaimed) {
		return false, err
	}
	prev, err := s.st.GetDelivery(r.Context(), d.id)
	if err != nil {
		return false, err
	}
	d.runID = prev.SessionID
	// When it is not done: claimed, but no run: the first attempt stopped
	// between the claim and the run, or is still writing it. Create it; if
	// both try, the run's conditional write lets exactly one through.
	return s.answerDuplicate(w, r, d.runID)
}

// createTriggeredRun creates the delivery's run and answers 201 with it.
func (s *Server) createTriggeredRun(w http.ResponseWriter, r *http.Request, d *delivery) error {
	cfg, pr := d.cfg, d.pr
	v, err := s.runs.CreateForTrigger(r.Context(), RunRequest(cfg), run.Triggered{
		RunID:   d.runID,
		Type:    "github",
		Invoker: string(auth.Trigger(cfg.ID)),
		Tier:    pr.Tier,
		GitHub: &store.GitHubTrigger{
			TriggerID:      cfg.ID,
			DeliveryID:     d.id,
			Event:          d.event,
			Action:         pr.Action,
			Repository:     pr.BaseRepo,
			HeadRepository: pr.HeadRepo,
			PullRequest:    pr.Number,
			HeadSHA:        pr.HeadSHA,
			Fork:           pr.Fork,
			Author:         pr.Author,
		},
	})
	if err != nil {
		// Another request may have created it meanwhile (ErrExists, or a
		// transaction conflict reported as unavailable).
		if done, derr := s.answerDuplicate(w, r, d.runID); done || derr != nil {
			return derr
		}
		var inv *run.InvalidError
		if errors.As(err, &inv) {
			return invalid("trigger %s: %s", cfg.ID, inv.Error())
		}
		return err
	}
	s.log.InfoContext(r.Context(), "github delivery", "delivery", d.id, "action", pr.Action,
		"repository", pr.BaseRepo, "pull_request", pr.Number, "trigger", cfg.ID, "run", v.ID, "trust_tier", v.TrustTier)
	if s.cfg.RunCreated != nil {
		if h, err := s.st.GetHead(r.Context(), v.ID); err == nil {
			s.cfg.RunCreated(r.Context(), h)
		} else {
			s.log.ErrorContext(r.Context(), "run created: read head for the notification", "run", v.ID, "err", err)
		}
	}
	writeJSON(w, http.StatusCreated, webhookRun{SessionID: v.ID, TrustTier: v.TrustTier})
	return nil
}

// ownSecretSigner returns the id of the trigger whose own secret signed
// body, or "" when none did. The body is unverified here: it is read only
// for the repository it names.
func (s *Server) ownSecretSigner(r *http.Request, body []byte, signature string) (string, error) {
	repo := unsignedRepository(body)
	if repo == "" {
		return "", nil
	}
	cfg, err := s.st.TriggerForRepository(r.Context(), repo)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !cfg.OwnSecret || !validSignature(triggerSecret(s.cfg.GitHubWebhookSecret, cfg.ID), body, signature) {
		return "", nil
	}
	return cfg.ID, nil
}

// answerDuplicate answers 200 with the run if it exists. done is false
// when it does not (and nothing was written to w).
func (s *Server) answerDuplicate(w http.ResponseWriter, r *http.Request, runID string) (done bool, err error) {
	v, err := s.runs.Get(r.Context(), runID)
	if errors.Is(err, run.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	writeJSON(w, http.StatusOK, webhookRun{SessionID: v.ID, TrustTier: v.TrustTier, Duplicate: true})
	return true, nil
}

// ignore answers a verified delivery that starts no run: 202, nothing
// written. GitHub shows the reason in the delivery's response.
func (s *Server) ignore(w http.ResponseWriter, r *http.Request, format string, args ...any) error {
	reason := fmt.Sprintf(format, args...)
	s.log.InfoContext(r.Context(), "github delivery ignored", "delivery", safeDelivery(r), "reason", reason)
	writeJSON(w, http.StatusAccepted, webhookAnswer{Status: "ignored", Reason: reason})
	return nil
}

// safeDelivery is the delivery header for a log line, if it looks like one.
func safeDelivery(r *http.Request) string {
	d := r.Header.Get("X-GitHub-Delivery")
	if !deliveryPattern.MatchString(d) {
		return ""
	}
	return d
}
