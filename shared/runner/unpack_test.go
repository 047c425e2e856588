//go:build linux

package runner_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/runner"
)

type entry struct {
	name, link, body string
	typ              byte
}

func archive(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

// TestUnpackStaysInside: no archive writes outside the workspace, whether
// by a path (.., absolute, .git) or through a symbolic link an earlier
// entry made (to an absolute path or up the tree), or a hard link or
// device; each refuses the workspace.
func TestUnpackStaysInside(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entries []entry
	}{
		{"dotdot", []entry{{name: "../escape", typ: tar.TypeReg, body: "x"}}},
		{"absolute", []entry{{name: "/tmp/escape", typ: tar.TypeReg, body: "x"}}},
		{"git dir", []entry{{name: ".git/hooks/post-checkout", typ: tar.TypeReg, body: "x"}}},
		{"GIT dir", []entry{{name: "a/.GIT/config", typ: tar.TypeReg, body: "x"}}},
		{"through an absolute link", []entry{{name: "l", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "l/escape", typ: tar.TypeReg, body: "x"}}},
		{"through a relative link", []entry{{name: "l", typ: tar.TypeSymlink, link: "../"}, {name: "l/escape", typ: tar.TypeReg, body: "x"}}},
		{"onto a link", []entry{{name: "l", typ: tar.TypeSymlink, link: "OUTSIDE/escape"}, {name: "l", typ: tar.TypeReg, body: "x"}}},
		{"hard link", []entry{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}},
		{"device", []entry{{name: "d", typ: tar.TypeChar}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			work := filepath.Join(base, "work")
			for _, d := range []string{outside, work} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tc.entries {
				tc.entries[i].link = strings.ReplaceAll(tc.entries[i].link, "OUTSIDE", outside)
			}
			err := runner.Unpack(bytes.NewReader(archive(t, tc.entries)), work, os.Getuid(), os.Getgid())
			if err == nil {
				t.Errorf("Unpack(%s) succeeded, want a refusal", tc.name)
			}
			for _, p := range []string{filepath.Join(outside, "escape"), filepath.Join(base, "escape"), "/tmp/escape"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("Unpack(%s) wrote %s", tc.name, p)
				}
			}
		})
	}
	// What a checkout holds unpacks, a link kept as a link.
	work := t.TempDir()
	err := runner.Unpack(bytes.NewReader(archive(t, []entry{
		{name: "a/b/c.txt", typ: tar.TypeReg, body: "c"}, {name: "link", typ: tar.TypeSymlink, link: "a/b/c.txt"}, {name: "d", typ: tar.TypeDir},
	})), work, os.Getuid(), os.Getgid())
	if b, rerr := os.ReadFile(filepath.Join(work, "link")); err != nil || rerr != nil || string(b) != "c" {
		t.Errorf("Unpack(a checkout) = %v; link reads %q, %v", err, b, rerr)
	}
}

// FuzzUnpack: whatever the archive, nothing appears outside the workspace.
func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, []entry{{name: "a", typ: tar.TypeReg, body: "x"}}))
	f.Add(archive(f, []entry{{name: "l", typ: tar.TypeSymlink, link: "../"}, {name: "l/x", typ: tar.TypeReg, body: "x"}}))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, gz []byte) {
		base := t.TempDir()
		work := filepath.Join(base, "work")
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = runner.Unpack(bytes.NewReader(gz), work, os.Getuid(), os.Getgid())
		names, _ := os.ReadDir(base)
		if len(names) != 1 {
			t.Fatalf("Unpack wrote beside the workspace: %v", names)
		}
	})
}
