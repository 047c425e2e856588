package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Input request modes (MCP elicitation). They are on the wire: never rename.
const (
	InputURL  = "url"
	InputForm = "form"
)

// Input request outcomes. They are on the wire: never rename.
const (
	// InputRefused: the broker refused the request itself (a link that is
	// not an absolute http or https URL, a form that asks for a secret, a
	// mode it does not know) and answered decline.
	InputRefused = "refused"
	// InputUnanswered: nobody in the run could answer it within the call,
	// and the broker answered cancel (the user dismissed it).
	InputUnanswered = "unanswered"
)

// MaxInputRequests bounds the input requests kept per call; an upstream
// asking more often is answered the same way, unrecorded past the bound.
const MaxInputRequests = 16

// InputRequest is a request for input an upstream made in the middle of a
// tool call: an elicitation on the call's stream (2025-11-25), or an
// input_required result (2026-07-28), which the SDK's multi round-trip
// support turns into the same elicitation. Only what a human may see of it
// is kept: the mode, and for a link its scheme, host and path. The query,
// the fragment and any user info are dropped (they carry the server's
// state or a token), as are the upstream's message and any form schema.
type InputRequest struct {
	Mode string `json:"mode"`
	// Link is the URL of a url-mode request without its query, fragment
	// and user info, or "" when there is none or it was refused.
	Link    string `json:"link,omitempty"`
	Outcome string `json:"outcome"`
}

// inputs records a call's input requests and answers each: a refusal is
// decline, anything else cancel, since no human is reachable within a
// call. Either lets the upstream finish the call knowing it got no input,
// rather than the call failing on an elicitation the client cannot take.
type inputs struct {
	mu   sync.Mutex
	seen []InputRequest
}

func (in *inputs) reset() {
	in.mu.Lock()
	in.seen = nil
	in.mu.Unlock()
}

// taken is the call's input requests, sorted: the SDK answers one round's
// requests concurrently, and the ledger should not record that race.
func (in *inputs) taken() []InputRequest {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := append([]InputRequest(nil), in.seen...)
	slices.SortStableFunc(out, func(a, b InputRequest) int {
		return cmp.Or(cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Link, b.Link), cmp.Compare(a.Outcome, b.Outcome))
	})
	return out
}

func (in *inputs) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	r := judgeInput(req.Params)
	in.mu.Lock()
	if len(in.seen) < MaxInputRequests {
		in.seen = append(in.seen, r)
	}
	in.mu.Unlock()
	if r.Outcome == InputRefused {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return &mcp.ElicitResult{Action: "cancel"}, nil
}

// judgeInput classifies an upstream's elicitation. Unknown or unparsable
// is refused.
func judgeInput(p *mcp.ElicitParams) InputRequest {
	if p == nil {
		return InputRequest{Mode: InputForm, Outcome: InputRefused}
	}
	switch p.Mode {
	case InputURL:
		link, ok := linkOf(p.URL)
		if !ok {
			return InputRequest{Mode: InputURL, Outcome: InputRefused}
		}
		return InputRequest{Mode: InputURL, Link: link, Outcome: InputUnanswered}
	case "", InputForm:
		// MCP forbids asking for sensitive information in a form (it
		// would pass through the client); a form that looks like it does
		// is refused, whoever might have answered it.
		if asksSecret(p.RequestedSchema) {
			return InputRequest{Mode: InputForm, Outcome: InputRefused}
		}
		return InputRequest{Mode: InputForm, Outcome: InputUnanswered}
	default:
		return InputRequest{Mode: InputForm, Outcome: InputRefused}
	}
}

// linkOf is raw as a human may be shown it and a ledger may keep it: an
// absolute http or https URL with a host, without user info, query or
// fragment. Any other scheme (javascript:, data:, file:, a custom one
// that opens an application) is refused.
func linkOf(raw string) (string, bool) {
	if len(raw) > 2048 {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	clean := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return clean.String(), true
}

// secretWords are property names and titles that ask for a credential.
var secretWords = regexp.MustCompile(`(?i)pass(word|wd|phrase|code)|secret|token|api[-_ ]?key|credential|private[-_ ]?key|otp|one[-_ ]?time|mfa|2fa|\bpin\b|cvv|cvc|card[-_ ]?number|ssn|social[-_ ]?security`)

// asksSecret reports whether a form's requested schema asks for a
// secret: a property whose name, title or description is a credential's,
// or that is writeOnly. A schema it cannot read counts as asking. (One with
// format password never gets here: the SDK refuses a format outside MCP's
// elicitation subset, and the call fails with invalid params.)
func asksSecret(schema any) bool {
	if schema == nil {
		return false
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return true
	}
	var s struct {
		Properties map[string]struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			WriteOnly   bool   `json:"writeOnly"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return true
	}
	for name, p := range s.Properties {
		if p.WriteOnly || secretWords.MatchString(name) || secretWords.MatchString(p.Title) || secretWords.MatchString(p.Description) {
			return true
		}
	}
	return false
}
