package workspace

import (
	"errors"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// hostileCommit writes, as a hostile pusher could with raw objects, a
// commit whose tree holds one entry named name (in a directory when dir is
// set) of the given mode.
func hostileCommit(t *testing.T, dir, name string, mode filemode.FileMode) *object.Commit {
	t.Helper()
	st := memory.NewStorage()
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := st.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	_, _ = w.Write([]byte("x"))
	_ = w.Close()
	bh, err := st.SetEncodedObject(blob)
	if err != nil {
		t.Fatal(err)
	}
	entryHash := bh
	if mode == filemode.Dir {
		entryHash = put(&object.Tree{Entries: []object.TreeEntry{{Name: "config", Mode: filemode.Regular, Hash: bh}}})
	}
	tree := put(&object.Tree{Entries: []object.TreeEntry{{Name: name, Mode: mode, Hash: entryHash}}})
	if dir != "" {
		tree = put(&object.Tree{Entries: []object.TreeEntry{{Name: dir, Mode: filemode.Dir, Hash: tree}}})
	}
	sig := object.Signature{Name: "x", Email: "x@example.invalid", When: time.Unix(0, 0)}
	ch := put(&object.Commit{Author: sig, Committer: sig, TreeHash: tree, Message: "x"})
	c, err := object.GetCommit(st, ch)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPackRefusesUnsafeTrees: a tree entry no checkout may write refuses
// the whole archive, whatever its depth or letter case.
func TestPackRefusesUnsafeTrees(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dir, name string
		mode      filemode.FileMode
	}{
		{"", ".git", filemode.Dir},
		{"", ".GIT", filemode.Dir},
		{"sub", ".Git", filemode.Dir},
		{"", "..", filemode.Regular},
		{"sub", "..", filemode.Regular},
		{"", ".", filemode.Regular},
		{"", `a\b`, filemode.Regular},
		{"", "sub", filemode.Submodule},
	} {
		c := hostileCommit(t, tc.dir, tc.name, tc.mode)
		if tc.mode == filemode.Submodule {
			// Submodules are skipped, not followed: nothing to unpack.
			a, err := pack(c)
			if err != nil || a.Files != 0 {
				t.Errorf("pack(submodule) = %d files, %v; want 0, nil", a.Files, err)
			}
			continue
		}
		if a, err := pack(c); !errors.Is(err, ErrUnsafeTree) {
			t.Errorf("pack(%q/%q) = %d files, %v; want ErrUnsafeTree", tc.dir, tc.name, a.Files, err)
		}
	}
	if a, err := pack(hostileCommit(t, "sub", "ok.txt", filemode.Regular)); err != nil || a.Files != 1 {
		t.Errorf("pack(sub/ok.txt) = %d files, %v; want 1, nil", a.Files, err)
	}
}
