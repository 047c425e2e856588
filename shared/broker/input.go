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
	// and the broker answered cancel (the user dismissed it). For a link,
	// the caller may have a person open it and call again (Completed).
	InputUnanswered = "unanswered"
	// InputCompleted: a link a person has said they opened and finished
	// (Session.Completed), answered accept.
	InputCompleted = "completed"
)

// MaxInputRequests bounds the input requests kept per call; an upstream
// asking more often is answered the same way, unrecorded past the bound.
const MaxInputRequests = 16

// InputRequest is a request for input an upstream made in the middle of a
// tool call: an elicitation on the call's stream (2025-11-25), or an
// input_required result (2026-07-28), which the SDK's multi round-trip
// support turns into the same elicitation. Only what a human may see of it
// is kept: the mode, and for a link its scheme, host and path (Link, for
// the ledger), and the link as the person must open it (URL, never
// encoded: for the person alone). The upstream's message and any form
// schema are dropped.
type InputRequest struct {
	Mode string `json:"mode"`
	// Link is the URL of a url-mode request without its query, fragment
	// and user info, or "" when there is none or it was refused.
	Link string `json:"link,omitempty"`
	// URL is the link with its query, which the upstream's page may need
	// (its state), still without fragment or user info: for the person
	// asked to open it, never for the ledger, a log or the sandbox. "" when
	// Link is, or when it holds the session's credential.
	URL     string `json:"-"`
	Outcome string `json:"outcome"`
}

// inputs records a call's input requests and answers each: a refusal is
// decline, a link a person has finished (done) accept, anything else
// cancel, since no human is reachable within a call. Each lets the
// upstream finish the call knowing what it got, rather than the call
// failing on an elicitation the client cannot take.
type inputs struct {
	mu   sync.Mutex
	seen []InputRequest
	// done are the links (as linkOf gives them) a person has opened and
	// finished for this call.
	done map[string]bool
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
	switch in.judge(req.Params).Outcome {
	case InputRefused:
		return &mcp.ElicitResult{Action: "decline"}, nil
	case InputCompleted:
		// A URL-mode accept carries no content: it says the person went
		// through with it; the upstream checks the rest on its side.
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	return &mcp.ElicitResult{Action: "cancel"}, nil
}

// judge classifies one request, completing a link a person finished, and
// records it (up to MaxInputRequests).
func (in *inputs) judge(p *mcp.ElicitParams) InputRequest {
	r := judgeInput(p)
	in.mu.Lock()
	defer in.mu.Unlock()
	if r.Mode == InputURL && r.Outcome == InputUnanswered && in.done[r.Link] {
		r.Outcome = InputCompleted
	}
	if len(in.seen) < MaxInputRequests {
		in.seen = append(in.seen, r)
	}
	return r
}

// complete marks links as finished by a person.
func (in *inputs) complete(links []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done == nil {
		in.done = map[string]bool{}
	}
	for _, l := range links {
		in.done[l] = true
	}
}

// urlRequired records the URL-mode requests of an upstream's
// URLElicitationRequired error (-32042, MCP 2025-11-25): the same requests
// as an elicitation, sent as a refusal to run the call until a person has
// opened them. The error stays the call's failure; a caller that has a
// person finish the links calls again. Data that is not the error's shape
// records a refused request.
func (in *inputs) urlRequired(data json.RawMessage) {
	var d struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(data, &d); err != nil || len(d.Elicitations) == 0 {
		in.judge(&mcp.ElicitParams{Mode: "unknown"})
		return
	}
	for _, p := range d.Elicitations[:min(len(d.Elicitations), MaxInputRequests)] {
		if p == nil || p.Mode != InputURL {
			// The error carries URL-mode requests only.
			p = &mcp.ElicitParams{Mode: "unknown"}
		}
		in.judge(p)
	}
}

// judgeInput classifies an upstream's elicitation. Unknown or unparsable
// is refused.
func judgeInput(p *mcp.ElicitParams) InputRequest {
	if p == nil {
		return InputRequest{Mode: InputForm, Outcome: InputRefused}
	}
	switch p.Mode {
	case InputURL:
		link, full, ok := linkOf(p.URL)
		if !ok {
			return InputRequest{Mode: InputURL, Outcome: InputRefused}
		}
		return InputRequest{Mode: InputURL, Link: link, URL: full, Outcome: InputUnanswered}
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

// linkOf is raw as a ledger may keep it (link: an absolute http or https
// URL with a host, without user info, query or fragment) and as a person
// may be shown it (full: the same with the query). Any other scheme
// (javascript:, data:, file:, a custom one that opens an application), or
// a URL over MaxLinkBytes, is refused.
func linkOf(raw string) (link, full string, ok bool) {
	if len(raw) > MaxLinkBytes {
		return "", "", false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return "", "", false
	}
	clean := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	shown := clean
	shown.RawQuery = u.RawQuery
	return clean.String(), shown.String(), true
}

// MaxLinkBytes bounds an upstream's link.
const MaxLinkBytes = 2048

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
