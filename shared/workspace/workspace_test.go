package workspace_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/workspace"
)

type entry struct {
	Mode     int64
	Link     string
	Contents string
}

func unpack(t *testing.T, gz []byte) map[string]entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = entry{Mode: h.Mode, Link: h.Linkname, Contents: string(b)}
	}
}

// TestFetchFrozenCommit: the archive is exactly the asked commit, even
// after the branch moved on; files keep their kind; the credential is the
// minted token and nothing else opens the repository.
func TestFetchFrozenCommit(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.Install("acme/app", 7)
	frozen := gh.Commit("acme/app", "refs/pull/3/head", map[string]githubtest.File{
		"README.md":   {Content: "hello\n"},
		"bin/run.sh":  {Content: "#!/bin/sh\n", Executable: true},
		"docs/link":   {Content: "../README.md", Symlink: true},
		"src/a/b.go":  {Content: "package a\n"},
		".claude/x.j": {Content: "{}"},
	})
	// A later push: the ref moves; the run froze the earlier commit.
	gh.Commit("acme/app", "refs/pull/3/head", map[string]githubtest.File{"README.md": {Content: "moved\n"}})
	url := gh.Git + "/acme/app.git"
	tok := gh.Mint("acme/app", "read")

	a, err := workspace.Fetch(context.Background(), workspace.Source{URL: url, Username: "x-access-token", Password: tok, Commit: frozen})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	want := map[string]entry{
		"README.md":   {Mode: 0o644, Contents: "hello\n"},
		"bin/run.sh":  {Mode: 0o755, Contents: "#!/bin/sh\n"},
		"docs/link":   {Mode: 0o777, Link: "../README.md"},
		"src/a/b.go":  {Mode: 0o644, Contents: "package a\n"},
		".claude/x.j": {Mode: 0o644, Contents: "{}"},
	}
	if diff := cmp.Diff(want, unpack(t, a.Gzip)); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
	if a.Commit != frozen || a.Files != 5 {
		t.Errorf("Fetch = commit %s, %d files; want %s, 5", a.Commit, a.Files, frozen)
	}
	again, err := workspace.Fetch(context.Background(), workspace.Source{URL: url, Username: "x-access-token", Password: tok, Commit: frozen})
	if err != nil || !bytes.Equal(again.Gzip, a.Gzip) {
		t.Errorf("a second fetch of the same commit gives a different archive (err %v)", err)
	}

	for _, tc := range []struct {
		name string
		src  workspace.Source
	}{
		{"no credential", workspace.Source{URL: url, Commit: frozen}},
		{"another repository's token", workspace.Source{URL: url, Username: "x-access-token", Password: gh.Mint("acme/other", "read"), Commit: frozen}},
		{"a token without contents", workspace.Source{URL: url, Username: "x-access-token", Password: gh.Mint("acme/app", ""), Commit: frozen}},
		{"a commit the host does not have", workspace.Source{URL: url, Username: "x-access-token", Password: tok, Commit: strings.Repeat("ab", 20)}},
	} {
		_, err := workspace.Fetch(context.Background(), tc.src)
		if !errors.Is(err, workspace.ErrFetch) {
			t.Errorf("Fetch(%s) = %v, want ErrFetch", tc.name, err)
		}
		if tc.src.Password != "" && err != nil && strings.Contains(err.Error(), tc.src.Password) {
			t.Errorf("Fetch(%s) error quotes the token: %v", tc.name, err)
		}
	}
	for _, bad := range []string{"", "HEAD", "main", strings.Repeat("A", 40), frozen[:39], frozen + "0"} {
		if _, err := workspace.Fetch(context.Background(), workspace.Source{URL: url, Password: tok, Commit: bad}); err == nil {
			t.Errorf("Fetch(commit %q) succeeded, want a refusal before any fetch", bad)
		}
	}
}
