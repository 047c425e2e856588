package auth_test

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/auth"
)

func TestSubjects(t *testing.T) {
	t.Parallel()
	for _, s := range []auth.Subject{auth.Operator, auth.Dev, auth.System(auth.ExpiryRole), auth.System("sweep"), auth.Trigger("trg_1"), auth.Trigger("")} {
		if !auth.Reserved(string(s)) {
			t.Errorf("%q is built by fluidbox but not reserved", s)
		}
	}
	if auth.System(auth.ExpiryRole) != "system:expiry" || auth.Trigger("trg_1") != "trigger:trg_1" || auth.Operator != "admin" {
		t.Errorf("persisted subjects changed: %q %q %q", auth.System(auth.ExpiryRole), auth.Trigger("trg_1"), auth.Operator)
	}
	for _, sub := range []string{"alice", "administrator", "admin2", "system", "trigger", "Admin", "developer", "x:system:y"} {
		if auth.Reserved(sub) {
			t.Errorf("%q is reserved; an identity provider may mint it", sub)
		}
	}
}
