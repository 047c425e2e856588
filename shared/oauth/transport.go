package oauth

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/egress"
)

// DefaultTimeout bounds each request to the provider when the caller's
// client has no timeout of its own.
const DefaultTimeout = 10 * time.Second

// NewClient is the HTTP client for talking to providers: it never follows
// a redirect (a token request redirected elsewhere would carry the code,
// the verifier or the client secret with it) and times out. base is the
// transport; the deployment's dial guard goes there. nil is a transport
// that dials through a guard refusing every internal address and uses no
// proxy from the environment (a proxy would be the only address a guard
// saw): the probe and the token requests go wherever the upstream's
// metadata says, so no default may reach inside.
func NewClient(base http.RoundTripper) *http.Client {
	if base == nil {
		base = defaultTransport
	}
	return &http.Client{Transport: base, Timeout: DefaultTimeout, CheckRedirect: refuseRedirect}
}

// defaultTransport is what a nil transport or client talks through.
var defaultTransport = &http.Transport{
	DialContext:         egress.New(nil).DialContext,
	TLSHandshakeTimeout: 10 * time.Second,
	IdleConnTimeout:     90 * time.Second,
	ForceAttemptHTTP2:   true,
}

func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// noRedirects is hc (or a new client) with redirects refused.
func noRedirects(hc *http.Client) *http.Client {
	if hc == nil {
		return NewClient(nil)
	}
	c := *hc
	c.Transport = transportOf(hc)
	c.CheckRedirect = refuseRedirect
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return &c
}

func transportOf(hc *http.Client) http.RoundTripper {
	if hc == nil || hc.Transport == nil {
		return defaultTransport
	}
	return hc.Transport
}

func readLimited(r io.Reader, n int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, n))
}

// maxTokenForm bounds the token request body the transport rewrites.
const maxTokenForm = 64 << 10

// resourceTransport adds resource=<resource> to the form posts it carries
// that lack it: oauth2's refresh takes no extra parameters. It carries
// only a refresh's token request, so it does not pick that request out by
// its URL (the metadata's spelling of the endpoint, HTTPS:// say, is not
// the URL the request goes to, and a comparison would let it through
// without the resource).
type resourceTransport struct {
	base     http.RoundTripper
	resource string
}

func (t *resourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return t.base.RoundTrip(req)
	}
	b, err := readLimited(req.Body, maxTokenForm)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, err
	}
	if form.Get("resource") == "" && t.resource != "" {
		form.Set("resource", t.resource)
	}
	enc := form.Encode()
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader([]byte(enc)))
	r.ContentLength = int64(len(enc))
	r.Header.Set("Content-Length", strconv.Itoa(len(enc)))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(enc))), nil }
	return t.base.RoundTrip(r)
}
