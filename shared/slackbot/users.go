package slackbot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Errors of mapping a Slack user to a fluidbox member. Each refuses the
// click; none ever decides anything.
var (
	ErrUnknownUser = errors.New("slackbot: this Slack user is no fluidbox member")
	ErrAmbiguous   = errors.New("slackbot: more than one fluidbox member has this Slack user's email")
	ErrInactive    = errors.New("slackbot: this fluidbox member has been deactivated")
	ErrStale       = errors.New("slackbot: this fluidbox member's roles were last seen too long ago")
)

// StaleError is a click by a member whose roles fluidbox last saw (at an
// SSO sign-in or request) longer ago than it trusts them for. It matches
// ErrStale.
type StaleError struct {
	// Age is how long ago the roles were seen; MaxAge what is trusted.
	Age, MaxAge time.Duration
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("slackbot: roles seen %s ago, more than the %s trusted", e.Age.Round(time.Minute), e.MaxAge)
}

// Is makes errors.Is(err, ErrStale) hold.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// DefaultRolesMaxAge is how long a member's roles, as their last sign-in
// showed them, may decide from Slack unless FLUIDBOX_SLACK_ROLES_MAX_AGE_SECONDS
// says otherwise. A Slack click carries no token: the roles it decides with
// are the member row's, so an approver whose role the identity provider has
// since taken away keeps it here only until the window closes.
const DefaultRolesMaxAge = 24 * time.Hour

// UserInfo is the part of the Slack Web API the Directory uses: users.info
// for a clicker's email, users.lookupByEmail for a member's Slack user,
// auth.test for the app's own team.
type UserInfo interface {
	GetUserInfoContext(ctx context.Context, user string, options ...slack.GetUserInfoOption) (*slack.User, error)
	GetUserByEmailContext(ctx context.Context, email string) (*slack.User, error)
	AuthTestContext(ctx context.Context) (*slack.AuthTestResponse, error)
}

// Members is the part of the store the Directory reads.
type Members interface {
	GetMember(ctx context.Context, sub string) (store.Member, error)
	ListMembers(ctx context.Context, limit int) ([]store.Member, error)
}

// maxMembers bounds the members scanned for an email.
const maxMembers = 1000

// emailTTL is how long a Slack user's email is trusted without asking
// Slack again; the member's status and roles are read on every click.
const emailTTL = 10 * time.Minute

// Directory maps Slack users to fluidbox principals, and members to the
// Slack users they are.
type Directory struct {
	api      UserInfo
	members  Members
	explicit map[string]string
	maxAge   time.Duration
	now      func() time.Time

	mu     sync.Mutex
	emails map[string]cachedEmail
	// home is the app's own team (and enterprise), from auth.test, once
	// it has answered.
	home *slack.AuthTestResponse
}

type cachedEmail struct {
	email string
	at    time.Time
}

// NewDirectory returns a Directory. explicit maps Slack user ids to
// subjects ahead of the email match; maxAge is how long ago a member's
// roles may have been seen for a click to decide with them (0:
// DefaultRolesMaxAge).
func NewDirectory(api UserInfo, members Members, explicit map[string]string, maxAge time.Duration, now func() time.Time) *Directory {
	if maxAge <= 0 {
		maxAge = DefaultRolesMaxAge
	}
	return &Directory{api: api, members: members, explicit: explicit, maxAge: maxAge, now: now, emails: map[string]cachedEmail{}}
}

// Principal is the fluidbox caller a Slack user acts as: an explicit
// mapping's subject ("admin" is the operator), else the one active member
// whose verified SSO email is the user's Slack email (one Slack reports
// confirmed). Roles are the member's as its last token showed them, and
// only while that was within the Directory's window (a *StaleError past
// it: sign in again). Anything unclear refuses.
func (d *Directory) Principal(ctx context.Context, slackUser string) (auth.Principal, error) {
	if slackUser == "" {
		return auth.Principal{}, ErrUnknownUser
	}
	if sub, ok := d.explicit[slackUser]; ok {
		if sub == "admin" {
			return auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, nil
		}
		m, err := d.members.GetMember(ctx, sub)
		if errors.Is(err, store.ErrNoMember) {
			return auth.Principal{}, fmt.Errorf("%w: mapped to %s, who has never signed in", ErrUnknownUser, sub)
		}
		if err != nil {
			return auth.Principal{}, err
		}
		return d.principal(m)
	}
	email, err := d.email(ctx, slackUser)
	if err != nil {
		return auth.Principal{}, err
	}
	list, err := d.members.ListMembers(ctx, maxMembers)
	if err != nil {
		return auth.Principal{}, err
	}
	var found []store.Member
	for _, m := range list {
		if m.Email != "" && m.Email == email {
			found = append(found, m)
		}
	}
	switch len(found) {
	case 0:
		return auth.Principal{}, ErrUnknownUser
	case 1:
		return d.principal(found[0])
	}
	return auth.Principal{}, ErrAmbiguous
}

func (d *Directory) principal(m store.Member) (auth.Principal, error) {
	if m.Status != store.MemberActive {
		return auth.Principal{}, ErrInactive
	}
	// The window holds for every member, not only for role holders: a
	// personal call's owner is matched by the email of the same sign-in,
	// which is as old. A last_seen that does not parse is as stale as can be.
	seen, err := time.Parse(store.TimeLayout, m.LastSeen)
	if age := d.now().Sub(seen); err != nil || age > d.maxAge {
		return auth.Principal{}, &StaleError{Age: age, MaxAge: d.maxAge}
	}
	return auth.Principal{Kind: auth.KindUser, Subject: m.Sub, Roles: m.Roles, Email: m.Email}, nil
}

// email is the Slack user's email, from users.info (users:read.email).
func (d *Directory) email(ctx context.Context, slackUser string) (string, error) {
	now := d.now()
	d.mu.Lock()
	c, ok := d.emails[slackUser]
	d.mu.Unlock()
	if ok && now.Sub(c.at) < emailTTL {
		return c.email, nil
	}
	u, err := d.api.GetUserInfoContext(ctx, slackUser)
	if err != nil {
		return "", fmt.Errorf("slackbot: users.info: %w", err)
	}
	email, err := d.vouchedEmail(ctx, u)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.emails[slackUser] = cachedEmail{email: email, at: now}
	d.mu.Unlock()
	return email, nil
}

// vouchedEmail is u's email if Slack vouches for it, lower-cased:
// ErrUnknownUser otherwise. It is what a click is matched by, and what a
// member's direct message is sent by, so that both ways agree.
func (d *Directory) vouchedEmail(ctx context.Context, u *slack.User) (string, error) {
	if u.Deleted || u.IsBot || u.IsRestricted || u.IsUltraRestricted || u.IsStranger {
		// Guests and bots are never matched by email: a guest's address is
		// the guest's word, not the workspace's.
		return "", ErrUnknownUser
	}
	home, err := d.homeTeam(ctx)
	if err != nil {
		return "", err
	}
	ownTeam := home.TeamID != "" && u.TeamID == home.TeamID
	ownGrid := home.EnterpriseID != "" && u.Enterprise.EnterpriseID == home.EnterpriseID
	if !ownTeam && !ownGrid {
		// A Slack Connect user from another organization, in a channel
		// shared with the approvals channel: that organization chose the
		// address (its SSO can assert any), so it vouches for nothing here.
		// Only the app's own team (or its Enterprise Grid) does.
		return "", ErrUnknownUser
	}
	if !u.IsEmailConfirmed {
		// A profile email is whatever the user typed until Slack has
		// confirmed they receive mail there; an unconfirmed one could be
		// any approver's. Not remembered, so confirming it counts at the
		// next click.
		return "", ErrUnknownUser
	}
	email := strings.ToLower(strings.TrimSpace(u.Profile.Email))
	if !strings.Contains(email, "@") {
		return "", ErrUnknownUser
	}
	return email, nil
}

// SlackUser is the Slack user id of member sub, where a message only they
// may act on goes: the one explicit mapping to sub (the lowest id, if the
// operator mapped several), else the user of the member's verified SSO
// email, if Slack vouches for that user's address as it would for a click
// (so the person who gets the message is the one a click from it maps
// back to). ErrUnknownUser when there is none; ErrInactive for a
// deactivated member; other errors are Slack's or the store's, worth a
// retry.
func (d *Directory) SlackUser(ctx context.Context, sub string) (string, error) {
	var mapped []string
	for user, s := range d.explicit {
		if s == sub {
			mapped = append(mapped, user)
		}
	}
	if len(mapped) > 0 {
		slices.Sort(mapped)
		return mapped[0], nil
	}
	if sub == "" || sub == "admin" {
		// The operator has no email; only an explicit mapping names it.
		return "", ErrUnknownUser
	}
	m, err := d.members.GetMember(ctx, sub)
	if errors.Is(err, store.ErrNoMember) {
		return "", ErrUnknownUser
	}
	if err != nil {
		return "", err
	}
	if m.Status != store.MemberActive {
		return "", ErrInactive
	}
	if m.Email == "" {
		return "", ErrUnknownUser
	}
	u, err := d.api.GetUserByEmailContext(ctx, m.Email)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && se.Err == "users_not_found" {
			return "", ErrUnknownUser
		}
		return "", fmt.Errorf("slackbot: users.lookupByEmail: %w", err)
	}
	email, err := d.vouchedEmail(ctx, u)
	if err != nil {
		return "", err
	}
	if email != m.Email || u.ID == "" {
		return "", ErrUnknownUser
	}
	return u.ID, nil
}

// homeTeam is the app's own team, asked of auth.test once; a failure is
// not kept, so the next click asks again, and refuses meanwhile.
func (d *Directory) homeTeam(ctx context.Context) (*slack.AuthTestResponse, error) {
	d.mu.Lock()
	home := d.home
	d.mu.Unlock()
	if home != nil {
		return home, nil
	}
	home, err := d.api.AuthTestContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("slackbot: auth.test: %w", err)
	}
	if home.TeamID == "" && home.EnterpriseID == "" {
		// An org-wide install names its enterprise; one without either
		// would vouch for nobody.
		return nil, errors.New("slackbot: auth.test names no team or enterprise")
	}
	d.mu.Lock()
	d.home = home
	d.mu.Unlock()
	return home, nil
}
