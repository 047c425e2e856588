// Package scriptedmodel is a scripted stand-in for the Anthropic Messages API, for tests.
//
// A test lists what the "model" does, step by step (call Bash with X, then say done once a
// tool_result arrives); the server answers the N-th POST /v1/messages with step N, streaming
// (SSE, the event sequence of the real API) or not, and records every request, headers
// included, so the test can assert what the client — or a proxy in between — sent. It listens
// on 127.0.0.1 only and is safe for concurrent use.
package scriptedmodel

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// maxBody bounds a request body; Claude Code's requests are a few hundred KiB.
const maxBody = 32 << 20

// Server is a running scripted model.
type Server struct {
	ts *httptest.Server

	mu       sync.Mutex
	script   []Step
	next     int
	routes   []route
	apiKey   string
	requests []Request
	seq      int
}

type route struct {
	match func(Request) bool
	step  Step
}

// New starts a server on 127.0.0.1 that answers requests with the steps of script in order.
// A request beyond the script is answered with a 400 invalid_request_error (not a 5xx, which
// clients retry) saying the script is exhausted.
func New(script ...Step) *Server {
	s := &Server{script: append([]Step(nil), script...)}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the base URL to give a client (ANTHROPIC_BASE_URL, option.WithBaseURL).
func (s *Server) URL() string { return s.ts.URL }

// Close shuts the server down, waiting for requests in flight.
func (s *Server) Close() { s.ts.Close() }

// RequireAPIKey makes the server accept only requests whose x-api-key (or, failing that,
// Authorization bearer token) is key, answering others with a 401 authentication_error. They
// are still recorded. An empty key accepts any.
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// Append adds steps to the end of the script.
func (s *Server) Append(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Route answers every message request that match accepts with step, without using up a
// script step: for a client's side requests (a title generation, a quota probe) that would
// otherwise shift the script. Routes are tried in the order added.
func (s *Server) Route(match func(Request) bool, step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, route{match, step})
}

// Requests returns every request received on /v1/..., in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Remaining returns how many script steps have not been used yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script) - s.next
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// Claude Code probes the base URL with HEAD / before its first request.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			io.WriteString(w, "scriptedmodel\n")
		}
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/v1/") {
		writeError(w, &APIError{http.StatusNotFound, "not_found_error", "scriptedmodel: no route for " + r.Method + " " + r.URL.Path})
		return
	}

	req := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(),
		APIKey: r.Header.Get("X-Api-Key"), Authorization: r.Header.Get("Authorization"),
		AnthropicVersion: r.Header.Get("Anthropic-Version"), AnthropicBeta: r.Header.Get("Anthropic-Beta"), Step: -1}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	req.Body = body
	if err != nil {
		s.answer(w, req, nil, &APIError{http.StatusRequestEntityTooLarge, "request_too_large", "scriptedmodel: request body too large"})
		return
	}
	if !s.authorized(req) {
		s.answer(w, req, nil, &APIError{http.StatusUnauthorized, "authentication_error", "invalid x-api-key"})
		return
	}
	if r.Method != http.MethodPost {
		s.answer(w, req, nil, &APIError{http.StatusMethodNotAllowed, "invalid_request_error", "scriptedmodel: use POST"})
		return
	}
	if err := req.decodeBody(); err != nil {
		s.answer(w, req, nil, &APIError{http.StatusBadRequest, "invalid_request_error", "scriptedmodel: body is not a JSON object: " + err.Error()})
		return
	}

	switch r.URL.Path {
	case "/v1/messages":
		step, idx := s.pick(req)
		req.Step = idx
		if step == nil {
			s.answer(w, req, nil, &APIError{http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("scriptedmodel: script exhausted: no step for message request %d", s.messageCount()+1)})
			return
		}
		reply := step(req)
		s.answer(w, req, &reply, reply.Error)
	case "/v1/messages/count_tokens":
		s.record(req, http.StatusOK)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": estimateTokens(len(req.Body))})
	default:
		s.answer(w, req, nil, &APIError{http.StatusNotFound, "not_found_error", "scriptedmodel: no route for " + r.Method + " " + r.URL.Path})
	}
}

func (s *Server) authorized(req Request) bool {
	s.mu.Lock()
	want := s.apiKey
	s.mu.Unlock()
	if want == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(req.Credential()), []byte(want)) == 1
}

// pick returns the step for req: the first matching route, else the next script step.
func (s *Server) pick(req Request) (Step, int) {
	s.mu.Lock()
	routes := append([]route(nil), s.routes...)
	s.mu.Unlock()
	for _, rt := range routes { // user code runs outside the lock
		if rt.match(req) {
			return rt.step, -1
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.script) {
		return nil, -1
	}
	s.next++
	return s.script[s.next-1], s.next - 1
}

func (s *Server) messageCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Path == "/v1/messages" {
			n++
		}
	}
	return n
}

func (s *Server) record(req Request, status int) {
	req.Status = status
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

func (s *Server) nextSeq() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

// answer records req with the status it gets, then writes the reply or the error. Recording
// first means a test that reads Requests after its client returned sees the request.
func (s *Server) answer(w http.ResponseWriter, req Request, reply *Reply, apiErr *APIError) {
	if apiErr != nil {
		s.record(req, apiErr.Status)
		writeError(w, apiErr)
		return
	}
	s.record(req, http.StatusOK)
	m := s.build(req, *reply)
	if req.Stream {
		writeStream(w, m, reply.StreamError)
		return
	}
	writeJSON(w, http.StatusOK, m.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"type":"error","error":{"type":"api_error","message":"scriptedmodel: cannot encode reply"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_scripted")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, e *APIError) {
	status := e.Status
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": e.Type, "message": e.Message},
		"request_id": "req_scripted",
	})
}
