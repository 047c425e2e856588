package slackbot

import (
	"context"
	"errors"
	"fmt"
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
)

// UserInfo is the part of the Slack Web API the Directory uses: users.info
// for a clicker's email, auth.test for the app's own team.
type UserInfo interface {
	GetUserInfoContext(ctx context.Context, user string, options ...slack.GetUserInfoOption) (*slack.User, error)
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

// Directory maps Slack users to fluidbox principals.
type Directory struct {
	api      UserInfo
	members  Members
	explicit map[string]string
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
// subjects ahead of the email match.
func NewDirectory(api UserInfo, members Members, explicit map[string]string, now func() time.Time) *Directory {
	return &Directory{api: api, members: members, explicit: explicit, now: now, emails: map[string]cachedEmail{}}
}

// Principal is the fluidbox caller a Slack user acts as: an explicit
// mapping's subject ("admin" is the operator), else the one active member
// whose verified SSO email is the user's Slack email (one Slack reports
// confirmed). Roles are the member's as its last token showed them.
// Anything unclear refuses.
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
		return principal(m)
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
		return principal(found[0])
	}
	return auth.Principal{}, ErrAmbiguous
}

func principal(m store.Member) (auth.Principal, error) {
	if m.Status != store.MemberActive {
		return auth.Principal{}, ErrInactive
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
	d.mu.Lock()
	d.emails[slackUser] = cachedEmail{email: email, at: now}
	d.mu.Unlock()
	return email, nil
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
