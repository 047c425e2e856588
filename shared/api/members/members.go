package members

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/store"
)

var (
	errDeactivated     = &route.Error{Status: http.StatusForbidden, Code: "forbidden", Message: "this member has been deactivated; ask an admin to activate it"}
	errReservedSubject = &route.Error{Status: http.StatusForbidden, Code: "forbidden", Message: "this token's sub names the operator or a system actor; fluidbox does not accept it from the identity provider"}
)

// lastSeenEvery is how stale a member's last_seen may grow before a request
// refreshes it: recording every request would make each one a write.
const lastSeenEvery = time.Hour

// AuthenticateUser verifies an SSO user's JWT and then fluidbox's own
// switch: a member an admin deactivated is refused on every request, however
// valid the token. A user is recorded as a member the first time it is
// seen; afterwards its row is written only when its roles change or its
// last_seen is over lastSeenEvery old, so a request costs one read.
func (s *Server) AuthenticateUser(r *http.Request, tok string) (auth.Principal, *route.Error) {
	ctx := r.Context()
	who, err := s.cfg.OIDC.Verify(ctx, tok)
	if errors.Is(err, sso.ErrIssuerUnavailable) {
		s.log.ErrorContext(ctx, "authenticate", "err", err)
		return auth.Principal{}, errUnavailable
	}
	if err != nil {
		s.log.InfoContext(ctx, "token refused", "err", err)
		return auth.Principal{}, errUnauthenticated
	}
	if auth.Reserved(who.Subject) {
		// A user carrying a name records give the operator, the system or
		// a trigger could pass for them (as the invoker of the operator's
		// run, say), so such a token is refused.
		s.log.WarnContext(ctx, "token refused", "err", "reserved subject", "sub", who.Subject)
		return auth.Principal{}, errReservedSubject
	}
	now := store.FormatTime(s.cfg.Now())
	m, err := s.st.GetMember(ctx, who.Subject)
	if errors.Is(err, store.ErrNoMember) {
		err = s.st.PutMember(ctx, store.Member{Sub: who.Subject, Status: store.MemberActive, Roles: who.Roles, Email: who.Email, FirstSeen: now, LastSeen: now})
		if err == nil {
			s.log.InfoContext(ctx, "member recorded", "sub", who.Subject, "roles", who.Roles)
			return who, nil
		}
		if errors.Is(err, store.ErrMemberExists) {
			// Recorded by a concurrent request: judge by that row.
			m, err = s.st.GetMember(ctx, who.Subject)
		}
	}
	if err != nil {
		s.log.ErrorContext(ctx, "authenticate", "sub", who.Subject, "err", err)
		return auth.Principal{}, errUnavailable
	}
	if m.Status != store.MemberActive {
		return auth.Principal{}, errDeactivated
	}
	if !slices.Equal(m.Roles, who.Roles) || m.Email != who.Email || m.LastSeen < store.FormatTime(s.cfg.Now().Add(-lastSeenEvery)) {
		// Bookkeeping only: a failure to record it refuses nobody.
		if err := s.st.TouchMember(ctx, who.Subject, who.Roles, who.Email, now); err != nil {
			s.log.WarnContext(ctx, "touch member", "sub", who.Subject, "err", err)
		}
	}
	return who, nil
}

// maxMembers bounds one listing of members.
const maxMembers = 1000

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	list, err := s.st.ListMembers(r.Context(), maxMembers)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": list})
	return nil
}

func (s *Server) deactivateMember(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	if who.Kind == auth.KindUser && who.Subject == r.PathValue("sub") {
		// An admin locking itself out helps nobody; another admin, or the
		// operator's token, can still do it.
		return conflict("you cannot deactivate yourself")
	}
	return s.setMemberStatus(w, r, who, store.MemberInactive)
}

func (s *Server) activateMember(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	return s.setMemberStatus(w, r, who, store.MemberActive)
}

func (s *Server) setMemberStatus(w http.ResponseWriter, r *http.Request, who auth.Principal, status string) error {
	sub := r.PathValue("sub")
	m, err := s.st.SetMemberStatus(r.Context(), sub, status, who.Subject, store.FormatTime(s.cfg.Now()))
	if errors.Is(err, store.ErrNoMember) {
		return notFound("member " + sub)
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "member status", "sub", sub, "status", status, "by", who.Subject)
	writeJSON(w, http.StatusOK, m)
	return nil
}
