package policy

import (
	"errors"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// pathGlob is a compiled path matcher (doublestar syntax: '*' stays within a
// path segment, '**' crosses segments).
type pathGlob struct {
	pattern string
	// relative holds, for an absolute pattern, the relative patterns a
	// relative path could be matched against when the working directory
	// is unknown: "/repo/secrets/**" -> "repo/secrets/**", "secrets/**".
	// Only the deny side uses them.
	relative []string
}

func compilePathGlob(p string) (*pathGlob, error) {
	if p == "" {
		return nil, errors.New("empty path glob")
	}
	if !doublestar.ValidatePattern(p) {
		return nil, errors.New("bad glob " + `"` + p + `"`)
	}
	g := &pathGlob{pattern: p}
	if strings.HasPrefix(p, "/") {
		segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i := range segs {
			rest := segs[i:]
			if !hasLiteralSegment(rest) {
				break
			}
			g.relative = append(g.relative, strings.Join(rest, "/"))
			if strings.ContainsAny(segs[i], `*?[{\`) {
				break // cannot strip a non-literal segment
			}
		}
	}
	return g, nil
}

func hasLiteralSegment(segs []string) bool {
	for _, s := range segs {
		if s != "" && !strings.ContainsAny(s, `*?[{\`) {
			return true
		}
	}
	return false
}

// strictPath is the allow-side reading of a path: cleaned, and refused when
// it climbs out of the working directory with "..".
func strictPath(p string) (string, bool) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", false
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

func (g *pathGlob) matchStrict(cleaned string) bool {
	return doublestar.MatchUnvalidated(g.pattern, cleaned)
}

// matchLoose is the deny-side reading. The working directory is unknown, so
// a path matches when it could name something the pattern covers: the
// cleaned path itself; with leading ".." segments removed; any trailing run
// of its segments for a relative pattern ("/home/u/repo/secrets/k" matches
// "secrets/**"); and, for an absolute pattern, a relative path against the
// pattern's trailing segments.
func (g *pathGlob) matchLoose(p string) bool {
	c := path.Clean(p)
	if doublestar.MatchUnvalidated(g.pattern, c) {
		return true
	}
	for c == ".." || strings.HasPrefix(c, "../") {
		c = strings.TrimPrefix(strings.TrimPrefix(c, ".."), "/")
	}
	abs := strings.HasPrefix(g.pattern, "/")
	if !abs {
		for s := strings.TrimPrefix(c, "/"); s != ""; {
			if doublestar.MatchUnvalidated(g.pattern, s) {
				return true
			}
			i := strings.IndexByte(s, '/')
			if i < 0 {
				break
			}
			s = s[i+1:]
		}
		return false
	}
	if strings.HasPrefix(c, "/") {
		return false
	}
	for _, rel := range g.relative {
		if doublestar.MatchUnvalidated(rel, c) {
			return true
		}
	}
	return false
}
