package connection_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/connection"
)

// FuzzCreateRequest: the body of POST /v1/connections never panics the
// decoder, yields at most one credential, and no error quotes a secret.
func FuzzCreateRequest(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","url":"https://x/mcp","kind":"shared","credential":{"type":"oauth","client_id":"c","client_secret":"SECRET-1","scopes":["a"]}}`,
		`{"name":"a","url":"https://x/mcp","kind":"shared","credential":{"type":"bearer","token":"SECRET-1"}}`,
		`{"credential":{"type":"oauth","token":"SECRET-1"}}`,
		`{"credential":{"type":"oauth","client_id":"c","client_secret":"SECRET-1","issuer":"https://as.example","consent_prompt":false}}`,
		`{"credential":{"type":"oauth","issuer":"SECRET-1","consent_prompt":"no"}}`,
		`{"credential":{"type":"oauth","client_secret":"SECRET-1","extra":1}}`,
		`{"credential":null}`, `{"credential":"SECRET-1"}`, `{"credential":{"type":"oauth"}} {}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req connection.CreateRequest
		err := json.Unmarshal([]byte(body), &req)
		if err != nil {
			if strings.Contains(err.Error(), "SECRET-1") {
				t.Fatalf("error quotes a secret: %v", err)
			}
			return
		}
		if req.OAuth != nil && req.Credential != nil {
			t.Fatal("both an oauth and a static credential")
		}
		if req.OAuth != nil && req.OAuth.ClientSecret != "" && strings.Contains(req.OAuth.String(), req.OAuth.ClientSecret) {
			t.Fatal("the oauth request prints its secret")
		}
	})
}
