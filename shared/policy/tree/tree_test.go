package tree

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWalk: every name that is not a directory, relative and in order; a
// link is an entry and is never followed, even to a tree outside.
func TestWalk(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	write(t, outside, ".env", "deep/key.pem")
	dir := t.TempDir()
	write(t, dir, "a.go", ".env", "src/b.go", "src/.hidden/c")
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".env", filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := Walk(context.Background(), dir)
	want := Report{Entries: []string{".env", "a.go", "notes.txt", "out", "src/.hidden/c", "src/b.go"}, Complete: true}
	if !got.Complete || !slices.Equal(got.Entries, want.Entries) {
		t.Errorf("Walk(%s) = %+v, want %+v", dir, got, want)
	}
	// A root given through a link is walked where it points.
	link := filepath.Join(t.TempDir(), "repo")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if got := Walk(context.Background(), link); !slices.Equal(got.Entries, want.Entries) {
		t.Errorf("Walk(link) = %+v, want %+v", got, want)
	}
	// One file: itself.
	if got := Walk(context.Background(), filepath.Join(dir, "a.go")); !got.Complete || !slices.Equal(got.Entries, []string{"."}) {
		t.Errorf("Walk(file) = %+v, want [.]", got)
	}
	// Nothing there: nothing to find, and that is known.
	if got := Walk(context.Background(), filepath.Join(dir, "absent")); !got.Complete || len(got.Entries) != 0 {
		t.Errorf("Walk(absent) = %+v, want complete and empty", got)
	}
	if got := Walk(context.Background(), "relative"); got.Complete {
		t.Errorf("Walk(relative) = %+v, want incomplete", got)
	}
}

// TestWalkBounds: a walk cut by its count, its bytes or its deadline is
// incomplete, and so is one that cannot read a directory.
func TestWalkBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := 0; i <= MaxEntries; i++ {
		if err := os.WriteFile(filepath.Join(dir, "f"+itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := Walk(context.Background(), dir)
	if got.Complete || len(got.Entries) != MaxEntries {
		t.Errorf("Walk of %d files: complete %v with %d entries, want incomplete with %d", MaxEntries+1, got.Complete, len(got.Entries), MaxEntries)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if got := Walk(ctx, dir); got.Complete {
		t.Error("Walk past its deadline is complete")
	}
	long := t.TempDir()
	name := strings.Repeat("n", 240)
	for i := 0; i*240 <= MaxBytes; i++ {
		if err := os.WriteFile(filepath.Join(long, name+itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Walk(context.Background(), long); got.Complete {
		t.Errorf("Walk of more than %d bytes of names is complete", MaxBytes)
	}
	if os.Geteuid() != 0 {
		locked := t.TempDir()
		write(t, locked, "sub/x")
		if err := os.Chmod(filepath.Join(locked, "sub"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(locked, "sub"), 0o755) })
		if got := Walk(context.Background(), locked); got.Complete {
			t.Error("Walk of a tree with an unreadable directory is complete")
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r  Report
		ok bool
	}{
		{Report{Entries: []string{"a", "b/c", "."}}, true},
		{Report{Entries: []string{""}}, false},
		{Report{Entries: []string{"/etc/passwd"}}, false},
		{Report{Entries: []string{"a\x00b"}}, false},
		{Report{Entries: []string{strings.Repeat("a", MaxEntryBytes+1)}}, false},
		{Report{Entries: make([]string, MaxEntries+1)}, false},
	} {
		if err := c.r.Check(); (err == nil) != c.ok {
			t.Errorf("Check(%d entries) = %v, want ok %v", len(c.r.Entries), err, c.ok)
		}
	}
}

func TestRoot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ path, cwd, want string }{
		{"", "/w", "/w"}, {"src", "/w", "/w/src"}, {"/x/", "/w", "/x"}, {"src", "", ""}, {"", "rel", ""},
	} {
		if got := Root(c.path, c.cwd); got != c.want {
			t.Errorf("Root(%q, %q) = %q, want %q", c.path, c.cwd, got, c.want)
		}
	}
}
