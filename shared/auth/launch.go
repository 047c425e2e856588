package auth

import "strings"

// LaunchCredentialPrefix starts a launch credential: what a launcher hands
// the runner it starts for one run, good for that run's POST
// /v1/sessions/{id}/token once. A launcher can pass it through an
// environment (an ECS task override) that others may read later, because
// after its one use it opens nothing, and any later use is recorded.
const LaunchCredentialPrefix = "fbx_lch_"

// KindLaunch is a run's launch credential: it may only have that run's
// tokens issued, once.
const KindLaunch Kind = "launch"

// NewLaunchCredential returns a fresh launch credential and the hash to
// store.
func NewLaunchCredential() (Token, string, error) { return newToken(LaunchCredentialPrefix) }

// HoldsCredential reports whether s holds one of fluidbox's own
// credentials, by their prefixes in any case. A string a sandbox chose and
// the ledger records (a tool call id, a tool name, a subagent's id) must
// not, or a run could write its own session token into its ledger.
func HoldsCredential(s string) bool {
	l := strings.ToLower(s)
	for _, p := range []string{SessionTokenPrefix, RunnerTokenPrefix, TriggerKeyPrefix, LaunchCredentialPrefix} {
		if strings.Contains(l, p) {
			return true
		}
	}
	return false
}
