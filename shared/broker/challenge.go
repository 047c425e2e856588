package broker

import (
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/fluidbox/fluidbox/shared/seal"
)

// Bounds on what an upstream's challenge may ask for. Past them the
// challenge is not used (the refusal stays a plain 401 or 403): its scopes
// are stored on the connection and shown to its owner, so a hostile
// upstream must not be able to make them large.
const (
	// MaxChallengeBytes bounds the WWW-Authenticate header values read.
	MaxChallengeBytes = 4096
	// MaxScopes bounds the scopes of one challenge, MaxScopeLen one scope.
	MaxScopes   = 32
	MaxScopeLen = 256
)

// challenge is what a 401 or 403 said in its Bearer challenge.
type challenge struct {
	insufficientScope bool
	scopes            []string
}

// readChallenge reads the Bearer challenge of a 401 or 403 with the SDK's
// parser (RFC 9110 11.6.1). An oversized, unparsable or scope-less
// challenge, or one whose scopes are not all valid or contain the
// credential, yields nil.
func readChallenge(h http.Header, cred seal.Credential) *challenge {
	values := h.Values("WWW-Authenticate")
	n := 0
	for _, v := range values {
		n += len(v)
	}
	if n == 0 || n > MaxChallengeBytes {
		return nil
	}
	cs, err := oauthex.ParseWWWAuthenticate(values)
	if err != nil {
		// The parser's error quotes the header: not kept.
		return nil
	}
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		scopes, ok := ParseScopes(c.Params["scope"])
		if !ok || len(scopes) == 0 || containsSecret([]byte(c.Params["scope"]), cred) {
			return nil
		}
		// A 403 asks for scopes with error="insufficient_scope" (RFC 6750
		// 3.1), or with no error at all: the MCP Go SDK's
		// auth.RequireBearerToken answers a token without its Scopes so.
		e := c.Params["error"]
		return &challenge{insufficientScope: e == "insufficient_scope" || e == "", scopes: scopes}
	}
	return nil
}

// ParseScopes splits an RFC 6749 scope parameter (3.3: scope-tokens
// separated by single spaces) into its distinct tokens, in order. ok is
// false if a token is not a scope-token (1*( %x21 / %x23-5B / %x5D-7E )),
// is longer than MaxScopeLen, or there are more than MaxScopes.
func ParseScopes(scope string) (scopes []string, ok bool) {
	if scope == "" {
		return nil, true
	}
	for _, s := range strings.Split(scope, " ") {
		if !ValidScope(s) {
			return nil, false
		}
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
		if len(scopes) > MaxScopes {
			return nil, false
		}
	}
	return scopes, true
}

// ValidScope reports whether s is an RFC 6749 scope-token of at most
// MaxScopeLen bytes.
func ValidScope(s string) bool {
	if s == "" || len(s) > MaxScopeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
