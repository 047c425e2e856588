// Package client is a small Go client of fluidbox's public HTTP API
// (docs/api.md), shared by the Claude Code hook and the CLI for humans.
//
// What it guarantees:
//   - The bearer token goes only into the Authorization header. It is never
//     part of an error, a log line or a String of any value here, so a
//     caller may print every error this package returns.
//   - Failures are typed: an answer of the API is an *APIError carrying the
//     status and the API's error code; a server that cannot be reached is an
//     *UnreachableError, which errors.Is reports as ErrUnreachable; a token
//     the server refused is an *APIError that errors.Is reports as
//     ErrBadToken.
//   - A request the server rate-limited (429: nothing was done) is sent
//     again after the Retry-After it gave, at most maxRateRetries times and
//     only while the caller's deadline allows; then the 429 is the answer,
//     an *APIError that errors.Is reports as ErrRateLimited (the hook
//     denies on it).
//   - Every request is bounded: connecting, the TLS handshake and waiting
//     for response headers have timeouts, and each call has a deadline of
//     its own (long polls: the wait plus a margin). Streams are watched for
//     silence instead, since the server sends keep-alives.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Timeouts of one request.
const (
	dialTimeout = 5 * time.Second
	// requestTimeout bounds a request that does not wait on the server.
	requestTimeout = 30 * time.Second
	// pollMargin is added to a long poll's wait for the request's deadline.
	pollMargin = 15 * time.Second
	// MaxWait is the longest wait the API accepts on one request.
	MaxWait = 25 * time.Second
	// maxResponse bounds a JSON response body read into memory.
	maxResponse = 8 << 20
	// maxRateRetries is how many times a rate-limited request is sent
	// again; maxRetryAfter the longest Retry-After waited for (a longer one
	// is answered at once).
	maxRateRetries = 2
	maxRetryAfter  = 60 * time.Second
)

// Client calls one fluidbox control plane with one bearer token.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	// traceparent, when set, goes with every request, so the control
	// plane's spans join the caller's trace.
	traceparent string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (its Timeout should be zero: each
// call sets its own deadline, and streams run for as long as they are read).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// traceparentRE is a W3C traceparent of version 00, the only one defined.
var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// WithTraceparent sends tp (W3C trace context, as the TRACEPARENT
// environment variable carries it) with every request. Anything that is
// not a well-formed traceparent is dropped, not sent.
func WithTraceparent(tp string) Option {
	return func(c *Client) {
		if traceparentRE.MatchString(tp) {
			c.traceparent = tp
		}
	}
}

// New returns a client of the API at baseURL (for example
// http://127.0.0.1:8080, or an API Gateway stage URL) that presents token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q must be an http:// or https:// URL", baseURL)
	}
	if u.User != nil {
		return nil, errors.New("client: base URL must not carry credentials; pass the token instead")
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, token: token, hc: &http.Client{Transport: newTransport()}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: MaxWait + pollMargin,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
	}
}

// BaseURL returns the API's base URL as the client uses it.
func (c *Client) BaseURL() string { return c.base.String() }

// String describes the client without its token.
func (c *Client) String() string { return "fluidbox client for " + c.base.String() }

// ErrUnreachable is reported by errors.Is for an *UnreachableError.
var ErrUnreachable = errors.New("fluidbox is unreachable")

// ErrRateLimited is reported by errors.Is for a 429 *APIError: the run
// made too many requests this minute, and retrying did not get through.
var ErrRateLimited = errors.New("the server rate-limited this run")

// ErrBadToken is reported by errors.Is for a 401 *APIError: the server did
// not accept the token (wrong, expired, or for another run).
var ErrBadToken = errors.New("the server refused the token")

// UnreachableError is a request that got no HTTP answer: connection
// refused, name not resolved, timed out, or cut off before a response.
type UnreachableError struct {
	URL string // the base URL, never with a token
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach fluidbox at %s (is it running? `make run` starts one on 127.0.0.1:8080): %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// APIError is an error answer of the API: {"error":{"code","message"}}.
type APIError struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the server's Retry-After (429, 503), 0 if none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Status == http.StatusUnauthorized {
		return fmt.Sprintf("the server refused the token (%d %s): %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrBadToken) true for a 401, and
// errors.Is(err, ErrRateLimited) for a 429.
func (e *APIError) Is(target error) bool {
	return (target == ErrBadToken && e.Status == http.StatusUnauthorized) ||
		(target == ErrRateLimited && e.Status == http.StatusTooManyRequests)
}

// transient reports whether err may go away by asking again: the server
// was unreachable or said it could not decide right now.
func transient(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusBadGateway || ae.Status == http.StatusGatewayTimeout
	}
	return errors.Is(err, ErrUnreachable)
}

// endpoint joins the base URL and an API path with its query.
func (c *Client) endpoint(path string, q url.Values) string {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(path, q), r)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.traceparent != "" {
		req.Header.Set("Traceparent", c.traceparent)
	}
	return req, nil
}

// send does a request and returns the response if its status is 2xx.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) && !errors.Is(ctxErr, context.DeadlineExceeded) {
			return nil, ctxErr // the caller gave up: not the server's fault
		}
		return nil, &UnreachableError{URL: c.base.String(), Err: stripURL(err)}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// stripURL drops the *url.Error wrapper, whose text repeats the URL; the
// UnreachableError names the base URL once.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &APIError{Status: resp.StatusCode}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 {
		e.RetryAfter = time.Duration(n) * time.Second
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		return e
	}
	// Not the API's shape: a proxy, a gateway, or not fluidbox at all.
	e.Code = strings.ReplaceAll(strings.ToLower(http.StatusText(resp.StatusCode)), " ", "_")
	if e.Code == "" {
		e.Code = "http_error"
	}
	e.Message = fmt.Sprintf("the server at this URL answered %s without fluidbox's error body; is FLUIDBOX_URL right?", resp.Status)
	return e
}

// Do sends a JSON request to an API path (such as "/v1/policies") and
// decodes a 2xx JSON answer into out, which may be nil. It is for the calls
// this package has no method for.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.do(ctx, method, path, nil, in, out, requestTimeout)
}

// Get is Do for a GET with query parameters (a listing's filters and
// cursor).
func (c *Client) Get(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, "GET", path, q, nil, out, requestTimeout)
}

// do is once, sent again while the server rate-limits it: a 429 means
// nothing was done, so sending the same request again is safe.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any, timeout time.Duration) error {
	for try := 0; ; try++ {
		err := c.once(ctx, method, path, q, in, out, timeout)
		var ae *APIError
		if try == maxRateRetries || !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			return err
		}
		wait := max(ae.RetryAfter, time.Second)
		if dl, ok := ctx.Deadline(); wait > maxRetryAfter || (ok && time.Until(dl) < wait) {
			return err
		}
		if !sleep(ctx, wait) {
			return err
		}
	}
}

func (c *Client) once(ctx context.Context, method, path string, q url.Values, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := c.newRequest(ctx, method, path, q, in)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return &UnreachableError{URL: c.base.String(), Err: fmt.Errorf("reading the answer to %s %s: %w", method, path, err)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("client: %s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// pathID escapes an id for a path segment.
func pathID(id string) string { return url.PathEscape(id) }
