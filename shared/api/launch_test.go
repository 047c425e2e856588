package api_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/run"
)

// TestLaunchCredentialOnce: a launch credential has its run's tokens
// issued once; every later use is refused, and the first of those is
// recorded; it opens no other run and no other route; of many concurrent
// first uses exactly one gets tokens.
func TestLaunchCredentialOnce(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	s.trigger("Codertocat/Hello-World", nil)
	runs := run.NewService(s.led, time.Now)
	newRun := func(id, sha string) string {
		// A distinct head commit: a distinct signed body, so a new run.
		body := bytes.ReplaceAll(payload(t, "same_repo.opened.json"), []byte("ec26c3e57ca3a959ca5aad62de7213c562f8c821"), []byte(sha))
		r := s.deliver(signed(id, body))
		if r.status != http.StatusCreated {
			t.Fatalf("delivery %s = %d %s", id, r.status, r.raw)
		}
		return r.body["session_id"].(string)
	}
	id := newRun("d-launch-1", strings.Repeat("1", 40))
	cred, err := runs.Launch(t.Context(), id, "local", "test")
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if _, err := runs.Launch(t.Context(), id, "local", "test"); !errors.Is(err, run.ErrLaunched) {
		t.Errorf("second Launch = %v, want ErrLaunched", err)
	}
	tokenPath := "/v1/sessions/" + id + "/token"
	if r := s.do("GET", "/v1/sessions/"+id, string(cred), nil); r.status != http.StatusUnauthorized {
		t.Errorf("launch credential on GET of the run = %d, want 401", r.status)
	}

	const racers = 24
	var wg sync.WaitGroup
	statuses := make(chan int, racers)
	for range racers {
		wg.Go(func() { statuses <- s.do("POST", tokenPath, string(cred), nil).status })
	}
	wg.Wait()
	close(statuses)
	won := 0
	for st := range statuses {
		switch st {
		case http.StatusOK:
			won++
		case http.StatusConflict, http.StatusServiceUnavailable:
		default:
			t.Errorf("a concurrent use answered %d", st)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent uses of one launch credential got tokens, want exactly 1", won)
	}
	for range 3 {
		if r := s.do("POST", tokenPath, string(cred), nil); r.status != http.StatusConflict {
			t.Errorf("reuse = %d %s, want 409", r.status, r.raw)
		}
	}
	counts := map[string]int{}
	for _, e := range s.must(200, "GET", "/v1/sessions/"+id+"/events", adminToken, nil)["events"].([]any) {
		counts[e.(map[string]any)["type"].(string)]++
	}
	if counts["run.launched"] != 1 || counts["session.token_issued"] != 1 || counts["run.launch_refused"] != 1 {
		t.Errorf("ledger counts = %v, want one run.launched, one session.token_issued, one run.launch_refused", counts)
	}

	other := newRun("d-launch-2", strings.Repeat("2", 40))
	if r := s.do("POST", "/v1/sessions/"+other+"/token", string(cred), nil); r.status != http.StatusUnauthorized {
		t.Errorf("launch credential on another run = %d, want 401", r.status)
	}
	if r := s.do("POST", "/v1/sessions/"+other+"/token", "fbx_lch_"+string(cred)[8:12]+"forged", nil); r.status != http.StatusUnauthorized {
		t.Errorf("forged launch credential = %d, want 401", r.status)
	}
	manual, _ := s.session(map[string]any{"policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	if _, err := runs.Launch(t.Context(), manual, "local", "test"); !errors.Is(err, run.ErrTokensIssued) {
		t.Errorf("Launch(manual run) = %v, want ErrTokensIssued", err)
	}
}
