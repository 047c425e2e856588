package client

import (
	"context"
	"net/http"
)

// Authorization is the answer of POST /v1/connections/{id}/authorize: the
// URL the member opens in a browser, and until when it can be completed.
type Authorization struct {
	URL       string `json:"authorization_url"`
	ExpiresAt string `json:"expires_at"`
}

// AuthorizeConnection starts the OAuth authorization of a connection (by id
// or name).
func (c *Client) AuthorizeConnection(ctx context.Context, id string) (Authorization, error) {
	var a Authorization
	err := c.do(ctx, http.MethodPost, "/v1/connections/"+pathID(id)+"/authorize", nil, nil, &a, requestTimeout)
	return a, err
}
