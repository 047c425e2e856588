// Package tree reports what exists under the directory a search walks, for
// a search that has no way to leave paths out (Claude Code's Glob): the
// runner walks the tree inside the sandbox and sends the report with its
// permission request, and the policy denies the search only if the report
// shows a path a deny rule matches (policy.Env.Report).
//
// The walk is bounded (MaxEntries names, MaxBytes of them, the caller's
// deadline, which a runner sets to MaxTime) and never follows a symbolic link below its root: a link is
// reported by its own name, as an entry, and nothing under it is walked.
// Claude Code's Glob (ripgrep's --files, without --follow) lists neither a
// link nor anything under one, so the report covers every name the Glob
// can return. A report that stopped at a bound, or that could not read a
// directory, is not Complete, and the policy then cannot know.
package tree

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// Bounds of a report. They are on the wire (the gate refuses a report
// with more entries or a longer entry): never raise them on one side only.
const (
	// MaxEntries is how many names one report holds.
	MaxEntries = 10000
	// MaxBytes is how many bytes of names one report holds, well inside a
	// permission request's 1 MiB body.
	MaxBytes = 512 << 10
	// MaxEntryBytes bounds one entry (PATH_MAX).
	MaxEntryBytes = 4096
	// MaxTime is how long a runner walks before it sends what it has as
	// incomplete (the hook and the Agent SDK adapter use it).
	MaxTime = 2 * time.Second
)

// Report is what exists under a searched directory: every name below it
// that is not a directory (files, links, anything else), relative to it,
// slash-separated, in lexical order. Complete says the walk saw all of
// it; an absent or false Complete means the report cannot clear anything.
type Report struct {
	Entries  []string `json:"entries"`
	Complete bool     `json:"complete"`
}

// errBound stops a walk that reached a bound.
var errBound = errors.New("tree: bound reached")

// Walk reports what exists under root, an absolute path, whose final
// symbolic links are followed (a search given a link to a directory
// searches that directory). A root that does not exist holds nothing: the
// report is complete and empty. ctx's deadline bounds the time.
func Walk(ctx context.Context, root string) Report {
	if !filepath.IsAbs(root) {
		return Report{}
	}
	real, err := filepath.EvalSymlinks(root)
	if errors.Is(err, fs.ErrNotExist) {
		return Report{Entries: []string{}, Complete: true}
	}
	if err != nil {
		return Report{}
	}
	rep := Report{Entries: []string{}, Complete: true}
	size := 0
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			rep.Complete = false // a directory it could not read
			return errBound
		}
		if ctx.Err() != nil {
			rep.Complete = false
			return errBound
		}
		if d.IsDir() {
			return nil
		}
		rel, rerr := filepath.Rel(real, p)
		if rerr != nil {
			rep.Complete = false
			return errBound
		}
		rel = filepath.ToSlash(rel)
		if len(rep.Entries) == MaxEntries || size+len(rel) > MaxBytes || len(rel) > MaxEntryBytes {
			rep.Complete = false
			return errBound
		}
		size += len(rel)
		rep.Entries = append(rep.Entries, rel)
		return nil
	})
	if err != nil && !errors.Is(err, errBound) {
		rep.Complete = false
	}
	return rep
}

// Check refuses a report the gate cannot read: too many entries, an empty,
// absolute or over-long entry, or one holding a NUL. It says nothing of
// whether the entries exist: the runner sends what it likes, and the policy
// reads a report only where that cannot widen a read (see policy.Env).
func (r *Report) Check() error {
	if len(r.Entries) > MaxEntries {
		return errors.New("at most 10000 entries")
	}
	for _, e := range r.Entries {
		if e == "" || len(e) > MaxEntryBytes || strings.HasPrefix(e, "/") || strings.IndexByte(e, 0) >= 0 {
			return errors.New("each entry must be a relative path of 1 to 4096 bytes")
		}
	}
	return nil
}

// Root is the directory a search with an optional path field walks: the
// path, made absolute against cwd, else cwd; "" when neither is absolute.
func Root(path, cwd string) string {
	switch {
	case filepath.IsAbs(path):
		return filepath.Clean(path)
	case path != "" && filepath.IsAbs(cwd):
		return filepath.Join(cwd, path)
	case path == "" && filepath.IsAbs(cwd):
		return filepath.Clean(cwd)
	}
	return ""
}
