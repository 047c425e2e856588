package policy

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// A Glob cannot be narrowed: it has no field to leave paths out. So the
// runner reports what exists under the directory it walks (Env.Report,
// package tree), and a deny or require_approval rule that reaches the Glob
// only through that tree decides only if the report shows an existing path
// the rule matches and the pattern selects. A report that is missing, cut
// at its bound, or that cannot be placed (a pattern that is absolute or
// climbs out with "..", no directory to join it to) settles nothing: the
// rule decides as it reads, which for a tree that may hold a denied path
// is deny.
//
// The report comes from the runner, which a hostile sandbox controls: a
// report saying "nothing there" turns such a deny into an allow. That is
// accepted for Glob alone, because a Glob returns names, never contents,
// and the sandbox could list the same tree itself (find, ls, its own
// code). No other tool's decision reads the report: a Read or a Grep
// (which returns contents) is judged, and narrowed, as if there were
// none, so the report can never widen what the agent reads.

// globFinding is what the report says of one rule a Glob reaches.
type globFinding struct {
	// clear: the report is complete and shows nothing the rule matches
	// that the pattern selects; the rule does not decide the call.
	clear bool
	// glob is the rule's glob an existing path matched, hits how many
	// such paths the report shows.
	glob string
	hits int
	// why says, when the rule decides, why the search could reach it.
	why string
}

// globReport reads the report for rule r, which matches the Glob call
// loosely (matchLoose).
func (c *call) globReport(r *rule) globFinding {
	const noExclusion = "Glob has no way to exclude paths"
	if g := c.directGlob(r); g != "" {
		return globFinding{glob: g, why: "the path or pattern it names is such a path"}
	}
	rep := c.env.Report
	switch {
	case rep == nil:
		return globFinding{why: noExclusion + ", and the call came without a report of what exists under the searched directory, so the gate cannot know whether such a path does"}
	case !rep.Complete:
		return globFinding{why: noExclusion + ", and the sandbox's report of what exists under the searched directory is incomplete (cut at its bound, or a directory could not be read), so the gate cannot know whether such a path does"}
	}
	pat, roots, ok := c.globWalk()
	if !ok {
		return globFinding{why: noExclusion + ", and its pattern or directory reaches outside what the sandbox's report covers"}
	}
	f := globFinding{}
	for _, e := range rep.Entries {
		if !globSelects(pat, e) {
			continue
		}
		for _, root := range roots {
			if g := r.hitGlob(pathValue{text: path.Join(root, e)}, &c.env); g != "" {
				if f.hits == 0 {
					f.glob = g
				}
				f.hits++
				break
			}
		}
	}
	if f.hits == 0 {
		return globFinding{clear: true}
	}
	f.why = fmt.Sprintf("%s, and the sandbox reports %d existing %s under the searched directory that the glob matches and the pattern selects", noExclusion, f.hits, plural(f.hits, "path", "paths"))
	return f
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// globWalk returns the Glob's pattern and the directories the report's
// entries are relative to (the given and the resolved path, else the
// working directory); ok is false when the report cannot be placed: no
// string pattern, a pattern that is absolute, starts at a home or a
// variable, or climbs with "..", or no absolute directory.
func (c *call) globWalk() (pat string, roots []string, ok bool) {
	m, _ := c.input.(map[string]any)
	pat, isString := m["pattern"].(string)
	if !isString || pat == "" || strings.ContainsAny(pat[:1], `/~$\`) || strings.Contains(pat, `\`) {
		return "", nil, false
	}
	for _, seg := range strings.Split(pat, "/") {
		if seg == ".." {
			return "", nil, false
		}
	}
	base := c.env.Cwd
	if base == "" {
		base = c.env.Workspace
	}
	dir := base
	if raw, present := m["path"]; present {
		s, isString := raw.(string)
		if !isString || s == "" {
			return "", nil, false
		}
		dir = absolute(s, base)
		if r := c.env.Resolved["path"]; r != "" {
			roots = append(roots, absolute(r, base))
		}
	}
	if !strings.HasPrefix(dir, "/") {
		return "", nil, false
	}
	return pat, append(roots, path.Clean(dir)), true
}

// globSelects reports whether ripgrep's glob pat (Claude Code's Glob runs
// rg --files --glob pat) may select the report's entry: a glob without a
// '/' matches a name at any depth, one with a '/' from the searched
// directory, in any case (rg matches in one case; folding both only
// selects more). A glob starting with '!' selects every entry but some, a
// glob that does not compile anything; the entry "." is the searched path
// itself, a file.
func globSelects(pat, entry string) bool {
	if strings.HasPrefix(pat, "!") || entry == "." {
		return true
	}
	e := foldCase(strings.TrimPrefix(entry, "./"))
	for _, p := range append(globPieces(pat), pat) {
		if strings.HasPrefix(p, "!") {
			return true
		}
		p = strings.TrimPrefix(foldCase(p), "./")
		if !strings.Contains(p, "/") {
			p = "**/" + p
		}
		if ok, err := doublestar.Match(p, e); ok || err != nil {
			return true
		}
	}
	return false
}
