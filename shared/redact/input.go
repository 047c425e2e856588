package redact

import (
	"encoding/json"
	"net/url"
)

// InputRequested records that a brokered call waits for a person to open
// a link an upstream asked them to open. Server is the connection's name
// as fluidbox knows it; Link keeps only a scheme, host and path (encoded
// empty otherwise, see Elicitation), never the query, fragment or user
// info, which carry the upstream's state or a token.
type InputRequested struct {
	InputRequestID string `json:"input_request_id"`
	ToolCallID     string `json:"tool_call_id"`
	ToolName       string `json:"tool_name"`
	ConnectionID   string `json:"connection_id"`
	Server         string `json:"server"`
	Mode           string `json:"mode"`
	Link           string `json:"link"`
	ExpiresAt      string `json:"expires_at"`
}

func (InputRequested) eventType() Type { return TypeInputRequested }

// MarshalJSON encodes r with its link only when it is a plain link.
func (r InputRequested) MarshalJSON() ([]byte, error) {
	type plain InputRequested
	r.Link = plainLink(r.Link)
	return json.Marshal(plain(r))
}

// InputSettled records how an input request was settled: completed or
// declined by a person, or expired.
type InputSettled struct {
	InputRequestID string `json:"input_request_id"`
	ToolCallID     string `json:"tool_call_id"`
	Status         string `json:"status"`
	DecidedBy      string `json:"decided_by"`
}

func (InputSettled) eventType() Type { return TypeInputSettled }

// plainLink is link when it is an http or https URL with nothing but a
// scheme, host and path, and "" otherwise.
func plainLink(link string) string {
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return ""
	}
	return link
}
