// Package workspace fetches the commit a run froze and packs it as the
// archive its runner unpacks: the credentialed git fetch happens here, on
// the control plane, so no git credential ever enters a sandbox.
//
// Guarantees:
//   - Exactly the frozen commit: the fetch wants that object id and nothing
//     else (a shallow fetch of one commit), and the archive is built from
//     the commit object whose id was asked, so a ref moved by a later push
//     cannot change what the run reviews.
//   - Only what a checkout would write: regular files, executables and
//     symbolic links (as links, with their target as text), each at a
//     local, clean path with no ".git" component; a tree holding anything
//     else unsafe to unpack (an absolute path, "..", a ".git" entry) is
//     refused whole rather than filtered, because unknown means not allowed.
//     Submodules are not followed.
//   - Bounded: at most MaxFiles entries and MaxBytes of file content; past
//     either the fetch fails with ErrTooLarge.
//   - The archive is deterministic for a commit (entry order is the tree's,
//     times are the commit's), so its digest names its content.
package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Bounds of one workspace.
const (
	MaxFiles = 50000
	MaxBytes = 256 << 20
)

// Errors of a fetch.
var (
	// ErrTooLarge: the commit holds more than MaxFiles entries or MaxBytes.
	ErrTooLarge = errors.New("workspace: the commit is too large to serve")
	// ErrUnsafeTree: the commit's tree holds an entry no checkout may write.
	ErrUnsafeTree = errors.New("workspace: the commit's tree holds a path that is not safe to unpack")
	// ErrFetch: the git host refused or failed the fetch, or does not have
	// the commit.
	ErrFetch = errors.New("workspace: fetch failed")
)

// shaPattern is a full SHA-1 object id, as GitHub's payload names a head.
var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Source is where a commit is fetched from and with what.
type Source struct {
	// URL is the repository's smart-HTTP URL ("https://github.com/o/r.git").
	URL string
	// Username and Password authenticate the fetch (an installation token
	// is the password of user "x-access-token").
	Username, Password string
	// Commit is the frozen commit's full object id.
	Commit string
}

// Archive is a packed commit.
type Archive struct {
	Commit string
	Files  int
	// Gzip is a gzip-compressed tar of the commit's tree.
	Gzip []byte
}

// Fetch fetches exactly src.Commit and packs its tree.
func Fetch(ctx context.Context, src Source) (Archive, error) {
	if !shaPattern.MatchString(src.Commit) {
		return Archive{}, fmt.Errorf("workspace: %q is not a full commit id", src.Commit)
	}
	st := memory.NewStorage()
	remote := git.NewRemote(st, &config.RemoteConfig{Name: "origin", URLs: []string{src.URL}})
	opts := &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec(src.Commit + ":refs/heads/workspace")},
		Depth:      1,
		Tags:       git.NoTags,
	}
	if src.Password != "" {
		opts.Auth = &githttp.BasicAuth{Username: src.Username, Password: src.Password}
	}
	if err := remote.FetchContext(ctx, opts); err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		// go-git's messages name the URL, never the password; still, say
		// only what kind of failure it was.
		return Archive{}, fmt.Errorf("%w: %s", ErrFetch, fetchKind(err))
	}
	commit, err := object.GetCommit(st, plumbing.NewHash(src.Commit))
	if err != nil {
		return Archive{}, fmt.Errorf("%w: the host did not send commit %s", ErrFetch, src.Commit)
	}
	return pack(commit)
}

// fetchKind names a fetch failure without quoting it.
func fetchKind(err error) string {
	switch {
	case errors.Is(err, git.ErrExactSHA1NotSupported):
		return "the git host does not serve a commit by id"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timed out"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "authentication required"), strings.Contains(msg, "authorization failed"):
		return "the git host refused the credential"
	case strings.Contains(msg, "repository not found"):
		return "the git host has no such repository"
	}
	return "the git host failed"
}

// pack writes commit's tree as a gzip'd tar.
func pack(commit *object.Commit) (Archive, error) {
	tree, err := commit.Tree()
	if err != nil {
		return Archive{}, fmt.Errorf("%w: the commit's tree is missing", ErrFetch)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	when := commit.Committer.When.UTC()
	files, total := 0, int64(0)
	err = tree.Files().ForEach(func(f *object.File) error {
		if !safePath(f.Name) {
			return ErrUnsafeTree
		}
		files++
		total += f.Size
		if files > MaxFiles || total > MaxBytes {
			return ErrTooLarge
		}
		hdr := &tar.Header{Name: f.Name, ModTime: when, Format: tar.FormatPAX}
		switch f.Mode {
		case filemode.Regular, filemode.Deprecated:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, f.Size
		case filemode.Executable:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o755, f.Size
		case filemode.Symlink:
			target, err := f.Contents()
			if err != nil {
				return fmt.Errorf("%w: read link %s", ErrFetch, f.Name)
			}
			hdr.Typeflag, hdr.Mode, hdr.Linkname = tar.TypeSymlink, 0o777, target
		default:
			return ErrUnsafeTree
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		r, err := f.Reader()
		if err != nil {
			return fmt.Errorf("%w: read %s", ErrFetch, f.Name)
		}
		defer r.Close()
		_, err = io.Copy(tw, r)
		return err
	})
	if err != nil && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrFetch) && !errors.Is(err, ErrUnsafeTree) {
		// go-git's walker refuses ".git", ".." and "." entries itself, in
		// its own words: the same refusal.
		err = fmt.Errorf("%w: %v", ErrUnsafeTree, err)
	}
	if err != nil {
		return Archive{}, err
	}
	if err := tw.Close(); err != nil {
		return Archive{}, err
	}
	if err := zw.Close(); err != nil {
		return Archive{}, err
	}
	return Archive{Commit: commit.Hash.String(), Files: files, Gzip: buf.Bytes()}, nil
}

// safePath reports whether a tree path is one a checkout writes inside the
// workspace: relative, clean, no "..", no empty component, no ".git"
// component in any letter case (case-insensitive file systems), no NUL or
// backslash (a separator on other systems).
func safePath(p string) bool {
	if p == "" || path.Clean(p) != p || path.IsAbs(p) || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || part == "" || strings.EqualFold(part, ".git") {
			return false
		}
	}
	return true
}
