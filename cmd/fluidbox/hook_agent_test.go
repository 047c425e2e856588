package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestHookSendsTheSubagent: a call a subagent makes arrives in Claude
// Code's hook input with agent_id and agent_type; the hook sends both with
// the permission request, so the gate decides and records it as the
// subagent's. The main agent's calls carry neither.
func TestHookSendsTheSubagent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	s := newStack(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/permission") {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	ses, token := s.newRun(t)
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses, "FLUIDBOX_SESSION_TOKEN", token)
	sub := `{"hook_event_name":"PreToolUse","cwd":"/work","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"toolu_sub1","agent_id":"a3f9c2e1","agent_type":"Explore"}`
	if got, reason := hookAnswer(t, fluidbox(context.Background(), vars, sub, "hook", "claude-code")); got != "allow" {
		t.Fatalf("subagent's git status = %s %q, want allow", got, reason)
	}
	main := `{"hook_event_name":"PreToolUse","cwd":"/work","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"toolu_main1"}`
	hookAnswer(t, fluidbox(context.Background(), vars, main, "hook", "claude-code"))
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) < 2 || !strings.Contains(bodies[0], `"agent_id":"a3f9c2e1"`) || !strings.Contains(bodies[0], `"agent_type":"Explore"`) || strings.Contains(bodies[len(bodies)-1], "agent_") {
		t.Errorf("permission requests = %q; want the subagent's with agent_id and agent_type, the main agent's without", bodies)
	}
}
