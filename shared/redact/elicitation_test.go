package redact_test

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/redact"
)

// TestElicitationLinkOnlyWithoutQuery: whatever link a caller puts in an
// Elicitation, the ledger keeps it only as an http or https URL with a
// scheme, host and path: one with a query, fragment, user info or another
// scheme is encoded empty, and the event still encodes. input.requested
// keeps its link the same way.
func TestElicitationLinkOnlyWithoutQuery(t *testing.T) {
	t.Parallel()
	for link, want := range map[string]string{
		"https://auth.example.com/consent":        "https://auth.example.com/consent",
		"http://auth.example.com":                 "http://auth.example.com",
		"https://auth.example.com/c?state=SECRET": "",
		"https://auth.example.com/c?":             "",
		"https://auth.example.com/c#SECRET":       "",
		"https://user:SECRET@auth.example.com/c":  "",
		"javascript:alert('SECRET')":              "",
		"data:text/html,SECRET":                   "",
		"/relative/SECRET":                        "",
		"https://auth.example.com/%zz":            "",
	} {
		env, err := redact.New(redact.ToolBrokered{ToolCallID: "c", Elicitations: []redact.Elicitation{{Mode: "url", Link: link, Outcome: "unanswered"}}})
		if err != nil {
			t.Fatalf("New(link %q): %v", link, err)
		}
		data := string(env.Data())
		if strings.Contains(data, "SECRET") || (want != "" && !strings.Contains(data, `"link":"`+want+`"`)) || (want == "" && strings.Contains(data, `"link"`)) {
			t.Errorf("link %q encoded as %s, want link %q", link, data, want)
		}
		env, err = redact.New(redact.InputRequested{InputRequestID: "inp_1", ToolCallID: "c", Mode: "url", Link: link})
		if err != nil {
			t.Fatalf("New(input.requested, link %q): %v", link, err)
		}
		if data := string(env.Data()); strings.Contains(data, "SECRET") || !strings.Contains(data, `"link":"`+want+`"`) {
			t.Errorf("input.requested: link %q encoded as %s, want link %q", link, data, want)
		}
	}
}
