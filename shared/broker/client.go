package broker

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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// Limits on what an upstream may send. Past them the exchange fails with
// ErrInvalidResponse rather than buffering without bound.
const (
	// DefaultHTTPTimeout bounds each HTTP request to the upstream, including reading its
	// body (a tool call's result stream). The caller's ctx is the real budget; this is the
	// backstop for a ctx without a deadline.
	DefaultHTTPTimeout = 2 * time.Minute
	// MaxResponseBytes bounds one HTTP response body.
	MaxResponseBytes = 8 << 20
	// MaxToolListBytes bounds the response bodies of one tools/list, all
	// pages together.
	MaxToolListBytes = 16 << 20
	// MaxTools bounds a photographed tool list, and maxPages the tools/list pages read.
	MaxTools = 1000
	maxPages = 100
)

// clientInfo is how fluidbox introduces itself to upstreams.
var clientInfo = &mcp.Implementation{Name: "fluidbox-broker", Version: "1"}

// transports pools connections across calls, one transport per guard. The credential is
// added per request by authTransport, so pooling never mixes credentials into a
// connection's state. No proxy: the guard must judge the upstream's own address, and a
// proxy would be the only address it saw.
var transports sync.Map // *egress.Guard -> *http.Transport

func transportFor(g *egress.Guard) http.RoundTripper {
	if t, ok := transports.Load(g); ok {
		return t.(*http.Transport)
	}
	t := &http.Transport{
		DialContext:           g.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	actual, _ := transports.LoadOrStore(g, t)
	return actual.(*http.Transport)
}

// Session is one MCP session with an upstream, for a caller that lists and then calls
// within one handshake (check the tool is still offered as frozen, then call it). It is
// meant for sequential use; Close it when done.
type Session struct {
	cs     *mcp.ClientSession
	rec    *recorder
	in     *inputs
	cred   seal.Credential
	closed atomic.Bool
	listed atomic.Bool
	// tasks is the upstream's form of tasks for tools/call, nil when it
	// declares none (task.go); support is each tool's taskSupport as its
	// last tools/list said.
	tasks   taskForm
	support map[string]TaskSupport
	// deferTasks and pending: resume.go.
	deferTasks bool
	pending    TaskHandle
}

// Connect opens a session with the upstream at endpoint, presenting cred. The URL is
// judged by g first (https, http only to allowed loopback: a connection stored before the
// rule is held to it too), and every dial goes through g, which refuses internal addresses
// after resolution and again on the socket. A nil g refuses every internal address.
func Connect(ctx context.Context, g *egress.Guard, endpoint string, cred seal.Credential) (*Session, error) {
	u, err := checkEndpoint(endpoint)
	if err != nil {
		return nil, &UpstreamError{Op: "connect", Msg: err.Error(), Err: ErrInvalidRequest}
	}
	if err := g.CheckURL(u); err != nil {
		return nil, &UpstreamError{Op: "connect", Msg: addressRefused, Err: ErrAddressRefused}
	}
	if err := cred.Validate(); err != nil {
		// seal's validation errors never contain the secret.
		return nil, &UpstreamError{Op: "connect", Msg: "invalid credential: " + err.Error(), Err: ErrInvalidRequest}
	}
	rec := &recorder{}
	httpClient := &http.Client{
		Transport: &authTransport{base: transportFor(g), cred: cred, rec: rec},
		Timeout:   DefaultHTTPTimeout,
		// Never follow a redirect: authTransport would present the credential to
		// wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: httpClient,
		// Request/response only: no standalone SSE stream, and no silent reconnects; the
		// caller decides about retries.
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	in := &inputs{}
	client := mcp.NewClient(clientInfo, &mcp.ClientOptions{
		// Elicitation of both modes is declared so that an upstream that
		// needs input asks for it (and is answered, see inputs) instead of
		// failing the call on a client that cannot take it. Nothing else is
		// declared: no roots, no sampling (the broker lends the upstream
		// neither the sandbox's files nor its model budget).
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{},
		}},
		ElicitationHandler: in.handle,
	})
	if err := registerTasks(client); err != nil {
		return nil, &UpstreamError{Op: "connect", Msg: "task methods not registered", Err: ErrInvalidRequest}
	}
	var cs *mcp.ClientSession
	handshake, err := tapDuring(rec, func() error {
		var err error
		cs, err = client.Connect(ctx, transport, nil)
		return err
	})
	if err != nil {
		return nil, classify(ctx, "connect", err, rec)
	}
	s := &Session{cs: cs, rec: rec, in: in, cred: cred}
	if !s.stateless() {
		// The 2025-11-25 form; 2026-07-28's tasks extension is not spoken.
		for _, r := range handshake {
			if (experimentalTasks{}).capable(r) {
				s.tasks = experimentalTasks{}
			}
		}
	}
	return s, nil
}

// stateless reports whether the session speaks 2026-07-28 or later.
func (s *Session) stateless() bool {
	res := s.cs.InitializeResult()
	return res != nil && res.ProtocolVersion >= "2026-07-28"
}

// Close ends the session (best effort: a DELETE to the upstream). After a call abandoned
// on its deadline the upstream may still be running the tool and answer the DELETE late;
// the SDK bounds that wait at 5 s.
func (s *Session) Close() error {
	if s == nil || s.cs == nil || s.closed.Swap(true) {
		return nil
	}
	if err := s.cs.Close(); err != nil {
		return &UpstreamError{Op: "close", Msg: "closing session failed", Err: ErrTransport}
	}
	return nil
}

// ListTools pages through tools/list and returns the photo. A session lists
// once (ErrInvalidRequest after): the SDK's client keeps a 2026-07-28
// session's lists for as long as the upstream's ttlMs says, so a second list
// could be the first one again, and a look meant to see a change would not.
// Connect anew to look again.
func (s *Session) ListTools(ctx context.Context) (Photo, error) {
	const op = "tools/list"
	if s.listed.Swap(true) {
		return Photo{}, &UpstreamError{Op: op, Msg: "this session listed its tools already; connect anew to look again", Err: ErrInvalidRequest}
	}
	s.rec.reset()
	// Each page is bounded by MaxResponseBytes; together they share this
	// budget, or a hundred pages would be held at once.
	budget := new(atomic.Int64)
	budget.Store(MaxToolListBytes)
	s.rec.budget.Store(budget)
	defer s.rec.budget.Store(nil)
	var tools []ToolDef
	pages, err := s.tapped(func() error {
		var err error
		tools, err = s.listPages(ctx)
		return err
	})
	if err != nil {
		return Photo{}, err
	}
	s.support = supportIn(pages)
	return s.photo(tools)
}

// listPages reads every page of tools/list.
func (s *Session) listPages(ctx context.Context) ([]ToolDef, error) {
	const op = "tools/list"
	var tools []ToolDef
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, &UpstreamError{Op: op, Msg: "too many pages", Err: ErrInvalidResponse}
		}
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, classify(ctx, op, err, s.rec)
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			def, err := toolDef(t)
			if err != nil {
				return nil, &UpstreamError{Op: op, Msg: "tool definition not encodable", Err: ErrInvalidResponse}
			}
			tools = append(tools, def)
		}
		if len(tools) > MaxTools {
			return nil, &UpstreamError{Op: op, Msg: fmt.Sprintf("more than %d tools", MaxTools), Err: ErrInvalidResponse}
		}
		if res.NextCursor == "" {
			break
		}
		if seen[res.NextCursor] {
			return nil, &UpstreamError{Op: op, Msg: "pagination cursor repeats", Err: ErrInvalidResponse}
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	return tools, nil
}

// photo checks and digests the tools a tools/list gave.
func (s *Session) photo(tools []ToolDef) (Photo, error) {
	const op = "tools/list"
	photo, err := NewPhoto(tools)
	if err != nil {
		msg := "invalid tool list"
		if errors.Is(err, ErrInvalidResponse) {
			msg = strings.TrimPrefix(err.Error(), ErrInvalidResponse.Error()+": ")
		}
		return Photo{}, &UpstreamError{Op: op, Msg: msg, Err: ErrInvalidResponse}
	}
	b, err := json.Marshal(photo.Tools)
	if err != nil || containsSecret(b, s.cred) {
		return Photo{}, &UpstreamError{Op: op, Msg: "tool list withheld: it contains the credential", Err: ErrCredentialEcho}
	}
	return photo, nil
}

// CallTool calls tool name with args. A result with IsError set is a tool execution error
// and is returned as a Result, not an error, except that an upstream saying it does not
// know the tool is always ErrUnknownTool.
func (s *Session) CallTool(ctx context.Context, name string, args map[string]any) (Result, error) {
	const op = "tools/call"
	if name == "" {
		return Result{}, &UpstreamError{Op: op, Msg: "empty tool name", Err: ErrInvalidRequest}
	}
	if !s.listed.Load() && (s.stateless() || s.tasks != nil) {
		// The SDK sets a 2026-07-28 call's Mcp-Param headers (a tool's
		// x-mcp-header bindings) from the session's tool list, and the
		// upstream refuses the call without them; an upstream that offers
		// tasks says in its list which tools must run as one: list first.
		// Its failure is one before the call reached the upstream.
		if _, err := s.ListTools(ctx); err != nil {
			var ue *UpstreamError
			if errors.As(err, &ue) {
				ue.Op = "connect"
			}
			return Result{}, err
		}
	}
	s.rec.reset()
	s.in.reset()
	s.pending = TaskHandle{}
	if args == nil {
		args = map[string]any{}
	}
	var res *mcp.CallToolResult
	var err error
	switch s.TaskSupport(name) {
	case TaskRequired:
		if s.tasks == nil {
			return Result{}, &UpstreamError{Op: op, Msg: "the tool must run as a task, and the upstream offers none the broker speaks", Err: ErrInvalidRequest}
		}
		res, err = s.callAsTask(ctx, name, args)
	case taskUnknown:
		return Result{}, &UpstreamError{Op: op, Msg: "the upstream's taskSupport for the tool is not one the broker knows", Err: ErrInvalidResponse}
	default:
		res, err = s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	}
	if ue := (*UpstreamError)(nil); errors.As(err, &ue) {
		return Result{}, ue
	}
	if err != nil {
		if wire := upstreamWireError(err); wire != nil && wire.Code == mcp.CodeURLElicitationRequired {
			s.in.urlRequired(wire.Data)
		}
		uerr := classify(ctx, op, err, s.rec)
		if uerr.Err == ErrProtocol && looksLikeUnknownTool(protocolMessage(err)) {
			uerr.Msg, uerr.Err = "unknown tool (protocol error)", ErrUnknownTool
		}
		return Result{}, uerr
	}
	return checkedResult(op, res, s.cred)
}

// checkedResult is the upstream's CallToolResult as a Result, refused when
// it holds the credential or says the tool is unknown.
func checkedResult(op string, res *mcp.CallToolResult, cred seal.Credential) (Result, error) {
	if res == nil {
		return Result{}, &UpstreamError{Op: op, Msg: "empty result", Err: ErrInvalidResponse}
	}
	content := res.Content
	if content == nil {
		content = []mcp.Content{}
	}
	out := Result{IsError: res.IsError}
	var err error
	if out.Content, err = json.Marshal(content); err != nil {
		return Result{}, &UpstreamError{Op: op, Msg: "result content not encodable", Err: ErrInvalidResponse}
	}
	if res.StructuredContent != nil {
		if out.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
			return Result{}, &UpstreamError{Op: op, Msg: "structured content not encodable", Err: ErrInvalidResponse}
		}
	}
	if containsSecret(out.Content, cred) || containsSecret(out.StructuredContent, cred) {
		return Result{}, &UpstreamError{Op: op, Msg: "result withheld: it contains the credential", Err: ErrCredentialEcho}
	}
	if res.IsError && resultSaysUnknownTool(res) {
		return Result{}, &UpstreamError{Op: op, Msg: "unknown tool (tool error result)", Err: ErrUnknownTool}
	}
	return out, nil
}

// Result is an MCP CallToolResult, its pieces kept as JSON.
type Result struct {
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// Completed tells the session that a person has opened and finished these
// links (InputRequest.Link) for the call it is about to make: an upstream
// that asks for one of them again is answered accept (InputCompleted),
// as MCP's URL mode expects once the person went through with it.
func (s *Session) Completed(links ...string) { s.in.complete(links) }

// InputRequests are the requests for input the upstream made during the
// session's last CallTool, as the broker judged and answered them, whether
// the call succeeded or failed (an upstream that asks until the SDK gives
// up is recorded too). They are for the ledger and the run's humans, never
// for the sandbox.
func (s *Session) InputRequests() []InputRequest {
	if s == nil || s.in == nil {
		return nil
	}
	out := s.in.taken()
	for i, r := range out {
		// An upstream could put the credential it was sent in a link for
		// a person to open: that link is not shown.
		if containsSecret([]byte(r.URL), s.cred) {
			out[i].URL = ""
		}
	}
	return out
}

// ListTools connects to the upstream at endpoint, photographs its tools, and closes.
func ListTools(ctx context.Context, g *egress.Guard, endpoint string, cred seal.Credential) (Photo, error) {
	s, err := Connect(ctx, g, endpoint, cred)
	if err != nil {
		return Photo{}, err
	}
	defer s.closeWithin(ctx)
	return s.ListTools(ctx)
}

// CallTool connects to the upstream at endpoint, calls one tool, and closes.
func CallTool(ctx context.Context, g *egress.Guard, endpoint string, cred seal.Credential, name string, args map[string]any) (Result, error) {
	s, err := Connect(ctx, g, endpoint, cred)
	if err != nil {
		return Result{}, err
	}
	defer s.closeWithin(ctx)
	return s.CallTool(ctx, name, args)
}

// closeWithin closes the session without holding the caller past ctx. After an abandoned
// call the upstream may still be running the tool, and the SDK's session DELETE then waits
// up to its own 5 s bound; that wait happens in the background.
func (s *Session) closeWithin(ctx context.Context) {
	if ctx.Err() != nil {
		go func() { _ = s.Close() }()
		return
	}
	_ = s.Close()
}

// checkEndpoint accepts absolute http(s) URLs without user info. Its errors do not quote
// the URL, which may carry a token in its query.
func checkEndpoint(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, errors.New("endpoint is not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("endpoint scheme must be http or https")
	}
	if u.Host == "" {
		return nil, errors.New("endpoint has no host")
	}
	if u.User != nil {
		return nil, errors.New("endpoint must not carry user info; use the connection credential")
	}
	return u, nil
}

// addressRefused is the message of ErrAddressRefused; egress's own words (the kind of
// range) are not needed by a member and stay out of the error.
const addressRefused = "the URL is not https or reaches an address the broker may not (loopback, link-local, private, unique-local or special-purpose); nothing was sent to it"

func toolDef(t *mcp.Tool) (ToolDef, error) {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return ToolDef{}, err
	}
	def := ToolDef{Name: t.Name, Description: t.Description, InputSchema: schema}
	if t.OutputSchema != nil {
		if def.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return ToolDef{}, err
		}
	}
	if a := t.Annotations; a != nil {
		ann := Annotations{DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint, Title: a.Title}
		// The SDK decodes readOnlyHint and idempotentHint as plain bools, so absent and
		// false look alike; only a positive claim is kept.
		if a.ReadOnlyHint {
			ann.ReadOnlyHint = &a.ReadOnlyHint
		}
		if a.IdempotentHint {
			ann.IdempotentHint = &a.IdempotentHint
		}
		def.Annotations = &ann
	}
	return def, nil
}

// classify turns an SDK error into an UpstreamError without keeping any of its text.
func classify(ctx context.Context, op string, err error, rec *recorder) *UpstreamError {
	status := rec.lastStatus()
	ch := rec.challenge.Load()
	switch {
	case status == http.StatusUnauthorized:
		e := &UpstreamError{Op: op, Status: status, Msg: "credential refused", Err: ErrUnauthorized}
		if ch != nil {
			e.Scopes = ch.scopes
		}
		return e
	case status == http.StatusForbidden && ch != nil && ch.insufficientScope:
		return &UpstreamError{Op: op, Status: status, Msg: "the upstream asks for scopes the credential lacks (insufficient_scope)", Err: ErrInsufficientScope, Scopes: ch.scopes}
	case status == http.StatusForbidden:
		// A 403 says who the caller is was understood and the request is not allowed:
		// not a bad credential, and replacing it is not the obvious fix.
		return &UpstreamError{Op: op, Status: status, Msg: "request refused by the upstream (the credential was not rejected as invalid)", Err: ErrForbidden}
	case errors.Is(err, egress.ErrRefused):
		return &UpstreamError{Op: op, Msg: addressRefused, Err: ErrAddressRefused}
	case rec.tooLarge.Load():
		return &UpstreamError{Op: op, Msg: "response too large", Err: ErrInvalidResponse}
	case ctx.Err() != nil:
		msg := "canceled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg = "deadline exceeded"
		}
		return &UpstreamError{Op: op, Status: status, Msg: msg, Err: ctx.Err()}
	}
	if wire := upstreamWireError(err); wire != nil {
		return &UpstreamError{Op: op, Status: status, Code: wire.Code, Msg: "upstream returned an error", Err: ErrProtocol}
	}
	if status != 0 {
		return &UpstreamError{Op: op, Status: status, Msg: "HTTP error", Err: ErrTransport}
	}
	msg := "request failed"
	var nerr *net.OpError
	var terr interface{ Timeout() bool }
	switch {
	case errors.As(err, &nerr) && nerr.Err != nil:
		// The socket-level reason ("connect: connection refused"); it carries no request
		// data, and the address is left out with the rest of the URL.
		msg += ": " + nerr.Op + ": " + socketReason(nerr.Err)
	case errors.As(err, &terr) && terr.Timeout():
		msg += ": timeout"
	}
	return &UpstreamError{Op: op, Msg: msg, Err: ErrTransport}
}

// socketReason keeps the last segment of a socket error ("connection refused").
func socketReason(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// codeRejected is the code of the SDK's own "rejected by transport" error
// (jsonrpc2.ErrRejected, internal to the SDK), which it wraps around transport failures.
// It is not an answer from the upstream.
const codeRejected = -32005

// upstreamWireError finds the JSON-RPC error the upstream sent, if any, in err's tree.
func upstreamWireError(err error) *jsonrpc.Error {
	switch e := err.(type) {
	case nil:
		return nil
	case *jsonrpc.Error:
		if e.Code != codeRejected {
			return e
		}
		return nil
	case interface{ Unwrap() error }:
		return upstreamWireError(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if w := upstreamWireError(inner); w != nil {
				return w
			}
		}
	}
	return nil
}

// protocolMessage is the upstream's JSON-RPC error message, used only to classify.
func protocolMessage(err error) string {
	if wire := upstreamWireError(err); wire != nil && (wire.Code == jsonrpc.CodeInvalidParams || wire.Code == jsonrpc.CodeMethodNotFound) {
		return wire.Message
	}
	return ""
}

// looksLikeUnknownTool matches the wordings SDKs use: Go "unknown tool \"x\"", TypeScript
// "Tool x not found" (also wrapped as "MCP error -32602: Tool x not found").
func looksLikeUnknownTool(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "unknown tool") || (strings.Contains(m, "tool") && strings.Contains(m, "not found"))
}

func resultSaysUnknownTool(res *mcp.CallToolResult) bool {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok && looksLikeUnknownTool(t.Text) {
			return true
		}
	}
	return false
}

// containsSecret reports whether b holds the credential's secret, raw or as JSON escapes
// it.
func containsSecret(b []byte, cred seal.Credential) bool {
	secret := cred.Token
	if cred.Type == seal.TypeHeader {
		secret = cred.Value
	}
	if secret == "" || len(b) == 0 {
		return false
	}
	if bytes.Contains(b, []byte(secret)) {
		return true
	}
	esc, err := json.Marshal(secret)
	return err == nil && bytes.Contains(b, esc[1:len(esc)-1])
}

// authTransport presents the credential on every request and records the last HTTP error
// status, which the SDK's errors do not expose.
type authTransport struct {
	base http.RoundTripper
	cred seal.Credential
	rec  *recorder
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete && t.rec.keep.Load() {
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
	}
	r := req.Clone(req.Context())
	t.cred.Apply(r.Header)
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		t.rec.status.Store(int64(resp.StatusCode))
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		t.rec.challenge.Store(readChallenge(resp.Header, t.cred))
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxResponseBytes, shared: t.rec.budget.Load(), over: &t.rec.tooLarge}
	if tp := t.rec.tap.Load(); tp != nil && req.Method == http.MethodPost {
		resp.Body = &teeBody{ReadCloser: resp.Body, tap: tp, to: tp.body(resp.Header.Get("Content-Type"))}
	}
	return resp, nil
}

// recorder keeps what the SDK's errors do not expose: the last HTTP error
// status, and the Bearer challenge of the last 401 or 403.
type recorder struct {
	status    atomic.Int64
	challenge atomic.Pointer[challenge]
	// budget, when set, is what the responses of the exchange under way
	// may still carry in all (a tools/list's pages).
	budget atomic.Pointer[atomic.Int64]
	// keep: the session holds a pending task, and is not ended (its
	// DELETE is not sent; resume.go).
	keep atomic.Bool
	// tap, when set, records the response bodies of the exchange under
	// way (task.go).
	tap atomic.Pointer[tap]
	// tooLarge: a response body was cut at a bound. The SDK flattens a
	// body's read error into text, so errResponseTooLarge alone would not
	// be seen in what it returns.
	tooLarge atomic.Bool
}

func (r *recorder) lastStatus() int { return int(r.status.Load()) }

// reset forgets earlier exchanges in the session.
func (r *recorder) reset() {
	r.status.Store(0)
	r.challenge.Store(nil)
	r.tooLarge.Store(false)
}

var errResponseTooLarge = errors.New("broker: response body too large")

// limitedBody fails a read past the limit, its own or the one it shares
// with the exchange's other responses, instead of truncating silently.
type limitedBody struct {
	rc     io.ReadCloser
	left   int64
	shared *atomic.Int64 // nil: only left bounds
	over   *atomic.Bool  // set when a read is refused
}

func (l *limitedBody) Read(p []byte) (int, error) {
	left := l.left
	if l.shared != nil {
		left = min(left, l.shared.Load())
	}
	if left <= 0 {
		l.over.Store(true)
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	if l.shared != nil {
		l.shared.Add(-int64(n))
	}
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }

// teeBody copies what is read of a (bounded) body into a tap.
type teeBody struct {
	io.ReadCloser
	tap *tap
	to  *bytes.Buffer
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.tap.write(t.to, p[:n])
	return n, err
}
