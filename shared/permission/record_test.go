package permission_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func TestRecordOnce(t *testing.T) {
	t.Parallel()
	f := calltest.NewFixture(t)
	c := f.Asked(t, "toolu_1", map[string]any{"command": "ls"})
	rec, err := f.Record(t, c, calltest.Allow, permission.Pin{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Answer.Decision != vocab.Allow || rec.Answer.RuleID != "r1" {
		t.Errorf("answer = %+v", rec.Answer)
	}
	got, err := f.St.GetCall(context.Background(), f.Run, "toolu_1")
	if err != nil || got.Decision != vocab.Allow || got.InputDigest != c.Digest.String() || permission.AnswerOf(got) != rec.Answer {
		t.Errorf("record = %+v, %v; answer %+v", got, err, rec.Answer)
	}
	if _, err := f.Record(t, c, calltest.Allow, permission.Pin{}); !errors.Is(err, call.ErrRecorded) {
		t.Errorf("second record = %v, want ErrRecorded", err)
	}
	if got := f.Events(t); strings.Join(got, " ") != "session.created tool.requested tool.decision" {
		t.Errorf("events = %v", got)
	}
}

// TestGrantKeysAreHashes: a grant's sort key is a SHA-256 of the rule and
// the scope key, so a command of any length (or one holding a secret) never
// reaches a key, and revoking by the scope key finds it.
func TestGrantKeysAreHashes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := calltest.NewFixture(t)
	long := "Bash:curl -H 'Authorization: Bearer sk-live-canary' " + strings.Repeat("x", 1200)
	d := calltest.Pending
	d.ScopeKey = long
	rec, err := f.Record(t, f.Asked(t, "toolu_4", map[string]any{"command": long[5:]}), d, permission.Pin{ApprovalID: "apr_4"})
	if err != nil {
		t.Fatal(err)
	}
	build, _, err := approval.Settle(f.St, rec.Approval, vocab.ApprovedSession, "carol", "", calltest.T0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Led.Append(ctx, f.Run, build); err != nil {
		t.Fatal(err)
	}
	k := store.GrantKey(f.Run, d.RuleID, long)
	if !regexp.MustCompile(`^RGRANT#[0-9a-f]{64}$`).MatchString(k.SK) {
		t.Errorf("grant sort key %q is not RGRANT#<sha256>", k.SK)
	}
	var g store.Grant
	if err := f.St.Get(ctx, k, &g); err != nil || g.ScopeKey != long || g.RuleID != d.RuleID {
		t.Fatalf("grant at %s = %+v, %v", k.SK, g, err)
	}
	revoke := func() error {
		_, err = f.Led.Append(ctx, f.Run, func(store.Head) (store.Batch, error) {
			held, err := f.St.Grants(ctx, f.Run)
			if err != nil {
				return store.Batch{}, err
			}
			return approval.Revoke(f.St, f.Run, long, held, auth.Operator)
		})
		return err
	}
	if err := revoke(); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if err := revoke(); !errors.Is(err, call.ErrNoGrant) {
		t.Errorf("second revoke = %v, want ErrNoGrant", err)
	}
	if grants, _ := f.St.Grants(ctx, f.Run); len(grants) != 0 {
		t.Errorf("grants after revoke = %+v", grants)
	}
}

// TestApprovalInputIsBounded: the input kept for display fits
// MaxShownInput whatever the input, stays valid JSON, and the digest and
// size are those of the whole input.
func TestApprovalInputIsBounded(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", 30_000) // 60 KB each
	keys := map[string]any{}
	for i := range 5000 {
		keys[strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("z", i/26)] = "v"
	}
	cases := map[string]map[string]any{
		"small":              {"command": "git push"},
		"eight 60 KB":        {"a": big, "b": big, "c": big, "d": big, "e": big, "f": big, "g": big, "h": []any{big, map[string]any{"x": big}}},
		"many keys":          keys,
		"one huge string":    {"content": strings.Repeat("a", 3<<20)},
		"just over the line": {"content": strings.Repeat("a", permission.MaxShownInput)},
	}
	for name, input := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := calltest.NewFixture(t)
			c := f.Asked(t, "toolu_5", input)
			rec, err := f.Record(t, c, calltest.Pending, permission.Pin{ApprovalID: "apr_5"})
			if err != nil {
				t.Fatal(err)
			}
			a, err := f.St.GetApprovalByID(context.Background(), "apr_5")
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := json.Marshal(input)
			if a.InputDigest != c.Digest.String() || a.InputSize != len(whole) || a != rec.Approval {
				t.Errorf("digest %s size %d, want %s %d", a.InputDigest, a.InputSize, c.Digest, len(whole))
			}
			if len(a.Input) > permission.MaxShownInput || !json.Valid([]byte(a.Input)) {
				t.Errorf("shown input is %d bytes, valid JSON %v", len(a.Input), json.Valid([]byte(a.Input)))
			}
			if a.InputTruncated != (len(whole) > permission.MaxShownInput) || (!a.InputTruncated && a.Input != string(whole)) {
				t.Errorf("truncated = %v for %d bytes", a.InputTruncated, len(whole))
			}
		})
	}
}

// TestGrantFencesItsDecision: a decision a session grant answered is
// recorded only while that grant stands; revoked between the read and the
// record, the append refuses it (ErrGrantRevoked) and records nothing.
func TestGrantFencesItsDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := calltest.NewFixture(t)
	byGrant := gate.Decision{Outcome: policy.VerdictAllow, Verdict: policy.VerdictRequireApproval, RuleID: "r2", Reason: "granted",
		Grant: "Bash:git push", GrantRule: "r2"}
	if _, err := f.Record(t, f.Asked(t, "g1", map[string]any{"command": "git push"}), byGrant, permission.Pin{}); !errors.Is(err, call.ErrGrantRevoked) {
		t.Fatalf("decision by a grant the run does not hold = %v, want ErrGrantRevoked", err)
	}
	if _, err := f.St.GetCall(ctx, f.Run, "g1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refused decision left a call record: %v", err)
	}
	g, err := f.St.Put(store.GrantKey(f.Run, "r2", "Bash:git push"), store.Grant{RuleID: "r2", ScopeKey: "Bash:git push", ApprovalID: "apr_g"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := redact.New(redact.GrantRevoked{ScopeKey: "unrelated", RevokedBy: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Led.Append(ctx, f.Run, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{ev}, Ops: []store.Op{g}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Record(t, f.Asked(t, "g2", map[string]any{"command": "git push"}), byGrant, permission.Pin{}); err != nil {
		t.Fatalf("decision by a grant the run holds = %v", err)
	}
	// The same grant under another rule is another grant.
	other := byGrant
	other.GrantRule = "r9"
	if _, err := f.Record(t, f.Asked(t, "g3", map[string]any{"command": "git push"}), other, permission.Pin{}); !errors.Is(err, call.ErrGrantRevoked) {
		t.Errorf("decision by the key under another rule = %v, want ErrGrantRevoked", err)
	}
}
