package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/store"
)

// TestGrantsBelongToTheirRule: the same scope key under two rules is two
// grants; a rule id and a scope key never spell another pair's key; and a
// grant stored the way grants were before they belonged to a rule (the
// scope key's digest under GRANT#) is neither listed nor read.
func TestGrantsBelongToTheirRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_g", 0)
	put := func(rule, key string) store.Op {
		op, err := st.Put(store.GrantKey("ses_g", rule, key), store.Grant{RuleID: rule, ScopeKey: key, ApprovalID: "apr_" + rule})
		must(t, err)
		return op
	}
	// The layout grants had before: GRANT#<sha256 of the scope key>.
	sum := sha256.Sum256([]byte("Bash:git push"))
	old, err := st.Put(store.Key{PK: "RUN#ses_g", SK: "GRANT#" + hex.EncodeToString(sum[:])}, store.Grant{ScopeKey: "Bash:git push", ApprovalID: "apr_old"})
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, put("push", "Bash:git push"), put("deploy", "Bash:git push"), put("", "mcp__a__b"), old)
	must(t, err)

	got, err := st.Grants(ctx, "ses_g")
	must(t, err)
	seen := map[store.Grant]bool{}
	for _, g := range got {
		seen[store.Grant{RuleID: g.RuleID, ScopeKey: g.ScopeKey, ApprovalID: g.ApprovalID}] = true
	}
	for _, want := range []store.Grant{{RuleID: "push", ScopeKey: "Bash:git push", ApprovalID: "apr_push"}, {RuleID: "deploy", ScopeKey: "Bash:git push", ApprovalID: "apr_deploy"}, {ScopeKey: "mcp__a__b", ApprovalID: "apr_"}} {
		if !seen[want] {
			t.Errorf("Grants = %+v, want %+v among them", got, want)
		}
	}
	if len(got) != 3 {
		t.Errorf("Grants = %+v, want the 3 rule-keyed grants and not the old one", got)
	}

	pairs := [][2]string{{"a", "b:c"}, {"a:b", "c"}, {"", "ab:c"}, {"ab", ":c"}, {"1:a", "b"}, {"", "1:ab"}}
	keys := map[string][2]string{}
	for _, p := range pairs {
		k := store.GrantKey("ses_g", p[0], p[1]).SK
		if prev, dup := keys[k]; dup {
			t.Errorf("GrantKey(%q, %q) = GrantKey(%q, %q) = %s", p[0], p[1], prev[0], prev[1], k)
		}
		keys[k] = p
	}
}

// TestGrantHeldOp: the check holds while the grant exists and refuses its
// append (with the op's error) once it is gone.
func TestGrantHeldOp(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	h := newRun(t, st, "ses_h", 0)
	gone := errors.New("gone")
	_, err := append1(t, st, h, store.HeadChange{}, st.GrantHeldOp("ses_h", "push", "Bash:git push", gone))
	wantErr(t, "a check on a grant never written", err, gone)
	g, err := st.Put(store.GrantKey("ses_h", "push", "Bash:git push"), store.Grant{RuleID: "push", ScopeKey: "Bash:git push"})
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, g)
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, st.GrantHeldOp("ses_h", "push", "Bash:git push", gone))
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, st.DeleteExisting(store.GrantKey("ses_h", "push", "Bash:git push"), gone))
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, st.GrantHeldOp("ses_h", "push", "Bash:git push", gone))
	wantErr(t, "a check on a revoked grant", err, gone)
}
