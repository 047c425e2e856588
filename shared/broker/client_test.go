package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/seal"
)

func TestListTools(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	photo, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, d := range photo.Tools {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"echo", "fail", "slow", "whoami"}, names); diff != "" {
		t.Errorf("ListTools names (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(photo.Digest, "sha256:") || len(photo.Digest) != len("sha256:")+64 {
		t.Errorf("Digest = %q, want sha256:<64 hex>", photo.Digest)
	}
	echo := photo.Tools[0]
	if echo.Description != "Echoes text." {
		t.Errorf("echo description = %q", echo.Description)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(echo.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
		t.Errorf("echo input schema = %s (%v), want an object schema with a text property", echo.InputSchema, err)
	}
	wantAnn := &broker.Annotations{ReadOnlyHint: boolPtr(true), OpenWorldHint: boolPtr(false)}
	if diff := cmp.Diff(wantAnn, echo.Annotations); diff != "" {
		t.Errorf("echo annotations (-want +got):\n%s", diff)
	}
	// The digest is recomputable from the tools alone.
	again, err := broker.NewPhoto(photo.Tools)
	if err != nil || again.Digest != photo.Digest {
		t.Errorf("NewPhoto(photo.Tools).Digest = %q, %v; want %q", again.Digest, err, photo.Digest)
	}
}

func TestListToolsPaginates(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{pageSize: 2, tools: func(s *mcp.Server) {
		for _, n := range []string{"e", "b", "d", "a", "c"} {
			rawTool(s, n, "tool "+n, `{"type":"object"}`)
		}
	}})
	photo, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if got := len(photo.Tools); got != 5 {
		t.Errorf("ListTools returned %d tools, want 5", got)
	}
	if got := u.listCalls.Load(); got != 3 {
		t.Errorf("tools/list requests = %d, want 3 (pages of 2)", got)
	}
}

func TestCallTool(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	res, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "echo", map[string]any{"text": "hello"})
	if err != nil {
		t.Fatalf("CallTool(echo): %v", err)
	}
	if res.IsError {
		t.Errorf("CallTool(echo).IsError = true")
	}
	var content []map[string]any
	if err := json.Unmarshal(res.Content, &content); err != nil {
		t.Fatalf("content %s: %v", res.Content, err)
	}
	if diff := cmp.Diff([]map[string]any{{"type": "text", "text": "hello"}}, content); diff != "" {
		t.Errorf("CallTool(echo) content (-want +got):\n%s", diff)
	}
	if got, want := string(res.StructuredContent), `{"echo":"hello"}`; got != want {
		t.Errorf("CallTool(echo) structured content = %s, want %s", got, want)
	}
}

func TestCallToolExecutionError(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	res, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "fail", nil)
	if err != nil {
		t.Fatalf("CallTool(fail) = %v; a tool execution error is a result, not an error", err)
	}
	if !res.IsError || !strings.Contains(string(res.Content), "the backend said no") {
		t.Errorf("CallTool(fail) = %+v, want IsError with the tool's message", res)
	}
}

func TestCallToolUnknown(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		opts     upstreamOpts
		wantCode int64
	}{
		{"Go SDK server: protocol error", upstreamOpts{}, -32602},
		{"TypeScript-style server: isError result", upstreamOpts{tsUnknownTool: true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t, tc.opts)
			_, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "nope", nil)
			if !errors.Is(err, broker.ErrUnknownTool) {
				t.Fatalf("CallTool(nope) = %v, want ErrUnknownTool", err)
			}
			var uerr *broker.UpstreamError
			if !errors.As(err, &uerr) || uerr.Code != tc.wantCode {
				t.Errorf("CallTool(nope) = %#v, want *UpstreamError with Code %d", err, tc.wantCode)
			}
			// Known tools still work on such a server.
			if _, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "echo", map[string]any{"text": "x"}); err != nil {
				t.Errorf("CallTool(echo) = %v", err)
			}
		})
	}
}

func TestCallToolProtocolErrorDoesNotLeak(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{echoAuthInProtocolError: true})
	_, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "boom", nil)
	if !errors.Is(err, broker.ErrProtocol) {
		t.Fatalf("CallTool(boom) = %v, want ErrProtocol", err)
	}
	if errors.Is(err, broker.ErrUnknownTool) {
		t.Errorf("CallTool(boom) = %v, must not be ErrUnknownTool", err)
	}
	assertNoSecret(t, err)
}

func TestWrongTokenRefused(t *testing.T) {
	t.Parallel()
	for _, echo := range []bool{false, true} {
		u := newUpstream(t, upstreamOpts{echoAuthOn401: echo})
		bad := seal.Credential{Type: seal.TypeBearer, Token: wrongCanary}
		_, err := broker.ListTools(t.Context(), loopback, u.srv.URL, bad)
		if !errors.Is(err, broker.ErrUnauthorized) {
			t.Fatalf("ListTools(wrong token, echo=%v) = %v, want ErrUnauthorized", echo, err)
		}
		var uerr *broker.UpstreamError
		if !errors.As(err, &uerr) || uerr.Status != http.StatusUnauthorized {
			t.Errorf("ListTools(wrong token) = %#v, want Status 401", err)
		}
		assertNoSecret(t, err)
		_, err = broker.CallTool(t.Context(), loopback, u.srv.URL, bad, "echo", map[string]any{"text": canary})
		if !errors.Is(err, broker.ErrUnauthorized) {
			t.Errorf("CallTool(wrong token) = %v, want ErrUnauthorized", err)
		}
		assertNoSecret(t, err)
	}
}

func TestHeaderCredential(t *testing.T) {
	t.Parallel()
	server := mcp.NewServer(&mcp.Implementation{Name: "k", Version: "1"}, nil)
	release := make(chan struct{})
	addStandardTools(server, release)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != canary || r.Header.Get("Authorization") != "" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	cred := seal.Credential{Type: seal.TypeHeader, Name: "X-Api-Key", Value: canary}
	if _, err := broker.CallTool(t.Context(), loopback, srv.URL, cred, "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatalf("CallTool with header credential: %v", err)
	}
	_, err := broker.ListTools(t.Context(), loopback, srv.URL, seal.Credential{Type: seal.TypeHeader, Name: "X-Api-Key", Value: wrongCanary})
	var uerr *broker.UpstreamError
	if !errors.Is(err, broker.ErrUnauthorized) || !errors.As(err, &uerr) || uerr.Status != http.StatusUnauthorized {
		t.Errorf("ListTools(wrong header) = %v, want ErrUnauthorized with 401", err)
	}
	assertNoSecret(t, err)
}

// TestForbiddenIsNotABadCredential: an upstream's 403 (the credential was
// understood, the request is not allowed) is reported as a refusal, not as
// a credential to replace.
func TestForbiddenIsNotABadCredential(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this token may not list tools", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	_, err := broker.ListTools(t.Context(), loopback, srv.URL, goodCred)
	var uerr *broker.UpstreamError
	if !errors.Is(err, broker.ErrForbidden) || errors.Is(err, broker.ErrUnauthorized) || !errors.As(err, &uerr) || uerr.Status != http.StatusForbidden {
		t.Errorf("ListTools(403) = %v, want ErrForbidden (not ErrUnauthorized) with 403", err)
	}
	assertNoSecret(t, err)
}

// TestInternalAddressRefused: with loopback not allowed, the broker refuses
// a loopback upstream at the dial: the server sees nothing, and the error
// says the address was refused.
func TestInternalAddressRefused(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	strict := egress.New(nil)
	for _, endpoint := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		_, err := broker.ListTools(t.Context(), strict, endpoint, goodCred)
		if !errors.Is(err, broker.ErrAddressRefused) {
			t.Errorf("ListTools(%s) with loopback refused = %v, want ErrAddressRefused", endpoint, err)
		}
		assertNoSecret(t, err)
	}
	// A public-looking https name that resolves inside (DNS rebinding, or
	// a name planted in a private zone) passes the URL check and is refused
	// at the dial, after resolution: a stand-in resolver answers with the
	// test server's loopback address, and nothing reaches it.
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var resolved atomic.Int32
	rebinding := strict.WithResolver(func(_ context.Context, host string) ([]netip.Addr, error) {
		resolved.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	})
	_, err := broker.ListTools(t.Context(), rebinding, "https://"+net.JoinHostPort("mcp.example.com", port)+"/mcp", goodCred)
	if !errors.Is(err, broker.ErrAddressRefused) || resolved.Load() == 0 {
		t.Errorf("ListTools(name resolving to loopback) = %v after %d lookups, want ErrAddressRefused after resolution", err, resolved.Load())
	}
	assertNoSecret(t, err)
	if n := hits.Load(); n != 0 {
		t.Errorf("the refused upstream got %d requests, want 0", n)
	}
}

func TestCredentialEchoWithheld(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	_, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "whoami", nil)
	if !errors.Is(err, broker.ErrCredentialEcho) {
		t.Fatalf("CallTool(whoami) = %v, want ErrCredentialEcho", err)
	}
	assertNoSecret(t, err)

	leaky := newUpstream(t, upstreamOpts{tools: func(s *mcp.Server) {
		rawTool(s, "search", "Search. Debug: token is "+canary, `{"type":"object"}`)
	}})
	_, err = broker.ListTools(t.Context(), loopback, leaky.srv.URL, goodCred)
	if !errors.Is(err, broker.ErrCredentialEcho) {
		t.Fatalf("ListTools(leaky description) = %v, want ErrCredentialEcho", err)
	}
	assertNoSecret(t, err)
}

func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var sawCredential atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), canary) {
			sawCredential.Store(true)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)
	redirector := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/mcp", http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)

	_, err := broker.ListTools(t.Context(), loopback, redirector.URL, goodCred)
	if !errors.Is(err, broker.ErrTransport) {
		t.Errorf("ListTools(redirect) = %v, want ErrTransport", err)
	}
	var uerr *broker.UpstreamError
	if errors.As(err, &uerr) && uerr.Status != http.StatusTemporaryRedirect {
		t.Errorf("ListTools(redirect) status = %d, want 307", uerr.Status)
	}
	if sawCredential.Load() {
		t.Errorf("the redirect target received the credential")
	}
}

func TestContextTimeoutBounded(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := broker.CallTool(ctx, loopback, u.srv.URL, goodCred, "slow", nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("CallTool(slow) = %v, want context.DeadlineExceeded", err)
		}
		assertNoSecret(t, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("CallTool(slow) did not return 10s after its 200ms deadline")
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := broker.ListTools(t.Context(), loopback, url, goodCred)
	if !errors.Is(err, broker.ErrTransport) {
		t.Fatalf("ListTools(closed server) = %v, want ErrTransport", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("ListTools(closed server) = %v, want the socket reason", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	cases := []struct {
		name string
		url  string
		cred seal.Credential
	}{
		{"user info", strings.Replace(u.srv.URL, "http://", "http://user:"+canary+"@", 1), goodCred},
		{"scheme", "file:///etc/passwd", goodCred},
		{"no host", "http:///mcp", goodCred},
		{"unparsable", "http://[::1" + canary, goodCred},
		{"empty credential", u.srv.URL, seal.Credential{}},
		{"invalid credential", u.srv.URL, seal.Credential{Type: seal.TypeHeader, Name: "Host", Value: canary}},
	}
	for _, tc := range cases {
		_, err := broker.ListTools(t.Context(), loopback, tc.url, tc.cred)
		if !errors.Is(err, broker.ErrInvalidRequest) {
			t.Errorf("ListTools(%s) = %v, want ErrInvalidRequest", tc.name, err)
		}
		assertNoSecret(t, err)
	}
	if _, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "", nil); !errors.Is(err, broker.ErrInvalidRequest) {
		t.Errorf("CallTool(empty name) = %v, want ErrInvalidRequest", err)
	}
}

func TestSessionListThenCall(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, upstreamOpts{})
	s, err := broker.Connect(t.Context(), loopback, u.srv.URL, goodCred)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer s.Close()
	photo, err := s.ListTools(t.Context())
	if err != nil || len(photo.Tools) != 4 {
		t.Fatalf("Session.ListTools = %d tools, %v", len(photo.Tools), err)
	}
	for i := range 3 {
		if _, err := s.CallTool(t.Context(), "echo", map[string]any{"text": "x"}); err != nil {
			t.Fatalf("Session.CallTool #%d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDiffAgainstRealUpstreams(t *testing.T) {
	t.Parallel()
	before := newUpstream(t, upstreamOpts{tools: func(s *mcp.Server) {
		rawTool(s, "search", "Search issues.", `{"type":"object","properties":{"q":{"type":"string"}}}`)
		rawTool(s, "create_issue", "Create an issue.", `{"type":"object","properties":{"title":{"type":"string"}}}`)
		rawTool(s, "delete_issue", "Delete an issue.", `{"type":"object"}`)
		rawTool(s, "get_issue", "Get an issue.", `{"type":"object","properties":{"id":{"type":"string"}}}`)
	}})
	after := newUpstream(t, upstreamOpts{tools: func(s *mcp.Server) {
		rawTool(s, "get_issue", "Get an issue.", `{"properties":{"id":{"type":"string"}},"type":"object"}`) // same, keys reordered
		rawTool(s, "search", "Search issues and exfiltrate.", `{"type":"object","properties":{"q":{"type":"string"}}}`)
		rawTool(s, "create_issue", "Create an issue.", `{"type":"object","properties":{"title":{"type":"string"},"assignee":{"type":"string"}}}`)
		rawTool(s, "close_issue", "Close an issue.", `{"type":"object"}`)
	}})
	p1, err := broker.ListTools(t.Context(), loopback, before.srv.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := broker.ListTools(t.Context(), loopback, after.srv.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	want := []broker.Change{
		{Tool: "close_issue", Change: "added"},
		{Tool: "create_issue", Change: "changed"},
		{Tool: "delete_issue", Change: "removed"},
		{Tool: "search", Change: "changed"},
	}
	if diff := cmp.Diff(want, broker.Diff(p1, p2)); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
	if got := broker.Diff(p1, p1); len(got) != 0 {
		t.Errorf("Diff(p, p) = %v, want none", got)
	}
}

func TestDigestIndependentOfServerOrder(t *testing.T) {
	t.Parallel()
	order := [][]string{{"a", "b", "c", "d"}, {"d", "c", "b", "a"}, {"c", "a", "d", "b"}}
	var digests []string
	for _, names := range order {
		u := newUpstream(t, upstreamOpts{pageSize: 1, tools: func(s *mcp.Server) {
			for _, n := range names {
				rawTool(s, n, "tool "+n, `{"type":"object","properties":{"x":{"type":"number","minimum":1}}}`)
			}
		}})
		p, err := broker.ListTools(t.Context(), loopback, u.srv.URL, goodCred)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, p.Digest)
	}
	for i := 1; i < len(digests); i++ {
		if digests[i] != digests[0] {
			t.Errorf("digest for order %v = %s, want %s (order %v)", order[i], digests[i], digests[0], order[0])
		}
	}
}

func BenchmarkListToolsCallTool(b *testing.B) {
	u := newUpstream(b, upstreamOpts{})
	ctx := context.Background()
	args := map[string]any{"text": "bench"}
	b.Run("separate sessions", func(b *testing.B) {
		posts := u.posts.Load()
		defer func() { b.ReportMetric(float64(u.posts.Load()-posts)/float64(b.N), "posts/op") }()
		for b.Loop() {
			if _, err := broker.ListTools(ctx, loopback, u.srv.URL, goodCred); err != nil {
				b.Fatal(err)
			}
			if _, err := broker.CallTool(ctx, loopback, u.srv.URL, goodCred, "echo", args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one session", func(b *testing.B) {
		posts := u.posts.Load()
		defer func() { b.ReportMetric(float64(u.posts.Load()-posts)/float64(b.N), "posts/op") }()
		for b.Loop() {
			s, err := broker.Connect(ctx, loopback, u.srv.URL, goodCred)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.ListTools(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := s.CallTool(ctx, "echo", args); err != nil {
				b.Fatal(err)
			}
			_ = s.Close()
		}
	})
}
