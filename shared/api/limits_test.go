package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/policy"
)

// TestEmptyToolClasses: a connection created with "tool_classes": {} is
// stored without the empty map (minidyn reads one back as another type,
// and the validator refuses it), so it reads, lists and revokes.
func TestEmptyToolClasses(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	up := newMCPUpstream(t, canary)
	created := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "empty", "url": up.url(), "kind": "shared",
		"credential":   map[string]any{"type": "bearer", "token": canary},
		"tool_classes": map[string]string{},
	})
	id := created["id"].(string)
	got := s.want(200, "GET", "/v1/connections/"+id, adminToken, nil)
	if classes, ok := got["tool_classes"].(map[string]any); !ok || len(classes) != 0 {
		t.Errorf("tool_classes = %v, want {}", got["tool_classes"])
	}
	list := s.want(200, "GET", "/v1/connections", adminToken, nil)
	if !strings.Contains(fmt.Sprint(list), id) {
		t.Errorf("list = %v, want %s in it", list, id)
	}
	s.want(200, "DELETE", "/v1/connections/"+id, adminToken, nil)
	if got := s.want(200, "GET", "/v1/connections/"+id, adminToken, nil); got["status"] != "revoked" {
		t.Errorf("after revoke: %v", got)
	}
}

// TestItemLimitsAtTheDoor: input that would make an item DynamoDB refuses
// is refused when it is accepted, with a 400 naming the limit.
func TestItemLimitsAtTheDoor(t *testing.T) {
	t.Parallel()
	s := newStack(t)

	// A 5,000-rule policy is ~470 KB: over the document limit.
	var rules []string
	for i := range 5000 {
		rules = append(rules, fmt.Sprintf(`{"id":"rule-%04d","tool":"mcp__srv__tool_%04d","verdict":"deny","reason":"%s"}`, i, i, strings.Repeat("r", 20)))
	}
	doc := `{"name":"huge","default_verdict":"deny","rules":[` + strings.Join(rules, ",") + `]}`
	if r := s.do("POST", "/v1/policies", adminToken, doc); r.status != 400 || !strings.Contains(string(r.raw), fmt.Sprint(policy.MaxDocumentBytes)) {
		t.Errorf("%d-byte policy = %d %.200s, want 400 naming %d", len(doc), r.status, r.raw, policy.MaxDocumentBytes)
	}

	// 30 tools with long descriptions: over a bundle's limit.
	var tools []map[string]any
	for i := range 30 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("t%02d", i), "class": "read",
			"description": strings.Repeat("d", capability.MaxDescriptionLen), "input_schema": map[string]any{"type": "object"}})
	}
	if r := s.do("POST", "/v1/capabilities", adminToken, map[string]any{"name": "wide", "tools": tools}); r.status != 400 || !strings.Contains(string(r.raw), fmt.Sprint(capability.MaxBundleBytes)) {
		t.Errorf("30-tool bundle = %d %.300s, want 400 naming %d", r.status, r.raw, capability.MaxBundleBytes)
	}
	// The same tools, fewer of them, fit.
	s.must(201, "POST", "/v1/capabilities", adminToken, map[string]any{"name": "narrow", "tools": tools[:5]})
}

// TestOversizedUpstreamTool: an upstream tool over a field bound is kept
// un-callable with the reason; the refresh succeeds, and keeps succeeding.
func TestOversizedUpstreamTool(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, canary)
	up.addEcho(strings.Repeat("é", connection.MaxToolDescriptionBytes))
	s := newBrokerStack(t, localSealer(t), 0)
	con := s.connection("big", up.url(), "shared", canary)
	for range 2 {
		ref := s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
		found := false
		for _, tl := range ref["tools"].([]any) {
			m := tl.(map[string]any)
			if m["name"] != "echo" {
				continue
			}
			found = true
			if m["callable"] != false || !strings.Contains(fmt.Sprint(m["reason"]), "description over") {
				t.Errorf("oversized echo = callable %v, reason %v", m["callable"], m["reason"])
			}
			if d := m["description"].(string); len(d) > connection.MaxToolDescriptionBytes || !strings.HasPrefix(strings.Repeat("é", 10), d[:20]) {
				t.Errorf("description kept %d bytes", len(d))
			}
		}
		if !found {
			t.Fatalf("echo missing from the photograph: %v", ref["tools"])
		}
	}
}
