package auth

import "strings"

// Subject names who moved a call (decided_by, granted_by, revoked_by, a
// run's invoker). People are their identity provider's sub; everyone else
// is built here, and the list below that builds them is also what an
// identity provider may never mint (Reserved), so no person can pass for
// the operator, the system or a trigger.
type Subject string

// Operator is the admin-token operator. In single-admin mode it owns the
// personal connections it creates and has no member row.
const Operator Subject = "admin"

// Dev is `fluidbox dev` itself, for what it sets up from its environment
// (the model upstream).
const Dev Subject = "dev"

const (
	systemPrefix  = "system:"
	triggerPrefix = "trigger:"
)

// ExpiryRole is the system actor that expires approvals.
const ExpiryRole = "expiry"

// System is a part of fluidbox acting on its own, e.g. System(ExpiryRole).
func System(role string) Subject { return Subject(systemPrefix + role) }

// Trigger is the invoker of a run trigger id created.
func Trigger(id string) Subject { return Subject(triggerPrefix + id) }

// reserved is every name, or prefix of names, that only fluidbox gives out.
var reserved = []struct {
	name   string
	prefix bool
}{
	{string(Operator), false},
	{string(Dev), false},
	{systemPrefix, true},
	{triggerPrefix, true},
}

// Reserved reports whether sub is a name only fluidbox gives out: an
// identity provider's token carrying it is refused.
func Reserved(sub string) bool {
	for _, r := range reserved {
		if sub == r.name || (r.prefix && strings.HasPrefix(sub, r.name)) {
			return true
		}
	}
	return false
}
