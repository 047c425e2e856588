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

func (s *Server) githubDelivery(w http.ResponseWriter, r *http.Request) error {
	secret := s.cfg.GitHubWebhookSecret
	if secret == "" {
		return errWebhookUnconfigured
	}
	body, e := readBodyMax(w, r, trust.MaxPayloadBytes)
	if e != nil {
		return e
	}
	signature := r.Header.Get("X-Hub-Signature-256")
	signedBy := "" // the id of the trigger whose own secret signed, or ""
	if !validSignature(secret, body, signature) {
		id, err := s.ownSecretSigner(r, body, signature)
		if err != nil {
			return err
		}
		if id == "" {
			s.log.WarnContext(r.Context(), "github delivery refused: bad signature", "delivery", safeDelivery(r))
			return errBadSignature
		}
		signedBy = id
	}
	// Signed from here on.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return invalid("Content-Type: must be application/json (set the webhook's content type to application/json)")
	}
	event := r.Header.Get("X-GitHub-Event")
	switch event {
	case githubEventPing:
		writeJSON(w, http.StatusOK, webhookAnswer{Status: "pong"})
		return nil
	case githubEventPullRequest:
	case "":
		return invalid("X-GitHub-Event: header is required")
	default:
		return s.ignore(w, r, "event %q is not handled", event)
	}
	delivery := r.Header.Get("X-GitHub-Delivery")
	if !deliveryPattern.MatchString(delivery) {
		return invalid("X-GitHub-Delivery: header is required (a delivery id of at most 100 letters, digits, '.', '-' and '_')")
	}
	pr, err := trust.FromPullRequest(body)
	if err != nil {
		return invalid("pull_request payload: %s", strings.TrimPrefix(err.Error(), trust.ErrMalformed.Error()+": "))
	}
	if !slices.Contains(githubPullRequestActions, pr.Action) {
		return s.ignore(w, r, "pull_request action %q starts no run", pr.Action)
	}
	cfg, err := s.st.TriggerForRepository(r.Context(), pr.BaseRepo)
	if errors.Is(err, store.ErrNotFound) {
		return s.ignore(w, r, "no trigger is configured for repository %s", pr.BaseRepo)
	}
	if err != nil {
		return err
	}
	if cfg.OwnSecret && signedBy != cfg.ID {
		s.log.WarnContext(r.Context(), "github delivery refused: server secret used for a trigger with its own", "delivery", safeDelivery(r), "trigger", cfg.ID)
		return errNeedsOwnSecret
	}
	if !slices.Contains(cfg.Events, githubEventPullRequest) {
		return s.ignore(w, r, "the trigger of repository %s does not handle pull_request", pr.BaseRepo)
	}

	runID := DeliveryRunID(body)
	// A replay of a body seen before (under any delivery id) answers with
	// its run before writing anything.
	if done, err := s.answerDuplicate(w, r, runID); done || err != nil {
		return err
	}
	err = s.st.ClaimDelivery(r.Context(), store.Delivery{
		ID:         delivery,
		SessionID:  runID,
		TriggerID:  cfg.ID,
		Repository: pr.BaseRepo,
		Number:     pr.Number,
		HeadSHA:    pr.HeadSHA,
		BodyDigest: redact.DigestBytes(body).String(),
		ReceivedAt: store.FormatTime(s.cfg.Now()),
	})
	switch {
	case errors.Is(err, store.ErrDeliveryClaimed):
		prev, err := s.st.GetDelivery(r.Context(), delivery)
		if err != nil {
			return err
		}
		runID = prev.SessionID
		if done, err := s.answerDuplicate(w, r, runID); done || err != nil {
			return err
		}
		// Claimed, but no run: the first attempt stopped between the claim
		// and the run, or is still writing it. Create it; if both try, the
		// run's conditional write lets exactly one through.
	case err != nil:
		return err
	}

	v, err := s.runs.CreateForTrigger(r.Context(), RunRequest(cfg), run.Triggered{
		RunID:   runID,
		Type:    "github",
		Invoker: string(auth.Trigger(cfg.ID)),
		Tier:    pr.Tier,
		GitHub: &store.GitHubTrigger{
			TriggerID:      cfg.ID,
			DeliveryID:     delivery,
			Event:          event,
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
		if done, derr := s.answerDuplicate(w, r, runID); done || derr != nil {
			return derr
		}
		var inv *run.InvalidError
		if errors.As(err, &inv) {
			return invalid("trigger %s: %s", cfg.ID, inv.Error())
		}
		return err
	}
	s.log.InfoContext(r.Context(), "github delivery", "delivery", delivery, "action", pr.Action,
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
