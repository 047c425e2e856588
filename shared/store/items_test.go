package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/store"
)

func TestConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i := range 5 {
		c := store.Connection{ID: fmt.Sprintf("con_%d", i), Name: fmt.Sprintf("c%d", i), URL: "https://example.test/mcp", Kind: store.ConnectionShared,
			Status: store.ConnectionActive, Generation: 1, Sealed: []byte{1, 2, 3}, CredentialType: "bearer", CreatedAt: at(time.Duration(i) * time.Second),
			ToolClasses: map[string]string{"echo": "read"}}
		must(t, st.PutConnection(ctx, c))
	}
	wantErr(t, "a taken name", st.PutConnection(ctx, store.Connection{ID: "con_x", Name: "c1", CreatedAt: at(0)}), store.ErrNameTaken)
	wantErr(t, "a taken id", st.PutConnection(ctx, store.Connection{ID: "con_1", Name: "fresh", CreatedAt: at(0)}), store.ErrNameTaken)
	if id, err := st.ConnectionIDByName(ctx, "fresh"); err == nil {
		t.Errorf("a failed creation claimed its name for %s", id)
	}
	if id, err := st.ConnectionIDByName(ctx, "c3"); err != nil || id != "con_3" {
		t.Errorf("by name = %q, %v", id, err)
	}
	all := func(store.Connection) bool { return true }
	page, err := st.ListConnectionPage(ctx, store.ListQuery{Limit: 10}, all)
	if list := page.Connections; err != nil || len(list) != 5 || list[0].ID != "con_4" || list[4].ID != "con_0" || page.Next != "" {
		t.Errorf("list = %d, %v; want 5 newest first, on one page", len(list), err)
	}
	// Pages of two, then a filter: every page continues below the last.
	var ids []string
	for q := (store.ListQuery{Limit: 2}); ; {
		page, err := st.ListConnectionPage(ctx, q, func(c store.Connection) bool { return c.ID != "con_3" })
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Connections {
			ids = append(ids, c.ID)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	if fmt.Sprint(ids) != "[con_4 con_2 con_1 con_0]" {
		t.Errorf("paged, without con_3: %v", ids)
	}

	c, err := st.ReplaceConnectionCredential(ctx, "con_1", 1, []byte{9}, "header", at(time.Minute))
	if err != nil || c.Generation != 2 || string(c.Sealed) != "\x09" || c.CredentialType != "header" {
		t.Errorf("replace = %+v, %v", c, err)
	}
	_, err = st.ReplaceConnectionCredential(ctx, "con_1", 1, []byte{8}, "header", at(time.Minute))
	wantErr(t, "replace on a stale generation", err, store.ErrConnectionChanged)

	c, err = st.RevokeConnection(ctx, "con_1", "admin", at(2*time.Minute))
	if err != nil || c.Status != store.ConnectionRevoked || c.RevokedBy != "admin" {
		t.Errorf("revoke = %+v, %v", c, err)
	}
	again, err := st.RevokeConnection(ctx, "con_1", "bob", at(3*time.Minute))
	if err != nil || again.RevokedBy != "admin" || again.RevokedAt != at(2*time.Minute) {
		t.Errorf("second revoke = %+v, %v; want the first revocation", again, err)
	}
	_, err = st.ReplaceConnectionCredential(ctx, "con_1", 2, []byte{8}, "header", at(time.Minute))
	wantErr(t, "replace on a revoked connection", err, store.ErrConnectionChanged)
	_, err = st.RevokeConnection(ctx, "con_none", "admin", at(0))
	wantErr(t, "revoke a missing connection", err, store.ErrNotFound)
	_, err = st.GetConnection(ctx, "con_none")
	wantErr(t, "get a missing connection", err, store.ErrNotFound)
}

// TestPhotos: a photograph of more tools than one transaction holds is
// written in chunks and read back whole, in order, through pages; it
// becomes the connection's latest only while the connection is active.
func TestPhotos(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	must(t, st.PutConnection(ctx, store.Connection{ID: "con_1", Name: "c1", Status: store.ConnectionActive, Generation: 1, CreatedAt: at(0)}))
	p := store.Photo{ConnectionID: "con_1", Digest: "sha256:d", TakenAt: at(time.Minute)}
	for i := range 230 {
		p.Tools = append(p.Tools, store.PhotoTool{Name: fmt.Sprintf("t%03d", i), InputSchema: "{}", Class: "read", ToolDigest: fmt.Sprintf("sha256:%d", i)})
	}
	must(t, st.PutPhoto(ctx, p))
	must(t, st.PutPhoto(ctx, p)) // the same photograph again is harmless
	got, err := st.GetPhoto(ctx, "con_1", "sha256:d")
	if err != nil || got.Count != 230 || len(got.Tools) != 230 || got.Tools[229].Name != "t229" {
		t.Fatalf("photo = %d tools (count %d), %v", len(got.Tools), got.Count, err)
	}
	c, _ := st.GetConnection(ctx, "con_1")
	if c.PhotoDigest != "sha256:d" || c.RefreshedAt != at(time.Minute) {
		t.Errorf("connection's latest = %q at %q", c.PhotoDigest, c.RefreshedAt)
	}
	_, err = st.GetPhoto(ctx, "con_1", "sha256:none")
	wantErr(t, "missing photograph", err, store.ErrNotFound)

	if _, err := st.RevokeConnection(ctx, "con_1", "admin", at(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	p.Digest = "sha256:e"
	wantErr(t, "photograph of a revoked connection", st.PutPhoto(ctx, p), store.ErrConnectionChanged)
	if c, _ := st.GetConnection(ctx, "con_1"); c.PhotoDigest != "sha256:d" {
		t.Errorf("a revoked connection's latest moved to %q", c.PhotoDigest)
	}
}

func TestMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for _, sub := range []string{"ada", "bob", "cy", "dee", "eve"} {
		must(t, st.PutMember(ctx, store.Member{Sub: sub, Status: store.MemberActive, Roles: []string{"member"}, FirstSeen: at(0), LastSeen: at(0)}))
	}
	wantErr(t, "second PutMember", st.PutMember(ctx, store.Member{Sub: "ada", Status: store.MemberActive}), store.ErrMemberExists)
	_, err := st.GetMember(ctx, "zed")
	wantErr(t, "missing member", err, store.ErrNoMember)

	must(t, st.TouchMember(ctx, "ada", []string{"admin", "approver"}, "ada@example.com", at(time.Hour)))
	m, err := st.GetMember(ctx, "ada")
	if err != nil || len(m.Roles) != 2 || m.LastSeen != at(time.Hour) || m.Email != "ada@example.com" {
		t.Errorf("touched = %+v, %v", m, err)
	}
	must(t, st.TouchMember(ctx, "ada", nil, "", at(2*time.Hour)))
	if m, _ := st.GetMember(ctx, "ada"); m.Roles == nil || m.LastSeen != at(2*time.Hour) {
		t.Errorf("touched without roles = %+v (roles must read as empty, not nil)", m)
	}
	wantErr(t, "touch a missing member", st.TouchMember(ctx, "zed", nil, "", at(0)), store.ErrNoMember)

	m, err = st.SetMemberStatus(ctx, "bob", store.MemberInactive, "ada", at(time.Minute))
	if err != nil || m.Status != store.MemberInactive || m.DeactivatedBy != "ada" {
		t.Errorf("deactivate = %+v, %v", m, err)
	}
	m, err = st.SetMemberStatus(ctx, "bob", store.MemberActive, "ada", at(2*time.Minute))
	if err != nil || m.Status != store.MemberActive || m.ActivatedBy != "ada" {
		t.Errorf("activate = %+v, %v", m, err)
	}
	_, err = st.SetMemberStatus(ctx, "zed", store.MemberInactive, "ada", at(0))
	wantErr(t, "status of a missing member", err, store.ErrNoMember)

	all, err := st.ListMembers(ctx, 0)
	if err != nil || len(all) != 5 || all[0].Sub != "ada" || all[4].Sub != "eve" {
		t.Errorf("members = %+v, %v", all, err)
	}
	if some, _ := st.ListMembers(ctx, 3); len(some) != 3 {
		t.Errorf("at most 3 = %d", len(some))
	}
}

func TestPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	v := func(n int) store.PolicyVersion {
		return store.PolicyVersion{PolicyID: "pol_1", Version: n, Name: "p", Digest: fmt.Sprintf("sha256:%d", n), Document: "{}", CreatedAt: at(0)}
	}
	must(t, st.PutPolicyVersion(ctx, v(1)))
	wantErr(t, "version 1 again", st.PutPolicyVersion(ctx, v(1)), store.ErrConditionFailed)
	wantErr(t, "version 3 after 1", st.PutPolicyVersion(ctx, v(3)), store.ErrConditionFailed)
	must(t, st.PutPolicyVersion(ctx, v(2)))
	if p, err := st.GetPolicy(ctx, "pol_1", 0); err != nil || p.Version != 2 {
		t.Errorf("latest = %+v, %v", p, err)
	}
	if p, err := st.GetPolicy(ctx, "pol_1", 1); err != nil || p.Digest != "sha256:1" {
		t.Errorf("version 1 = %+v, %v", p, err)
	}
	_, err := st.GetPolicy(ctx, "pol_1", 3)
	wantErr(t, "missing version", err, store.ErrNotFound)
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i := range 3 {
		must(t, st.PutCapability(ctx, store.Capability{ID: fmt.Sprintf("cap_%d", i), Name: fmt.Sprintf("k%d", i), Tools: "[]", CreatedAt: at(time.Duration(i) * time.Second)}))
	}
	wantErr(t, "a taken name", st.PutCapability(ctx, store.Capability{ID: "cap_x", Name: "k1", CreatedAt: at(0)}), store.ErrNameTaken)
	if id, err := st.CapabilityIDByName(ctx, "k2"); err != nil || id != "cap_2" {
		t.Errorf("by name = %q, %v", id, err)
	}
	if c, err := st.GetCapability(ctx, "cap_1"); err != nil || c.Name != "k1" {
		t.Errorf("get = %+v, %v", c, err)
	}
	if list, err := st.ListCapabilities(ctx); err != nil || len(list) != 3 || list[2].ID != "cap_2" {
		t.Errorf("list = %+v, %v", list, err)
	}
	_, err := st.GetCapability(ctx, "cap_none")
	wantErr(t, "missing capability", err, store.ErrNotFound)
}

func TestTriggersAndDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	for i, repo := range []string{"acme/one", "acme/two", "acme/three"} {
		must(t, st.PutTrigger(ctx, store.Trigger{ID: fmt.Sprintf("trg_%d", i), Repository: repo, Events: []string{"opened"}, CreatedAt: at(time.Duration(i) * time.Second)}))
	}
	wantErr(t, "a repository with a trigger, in other case", st.PutTrigger(ctx, store.Trigger{ID: "trg_x", Repository: "ACME/One", CreatedAt: at(0)}), store.ErrRepositoryTaken)
	if tr, err := st.TriggerForRepository(ctx, "Acme/Two"); err != nil || tr.ID != "trg_1" {
		t.Errorf("for repository = %+v, %v", tr, err)
	}
	if tr, err := st.GetTrigger(ctx, "trg_2"); err != nil || tr.Repository != "acme/three" {
		t.Errorf("get = %+v, %v", tr, err)
	}
	if page, err := st.ListTriggerPage(ctx, store.ListQuery{Limit: 10}); err != nil || len(page.Triggers) != 3 || page.Triggers[0].ID != "trg_2" || page.Next != "" {
		t.Errorf("list = %+v, %v", page, err)
	}
	_, err := st.TriggerForRepository(ctx, "acme/none")
	wantErr(t, "repository without a trigger", err, store.ErrNotFound)

	d := store.Delivery{ID: "d-1", SessionID: "ses_1", TriggerID: "trg_0", Repository: "acme/one", Number: 7, BodyDigest: "sha256:b", ReceivedAt: at(0)}
	must(t, st.ClaimDelivery(ctx, d))
	wantErr(t, "second claim", st.ClaimDelivery(ctx, d), store.ErrDeliveryClaimed)
	if got, err := st.GetDelivery(ctx, "d-1"); err != nil || got != d {
		t.Errorf("delivery = %+v, %v", got, err)
	}
	_, err = st.GetDelivery(ctx, "d-2")
	wantErr(t, "missing delivery", err, store.ErrNotFound)
}

func TestModelUpstream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.GetModelUpstream(ctx)
	wantErr(t, "no upstream yet", err, store.ErrNotFound)
	m := store.ModelUpstream{URL: "https://api.example.test", CredentialType: "header", Sealed: []byte{1}, Generation: 1, UpdatedAt: at(0), UpdatedBy: "admin"}
	must(t, st.PutModelUpstream(ctx, m, 0))
	wantErr(t, "a first upstream again", st.PutModelUpstream(ctx, m, 0), store.ErrModelUpstreamChanged)
	m.Generation = 2
	wantErr(t, "a replacement on a stale generation", st.PutModelUpstream(ctx, m, 5), store.ErrModelUpstreamChanged)
	must(t, st.PutModelUpstream(ctx, m, 1))
	if got, err := st.GetModelUpstream(ctx); err != nil || got.Generation != 2 {
		t.Errorf("upstream = %+v, %v", got, err)
	}
}
