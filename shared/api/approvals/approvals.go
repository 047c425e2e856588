package approvals

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/review"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func approvalOut(a store.Approval) client.Approval {
	return client.Approval{
		ID: a.ID, SessionID: a.RunID, ToolCallID: a.ToolCallID, ToolName: a.ToolName, Input: json.RawMessage(a.Input),
		RuleID: a.RuleID, ScopeKey: a.ScopeKey, DefaultScope: a.DefaultScope, Status: a.Status,
		RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt, Decision: settledAs(a.Status), DecidedBy: a.DecidedBy,
		DecidedAt: a.DecidedAt, Reason: a.Reason, ConnectionID: a.ConnectionID,
		InputSize: a.InputSize, InputDigest: a.InputDigest, InputTruncated: a.InputTruncated,
	}
}

// settledAs is an approval's decision on the wire: its status once
// settled, absent while it is pending.
func settledAs(s vocab.ApprovalStatus) vocab.ApprovalStatus {
	if s.Settled() {
		return s
	}
	return ""
}

// listInputBytes is how much of an input a list shows. A list is one
// response (Lambda's limit is 6 MB) of at most maxListPage approvals, and
// an input may be hundreds of KiB: cut, 100 approvals stay under 1 MB
// whatever their inputs. The human deciding opens the approval for the
// rest.
const listInputBytes = 4 << 10

// approvalListOut is an approval as a list shows it: an input over
// listInputBytes is cut, saying so, with its full size and digest.
func approvalListOut(a store.Approval) client.Approval {
	v := approvalOut(a)
	if len(a.Input) > listInputBytes {
		cut := listInputBytes
		for cut > 0 && !utf8.RuneStart(a.Input[cut]) {
			cut--
		}
		v.Input, v.InputTruncated, v.InputPreview = nil, true, a.Input[:cut]
	}
	return v
}

func approvalsOut(list []store.Approval) []client.Approval {
	out := make([]client.Approval, len(list))
	for i, a := range list {
		out[i] = approvalListOut(a)
	}
	return out
}

// Pages of GET /v1/approvals.
const (
	defaultListPage = 50
	maxListPage     = 100
)

// cursorPattern is what a decoded cursor must be: an approval's position
// in the pending list (a request time, '#', an approval id).
var cursorPattern = regexp.MustCompile(`^[0-9T:.Z-]{1,40}#apr_[a-z2-7]{1,40}$`)

// listPendingApprovals is the caller's inbox: the pending approvals they
// may decide (approval.Service.Inbox), so a member sees the calls on their
// own personal connections and an approver no one else's.
func (s *Server) listPendingApprovals(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	q := r.URL.Query()
	limit, after, err := pageOf(q, cursorPattern)
	if err != nil {
		return err
	}
	runID := q.Get("session_id")
	if runID != "" && !ids.Valid("ses_", runID) {
		return invalid("session_id: must be a session id (ses_...)")
	}
	page, err := s.approvals.Inbox(r.Context(), who, runID, after, limit)
	if err != nil {
		return err
	}
	out := approvalsOut(page.Approvals)
	for i := range out {
		if err := s.withReview(r.Context(), &out[i], page.Approvals[i]); err != nil {
			return err
		}
	}
	writePage(w, "approvals", out, page.Next)
	return nil
}

// pageOf reads an inbox page's limit (1 to maxListPage, defaultListPage
// when absent) and cursor (a next_cursor from an earlier page: base64url
// of a position that cursor matches; "" from the start).
func pageOf(q url.Values, cursor *regexp.Regexp) (int, string, error) {
	limit := defaultListPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListPage {
			return 0, "", invalid("limit: must be an integer from 1 to %d", maxListPage)
		}
		limit = n
	}
	var after string
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !cursor.Match(b) {
			return 0, "", invalid("cursor: must be a next_cursor from an earlier page")
		}
		after = string(b)
	}
	return limit, after, nil
}

// writePage answers an inbox page: its items under key, and next_cursor
// when next (the position to list after) says the list goes on.
func writePage(w http.ResponseWriter, key string, items any, next string) {
	body := map[string]any{key: items}
	if next != "" {
		body["next_cursor"] = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	writeJSON(w, http.StatusOK, body)
}

// withReview adds the facts a reviewer decides by.
func (s *Server) withReview(ctx context.Context, v *client.Approval, a store.Approval) error {
	f, err := review.Load(ctx, s.st, a)
	if err != nil {
		return err
	}
	v.Review = &f
	return nil
}

func approvalID(r *http.Request) (string, error) {
	id := r.PathValue("approval")
	if !ids.Valid("apr_", id) {
		return "", notFound("approval " + id)
	}
	return id, nil
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := approvalID(r)
	if err != nil {
		return err
	}
	a, err := s.approvals.View(r.Context(), who, id)
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return notFound("approval " + id)
	case errors.Is(err, approval.ErrForbidden):
		return errForbidden
	case err != nil:
		return err
	}
	out := approvalOut(a)
	if err := s.withReview(r.Context(), &out, a); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type decisionRequest struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := approvalID(r)
	if err != nil {
		return err
	}
	var req decisionRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	choice, err := vocab.ParseChoice(req.Decision)
	if err != nil {
		return invalid("decision: %q is not one of approved_once, approved_session, denied, approved", req.Decision)
	}
	a, applied, err := s.approvals.DecideWithReason(r.Context(), who, id, choice, req.Reason)
	var bad *approval.InvalidError
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return notFound("approval " + id)
	case errors.Is(err, approval.ErrForbidden):
		return errForbidden
	case errors.As(err, &bad):
		return invalid("decision: %s", bad.Message)
	case err != nil:
		return err
	}
	s.log.InfoContext(r.Context(), "approval decided", "approval", id, "run", a.RunID, "by", who.Subject, "status", a.Status, "applied", applied)
	if applied {
		requested, _ := time.Parse(store.TimeLayout, a.RequestedAt)
		decided, _ := time.Parse(store.TimeLayout, a.DecidedAt)
		s.tel.ApprovalSettled(r.Context(), telemetry.ApprovalWait{Run: a.RunID, Call: a.ToolCallID, Approval: a.ID, Outcome: a.Status, RequestedAt: requested, SettledAt: decided})
	}
	out := approvalOut(a)
	out.Applied = &applied
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listRunApprovals(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	if _, err := s.runs.Get(r.Context(), id); err != nil {
		return err
	}
	list, err := s.approvals.ForRun(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": approvalsOut(list)})
	return nil
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	if _, err := s.runs.Get(r.Context(), id); err != nil {
		return err
	}
	list, err := s.st.Grants(r.Context(), id)
	if err != nil {
		return err
	}
	if list == nil {
		list = []store.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": list})
	return nil
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	key := r.PathValue("scope_key")
	err = s.approvals.RevokeGrant(r.Context(), who, id, key)
	switch {
	case errors.Is(err, call.ErrNoGrant):
		return notFound("grant " + key)
	case errors.Is(err, store.ErrNotFound):
		return notFound("session " + id)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"scope_key": key, "status": "revoked"})
	return nil
}
