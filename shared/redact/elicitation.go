package redact

import "encoding/json"

// Elicitation is one request for input an upstream made mid-call: its
// mode ("url" or "form"), for a link only its scheme, host and path (never
// the query, fragment or user info, which carry the server's state or a
// token; the broker strips them, and a link that still has them, or is not
// an http or https URL, is encoded empty), and the outcome ("refused" or
// "unanswered").
type Elicitation struct {
	Mode    string `json:"mode"`
	Link    string `json:"link,omitempty"`
	Outcome string `json:"outcome"`
}

// MarshalJSON encodes r with its link only when the link is an http or https
// URL with nothing but a scheme, host and path: dropping a bad link keeps
// the event (a tool ran) while keeping a query out of the ledger.
func (r Elicitation) MarshalJSON() ([]byte, error) {
	type plain Elicitation
	r.Link = plainLink(r.Link)
	return json.Marshal(plain(r))
}
