package policy

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"unicode"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// Writes to paths that programs obey (bash.ProtectedPaths: git's config,
// attributes and hooks, shell rc files, .claude/**, ...). The read-only
// catalogue lets an allow rule run git diff or rg because their words
// cannot write or run anything; a planted .git/config or .gitattributes
// makes them run anything, so writing one is as good as executing code.
// Such a write is allowed only by an allow rule whose path glob names the
// file (holds the entry's name as a literal segment: ".git/hooks/**" names
// .git, "/work/**" names nothing); a broad rule or a default allow does not
// cover it, and a Bash line that may write one is never allowed. A write
// is an execute, not a read: the trust tier never lets a read_only run
// write a file, and Writes only reports lines the catalogue cannot show
// to be read-only.

// writeTools are the file tools that write their path.
var writeTools = map[string]bool{"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true}

type protectedGlob struct {
	bash.Protected
	glob *pathGlob
	name string // Name, folded
}

// protectedSet is the compiled list, and its entries by folded name: a path
// none of whose segments is an entry's name matches no entry, which is
// what almost every write's path finds out with a few map lookups.
type protectedSet struct {
	all    []protectedGlob
	byName map[string][]int
}

var protectedGlobs = sync.OnceValue(func() *protectedSet {
	set := &protectedSet{byName: map[string][]int{}}
	for _, p := range bash.ProtectedPaths() {
		g, err := compilePathGlob(p.Glob)
		if err != nil {
			continue // the bash package's test compiles every entry
		}
		name := foldCase(p.Name)
		set.byName[name] = append(set.byName[name], len(set.all))
		set.all = append(set.all, protectedGlob{Protected: p, glob: g, name: name})
	}
	return set
})

// protectedHit returns the entry a path may name, or nil. The path is read
// the way a file system may read it: case folded; each segment without
// trailing dots and spaces (Windows drops them: ".git." is .git) and
// without the code points HFS+ ignores (".g\u200cit" is .git); an 8.3
// short name (GIT~1) may be any name, so it is a pattern segment.
func protectedHit(text string, pattern bool) *protectedGlob {
	return protectedHitIn(text, pattern, false, false)
}

// protectedHitIn is protectedHit for a Bash word: shell marks a shell
// pattern (see mayReachIn), bareOperand a command's word without a
// directory (see bash.Protected.Revision).
func protectedHitIn(text string, pattern, shell, bareOperand bool) *protectedGlob {
	if text == "" {
		return nil
	}
	text, short := fsForm(text)
	v := pathValue{text: text, pattern: pattern || short}
	folded := path.Clean(foldCase(text))
	set := protectedGlobs()
	if !v.pattern {
		// Only the entries named by one of the path's segments can match.
		for rest := folded; rest != ""; {
			seg := rest
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				seg, rest = rest[:i], rest[i+1:]
			} else {
				rest = ""
			}
			for _, i := range set.byName[seg] {
				g := &set.all[i]
				if bareOperand && g.Revision {
					continue
				}
				if g.glob.matchLoose(v, nil) {
					return g
				}
			}
		}
		return nil
	}
	for i := range set.all {
		g := &set.all[i]
		if bareOperand && g.Revision {
			continue
		}
		if shell && pattern {
			if g.glob.mayReachIn(folded, true) {
				return g
			}
			continue
		}
		if g.glob.matchLoose(v, nil) {
			return g
		}
	}
	return nil
}

// fsForm normalizes a path's segments as a case-insensitive or Windows file
// system may read them; short reports an 8.3 segment, made "*".
func fsForm(p string) (string, bool) {
	plain := true
	for i := 0; i < len(p); i++ {
		c := p[i]
		end := i+1 == len(p) || p[i+1] == '/'
		if c >= 0x80 || c == '~' || (c == '.' || c == ' ') && end {
			plain = false
			break
		}
	}
	if plain {
		return p, false
	}
	segs := strings.Split(p, "/")
	short := false
	for i, s := range segs {
		s = strings.Map(func(r rune) rune {
			if ignorable(r) {
				return -1
			}
			return r
		}, s)
		if s != "." && s != ".." {
			s = strings.TrimRight(s, ". ")
		}
		if shortName(s) {
			s, short = "*", true
		}
		segs[i] = s
	}
	return strings.Join(segs, "/"), short
}

// ignorable: code points HFS+ leaves out of a name when comparing (git's
// is_hfs_dotgit list), and other default-ignorable ones.
func ignorable(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return r >= 0x80 && unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// shortName: an NTFS 8.3 name's "~digits" (GIT~1, GI7EAB~1.CON).
func shortName(s string) bool {
	i := strings.IndexByte(s, '~')
	if i < 1 || i+1 >= len(s) {
		return false
	}
	j := i + 1
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	return j > i+1 && (j == len(s) || s[j] == '.')
}

// protectedWrite returns the protected entry a write tool's path (given,
// resolved or another reading of it) may name, once per evaluation.
func (c *call) protectedWrite() *protectedGlob {
	if c.protSet {
		return c.prot
	}
	c.protSet = true
	if !writeTools[c.tool] {
		return nil
	}
	vals, _ := c.pathValues()
	for _, v := range vals {
		if h := protectedHit(v.text, v.pattern); h != nil {
			c.prot = h
			c.Call.noGrant.Store(true)
			break
		}
	}
	return c.prot
}

// names reports whether one of the rule's path globs names the entry: has
// its name as a literal segment.
func (r *rule) names(h *protectedGlob) bool {
	for _, g := range r.paths {
		for _, seg := range strings.Split(g.lower, "/") {
			if seg == h.name {
				return true
			}
		}
	}
	return false
}

// bashProtectedWrite says why a Bash line may write a path a program
// obeys ("" when it may not).
func (c *call) bashProtectedWrite() string {
	a := c.bash()
	if a == nil {
		return ""
	}
	targets, unseen := a.Writes()
	if unseen != "" {
		return unseen + ", which may be a file a program obeys (git's configuration, a hook, a shell rc file, .claude/**)"
	}
	base := c.env.Cwd
	if base == "" {
		base = c.env.Workspace
	}
	for _, t := range targets {
		text := t.Text
		switch {
		case strings.HasPrefix(text, "~"):
			// ~ and ~user are a home directory the analysis does not
			// know: the rest is a path at an unknown place.
			_, text, _ = strings.Cut(text, "/")
		case t.Partial:
			text = strings.TrimLeft(text, "/")
		default:
			text = absolute(path.Clean(text), base)
		}
		bare := t.Operand && !strings.Contains(t.Text, "/")
		if h := protectedHitIn(text, t.Pattern, true, bare); h != nil {
			return fmt.Sprintf("it may write a path %s obeys (%s: %s)", h.Program, h.Glob, h.Why)
		}
	}
	return ""
}

// protectedDenial is the answer for a write to a protected path that no
// rule naming it allows, where the call would otherwise be allowed by the
// broad rule r (nil: by the default verdict).
func protectedWriteReason(h *protectedGlob, r *rule) string {
	by := "the default verdict allow"
	if r != nil {
		by = fmt.Sprintf("rule %q", r.id)
	}
	return fmt.Sprintf("the call writes a path %s obeys (%s: %s); %s does not name it, and only an allow rule whose path names %q allows writing it", h.Program, h.Glob, h.Why, by, h.Name)
}
