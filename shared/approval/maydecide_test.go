package approval_test

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/store"
)

func TestMayDecide(t *testing.T) {
	t.Parallel()
	var (
		operator = auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}
		session  = auth.Principal{Kind: auth.KindSession, Subject: "ses_1", RunID: "ses_1"}
		user     = func(sub string, roles ...string) auth.Principal {
			return auth.Principal{Kind: auth.KindUser, Subject: sub, Roles: roles}
		}
		shared   = store.Approval{ID: "apr_1", RunID: "ses_1"}
		personal = store.Approval{ID: "apr_2", RunID: "ses_1", ConnectionID: "con_1", Personal: true}
		// Marked personal without a connection: still personal (fail closed).
		marked = store.Approval{ID: "apr_3", RunID: "ses_1", Personal: true}
	)
	cases := []struct {
		name    string
		who     auth.Principal
		a       store.Approval
		invoker string
		want    bool
	}{
		{"operator, shared", operator, shared, "alice", true},
		{"admin, shared", user("bob", "admin"), shared, "alice", true},
		{"approver, shared", user("carol", "approver"), shared, "alice", true},
		{"member, shared", user("mel", "member"), shared, "alice", false},
		{"no role, shared", user("nora"), shared, "alice", false},
		{"invoker as member, shared", user("alice", "member"), shared, "alice", false},
		{"session token, shared", session, shared, "alice", false},

		{"invoker, personal", user("alice"), personal, "alice", true},
		{"invoker with roles, personal", user("alice", "admin", "approver"), personal, "alice", true},
		{"admin, personal", user("bob", "admin"), personal, "alice", false},
		{"approver, personal", user("carol", "approver"), personal, "alice", false},
		{"operator, personal", operator, personal, "alice", false},
		{"session token, personal", session, personal, "ses_1", false},
		{"nobody when the invoker is unknown", user("alice", "admin"), personal, "", false},
		{"operator that invoked the run, personal", operator, personal, "admin", true},
		{"invoker, marked without connection", user("alice"), marked, "alice", true},
		{"admin, marked without connection", user("bob", "admin"), marked, "alice", false},
	}
	for _, c := range cases {
		if got := approval.MayDecide(c.who, c.a, c.invoker); got != c.want {
			t.Errorf("%s: MayDecide(%s %s %v, personal=%v, invoker %q) = %v, want %v",
				c.name, c.who.Kind, c.who.Subject, c.who.Roles, c.a.Personal, c.invoker, got, c.want)
		}
	}
}
