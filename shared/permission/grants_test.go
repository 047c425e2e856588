package permission_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const grantsPolicy = `{"name":"g","default_verdict":"require_approval","approval":{"scope":"session"},"rules":[
 {"id":"docs","tool":"Write","match":{"path":["docs/**"]},"verdict":"require_approval","scope":"session"},
 {"id":"docs-secret","tool":"Write","match":{"path":["docs/secret/**"]},"verdict":"require_approval","scope":"once"},
 {"id":"push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session"}]}`

var admin = auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}

func ask(t *testing.T, e *calltest.Env, id, tool string, input any, resolved map[string]string) permission.Answer {
	t.Helper()
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Perm.Decide(context.Background(), e.RunID, permission.Request{ToolCallID: id, ToolName: tool, Input: b, ResolvedPaths: resolved}, 0)
	if err != nil {
		t.Fatalf("Decide(%s %s %v): %v", id, tool, input, err)
	}
	return a
}

// approveForSession decides a pending answer approved_session.
func approveForSession(t *testing.T, e *calltest.Env, a permission.Answer) {
	t.Helper()
	if a.Decision != vocab.Pending {
		t.Fatalf("answer = %+v, want pending", a)
	}
	if _, ok, err := e.Approvals.Decide(context.Background(), admin, a.ApprovalID, vocab.ChoiceApprovedSession); !ok || err != nil {
		t.Fatalf("approve %s for the session: %v %v", a.ApprovalID, ok, err)
	}
}

// TestSessionGrantBelongsToItsRule is the attack of issue 25 item 2 end to
// end: a "Write docs/** for the session" grant let every later Write
// through, and a Bash grant for one command covered another.
func TestSessionGrantBelongsToItsRule(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, grantsPolicy)
	write := func(p string) map[string]any { return map[string]any{"file_path": p, "content": "x"} }

	approveForSession(t, e, ask(t, e, "w1", "Write", write("docs/a.md"), nil))
	if a := ask(t, e, "w2", "Write", write("docs/b/c.md"), nil); a.Decision != vocab.Allow {
		t.Errorf("Write docs/b/c.md under the docs grant = %+v, want allow", a)
	}
	// Another rule, stricter, also asks: the docs grant does not answer.
	if a := ask(t, e, "w3", "Write", write("docs/secret/key"), nil); a.Decision != vocab.Pending || a.RuleID != "docs-secret" {
		t.Errorf("Write docs/secret/key = %+v, want pending under docs-secret", a)
	}
	// Inside the glob as given, outside it as resolved: asked again.
	if a := ask(t, e, "w4", "Write", write("docs/link"), map[string]string{"file_path": "/ws/.env"}); a.Decision != vocab.Pending {
		t.Errorf("Write docs/link -> /ws/.env = %+v, want pending", a)
	}
	// No rule: the default verdict names no path a grant could cover.
	if a := ask(t, e, "w5", "Write", write("src/main.go"), nil); a.Decision != vocab.Pending || a.RuleID != "" {
		t.Errorf("Write src/main.go = %+v, want pending under the default verdict", a)
	}

	// Bash: a default-verdict command cannot be approved for the session
	// at all, so "rm a.txt" can never cover "rm -rf /srv/app".
	rm := ask(t, e, "b1", "Bash", map[string]any{"command": "rm a.txt"}, nil)
	if _, _, err := e.Approvals.Decide(context.Background(), admin, rm.ApprovalID, vocab.ChoiceApprovedSession); err == nil {
		t.Errorf("approved_session of %+v succeeded, want it refused: no scope a grant could cover", rm)
	}
	if _, ok, err := e.Approvals.Decide(context.Background(), admin, rm.ApprovalID, vocab.ChoiceApprovedOnce); !ok || err != nil {
		t.Fatalf("approve rm once: %v %v", ok, err)
	}
	if a := ask(t, e, "b2", "Bash", map[string]any{"command": "rm -rf /srv/app"}, nil); a.Decision != vocab.Pending {
		t.Errorf("rm -rf /srv/app after rm a.txt was approved = %+v, want pending", a)
	}
	approveForSession(t, e, ask(t, e, "b3", "Bash", map[string]any{"command": "git push origin main"}, nil))
	if a := ask(t, e, "b4", "Bash", map[string]any{"command": "git push --force origin main"}, nil); a.Decision != vocab.Allow {
		t.Errorf("git push --force under the push grant = %+v, want allow", a)
	}
	if a := ask(t, e, "b5", "Bash", map[string]any{"command": "git push && rm -rf /srv/app"}, nil); a.Decision != vocab.Pending {
		t.Errorf("git push && rm -rf = %+v, want pending", a)
	}

	grants, err := e.St.Grants(context.Background(), e.RunID)
	if err != nil || len(grants) != 2 || grants[0].RuleID == "" || grants[1].RuleID == "" {
		t.Errorf("grants = %+v, %v; want the docs and push grants, each under its rule", grants, err)
	}
	// Revoked by scope key, as the API names grants: asked again.
	if err := e.Approvals.RevokeGrant(context.Background(), admin, e.RunID, "Bash:git push"); err != nil {
		t.Fatal(err)
	}
	if a := ask(t, e, "b6", "Bash", map[string]any{"command": "git push"}, nil); a.Decision != vocab.Pending {
		t.Errorf("git push after the revoke = %+v, want pending", a)
	}
}

// TestOldGrantsAreNotHonoured: a grant written the way grants were before
// they belonged to a rule (GRANT#<sha256 of the scope key>, no rule) answers
// nothing.
func TestOldGrantsAreNotHonoured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := calltest.NewEnv(t, grantsPolicy)
	sum := sha256.Sum256([]byte("Bash:git push"))
	old, err := e.St.Put(store.Key{PK: "RUN#" + e.RunID, SK: "GRANT#" + hex.EncodeToString(sum[:])},
		store.Grant{ScopeKey: "Bash:git push", ApprovalID: "apr_old", GrantedBy: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := redact.New(redact.GrantRevoked{ScopeKey: "unrelated", RevokedBy: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Led.Append(ctx, e.RunID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{old}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if a := ask(t, e, "c1", "Bash", map[string]any{"command": "git push"}, nil); a.Decision != vocab.Pending {
		t.Errorf("git push under an old-style grant = %+v, want pending", a)
	}
}

// TestReplayIdentity is issue 25 item 3: the same tool_call_id with the
// same input but another cwd or other resolved paths was answered by
// replaying the first decision (a symlink to .env passed). Every input of
// the decision is part of the call's identity; a difference is a conflict.
func TestReplayIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := calltest.NewEnv(t, `{"name":"r","default_verdict":"deny","rules":[
	 {"id":"read","tool":"Read","match":{"path":["/ws/**"]},"verdict":"allow"},
	 {"id":"env","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"}]}`)
	in := json.RawMessage(`{"file_path":"/ws/link"}`)
	first, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "c1", ToolName: "Read", Input: in, Cwd: "/ws"}, 0)
	if err != nil || first.Decision != vocab.Allow {
		t.Fatalf("first ask = %+v, %v; want allow", first, err)
	}
	for name, r := range map[string]permission.Request{
		"resolved to .env": {ToolCallID: "c1", ToolName: "Read", Input: in, Cwd: "/ws", ResolvedPaths: map[string]string{"file_path": "/ws/.env"}},
		"another cwd":      {ToolCallID: "c1", ToolName: "Read", Input: in, Cwd: "/"},
		"no cwd":           {ToolCallID: "c1", ToolName: "Read", Input: in},
	} {
		if a, err := e.Perm.Decide(ctx, e.RunID, r, 0); !errors.Is(err, permission.ErrConflict) {
			t.Errorf("retry with %s = %+v, %v; want ErrConflict", name, a, err)
		}
		if _, _, err := e.Perm.Recorded(ctx, e.RunID, r); !errors.Is(err, permission.ErrConflict) {
			t.Errorf("Recorded with %s = %v; want ErrConflict", name, err)
		}
	}
	again, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "c1", ToolName: "Read", Input: json.RawMessage(`{ "file_path" : "/ws/link" }`), Cwd: "/ws"}, 0)
	if err != nil || again != first {
		t.Errorf("the same request again = %+v, %v; want %+v", again, err, first)
	}

	// A record without an identity (from before records kept one) cannot
	// show a retry is the same call.
	digest, err := redact.DigestJSON(map[string]any{"file_path": "/ws/link"})
	if err != nil {
		t.Fatal(err)
	}
	old, err := e.St.PutNew(store.CallKey(e.RunID, "c-old"), store.Call{ToolCallID: "c-old", ToolName: "Read",
		InputDigest: digest.String(), Decision: vocab.Allow, DecidedAt: "2026-03-01T12:00:00.000000000Z"}, call.ErrRecorded)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := redact.New(redact.GrantRevoked{ScopeKey: "unrelated", RevokedBy: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Led.Append(ctx, e.RunID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{old}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if a, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "c-old", ToolName: "Read", Input: in}, 0); !errors.Is(err, permission.ErrConflict) {
		t.Errorf("retry of a record without an identity = %+v, %v; want ErrConflict", a, err)
	}
}

// TestRevokeRacesDecisions: 24 asks under a session grant race its
// revocation. Every decision the grant answered is in the ledger before
// grant.revoked (none after it), and every ask after the revoke returned
// asks a human again.
func TestRevokeRacesDecisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := calltest.NewEnv(t, grantsPolicy)
	e.Perm.LimitPending(100) // the asks after the revoke all wait
	approveForSession(t, e, ask(t, e, "first", "Bash", map[string]any{"command": "git push"}, nil))
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ask(t, e, fmt.Sprintf("r%02d", i), "Bash", map[string]any{"command": "git push origin"}, nil)
		}()
		if i == 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.Approvals.RevokeGrant(ctx, admin, e.RunID, "Bash:git push"); err != nil {
					t.Errorf("revoke: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	if a := ask(t, e, "after", "Bash", map[string]any{"command": "git push origin"}, nil); a.Decision != vocab.Pending {
		t.Errorf("ask after the revoke = %+v, want pending", a)
	}
	evs, _, err := e.Led.Read(ctx, e.RunID, 0, 1000, 0) // numbers what is pending first
	if err != nil {
		t.Fatal(err)
	}
	revokedAt := int64(0)
	for _, ev := range evs {
		if ev.Type == "grant.revoked" {
			revokedAt = ev.Seq
		}
	}
	if revokedAt == 0 {
		t.Fatal("no grant.revoked in the ledger")
	}
	granted := 0
	for _, ev := range evs {
		var data struct {
			Grant string `json:"grant"`
		}
		if ev.Type != "tool.decision" || json.Unmarshal([]byte(ev.Data), &data) != nil || data.Grant == "" {
			continue
		}
		granted++
		if ev.Seq > revokedAt {
			t.Errorf("tool.decision by the grant at seq %d, after grant.revoked at %d", ev.Seq, revokedAt)
		}
	}
	t.Logf("%d of 24 racing asks were answered by the grant before its revocation", granted)
}
