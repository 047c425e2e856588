package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/devstack"
)

// TestDevRestartMidPause: a `fluidbox dev` over a separately served table
// is stopped and started again while a call waits for a human; the re-ask
// re-attaches to the same approval, nothing is duplicated, and a decision
// made after the restart reaches it.
func TestDevRestartMidPause(t *testing.T) {
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = db.Close()
		for _, r := range db.Layer.Refused() {
			t.Errorf("DynamoDB on AWS refuses this request: %s", r)
		}
	}()
	addr := freeAddr(t)
	const token = "restart-admin-token-0123456789"
	env := map[string]string{"FLUIDBOX_ADDR": addr, "FLUIDBOX_ADMIN_TOKEN": token, "AWS_ENDPOINT_URL_DYNAMODB": db.URL, "FLUIDBOX_TABLE": "restart"}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var out syncBuffer
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := run(ctx, []string{"dev"}, func(k string) string { return env[k] }, strings.NewReader(""), &out, &out); code != 0 {
				t.Errorf("fluidbox dev exited %d: %s", code, out.String())
			}
		}()
		waitHealthy(t, "http://"+addr)
		return func() { cancel(); wg.Wait() }
	}
	base := "http://" + addr
	call := func(method, path, tok string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s = %d %v", method, path, resp.StatusCode, out)
		}
		return out
	}

	stop := start()
	pol := call("POST", "/v1/policies", token, map[string]any{"name": "r", "default_verdict": "require_approval", "rules": []any{}})["id"].(string)
	ses := call("POST", "/v1/sessions", token, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	id, tok := ses["id"].(string), ses["token"].(string)
	ask := map[string]any{"tool_call_id": "c1", "tool_name": "Bash", "input": map[string]any{"command": "make deploy"}}
	first := call("POST", "/v1/sessions/"+id+"/permission", tok, ask)
	if first["decision"] != "pending" {
		t.Fatalf("first ask = %v, want pending", first)
	}
	stop()

	stop = start()
	defer stop()
	again := call("POST", "/v1/sessions/"+id+"/permission", tok, ask)
	if again["decision"] != "pending" || again["approval_id"] != first["approval_id"] {
		t.Fatalf("re-ask after restart = %v, want the same pending approval %v", again, first["approval_id"])
	}
	call("POST", fmt.Sprintf("/v1/approvals/%s/decision", first["approval_id"]), token, map[string]any{"decision": "approved_once"})
	if final := call("POST", "/v1/sessions/"+id+"/permission?wait_seconds=5", tok, ask); final["decision"] != "allow" {
		t.Fatalf("after the decision = %v, want allow", final)
	}
	evs := call("GET", "/v1/sessions/"+id+"/events", token, nil)["events"].([]any)
	var types []string
	for _, e := range evs {
		types = append(types, e.(map[string]any)["type"].(string))
	}
	if got := strings.Join(types, " "); got != "session.created tool.requested approval.requested approval.decided tool.decision" {
		t.Fatalf("events = %s, want no duplicate", got)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHealthy(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not become healthy", url)
}
