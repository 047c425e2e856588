package policy

import (
	"errors"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// pathGlob is a compiled path matcher (doublestar syntax: '*' stays within a
// path segment, '**' crosses segments).
type pathGlob struct {
	pattern string
	// lower is the pattern case-folded: deny and require_approval match
	// case-insensitively, because /work/.ENV is /work/.env on macOS and
	// Windows file systems.
	lower string
	// relative holds, for an absolute pattern, the relative patterns a
	// relative path could be matched against when the working directory
	// is unknown: "/repo/secrets/**" -> "repo/secrets/**", "secrets/**".
	// Case-folded; only the deny side uses them.
	relative []string
	// lastLiteral is the pattern's last segment when it has no pattern
	// characters (".env" of "**/.env"), case-folded.
	lastLiteral string
}

const globMeta = `*?[{\`

func compilePathGlob(p string) (*pathGlob, error) {
	if p == "" {
		return nil, errors.New("empty path glob")
	}
	if !doublestar.ValidatePattern(p) {
		return nil, errors.New("bad glob " + `"` + p + `"`)
	}
	g := &pathGlob{pattern: p, lower: foldCase(p)}
	segs := strings.Split(strings.TrimPrefix(g.lower, "/"), "/")
	if last := segs[len(segs)-1]; last != "" && !strings.ContainsAny(last, globMeta) {
		g.lastLiteral = last
	}
	if strings.HasPrefix(p, "/") {
		for i := range segs {
			rest := segs[i:]
			if !hasLiteralSegment(rest) {
				break
			}
			g.relative = append(g.relative, strings.Join(rest, "/"))
			if strings.ContainsAny(segs[i], globMeta) {
				break // cannot strip a non-literal segment
			}
		}
	}
	return g, nil
}

// mayReach reports whether some path the search pattern pat (folded and
// cleaned) selects could match the glob: the two are walked segment by
// segment, '**' standing for any run of segments, and a segment with a
// pattern character on both sides is taken to match. A relative glob
// matches at any depth, and a relative pattern searches an unknown
// directory, so each is read with a leading '**'.
func (g *pathGlob) mayReach(pat string) bool { return g.mayReachIn(pat, false) }

// mayReachIn is mayReach; with shell, pat is a shell pattern: its pattern
// segments never match a name with a leading dot (bash without dotglob),
// ** is *, and a relative pattern is relative to the known working
// directory, not at any depth; a segment of wildcards only matches no
// literal segment of the glob.
func (g *pathGlob) mayReachIn(pat string, shell bool) bool {
	a := strings.Split(g.lower, "/")
	if g.isRelative() {
		a = append([]string{"**"}, a...)
	}
	b := strings.Split(pat, "/")
	if shell {
		for i, s := range b {
			if s == "**" {
				b[i] = "*"
			}
		}
	} else if !strings.HasPrefix(pat, "/") {
		b = append([]string{"**"}, b...)
	}
	r := reach{a: a, b: b, shell: shell, seen: make([][]bool, len(a)+1)}
	for i := range r.seen {
		r.seen[i] = make([]bool, len(b)+1)
	}
	return r.walk(0, 0)
}

// reach walks a glob's segments (a) against a search pattern's (b).
type reach struct {
	a, b  []string
	shell bool
	// seen[i][j]: a[i:] against b[j:] was tried and failed.
	seen [][]bool
}

func (r *reach) walk(i, j int) bool {
	if r.seen[i][j] {
		return false
	}
	r.seen[i][j] = true
	switch {
	case i < len(r.a) && r.a[i] == "**":
		return r.walk(i+1, j) || j < len(r.b) && r.walk(i, j+1)
	case j < len(r.b) && r.b[j] == "**":
		return r.walk(i, j+1) || i < len(r.a) && r.walk(i+1, j)
	case i == len(r.a) || j == len(r.b):
		return i == len(r.a) && j == len(r.b)
	}
	if r.shell && shellMisses(r.a[i], r.b[j]) {
		return false
	}
	return segmentsMayMatch(r.a[i], r.b[j]) && r.walk(i+1, j+1)
}

// shellMisses: a shell pattern segment y does not reach the literal glob
// segment x: it does not reach a dot file, and one of wildcards only (*,
// ?) names whatever is in a directory the other segments name, not this
// file in particular.
func shellMisses(x, y string) bool {
	if !strings.ContainsAny(y, globMeta) || strings.ContainsAny(x, globMeta) {
		return false
	}
	return strings.HasPrefix(x, ".") && !strings.HasPrefix(y, ".") || strings.Trim(y, "*?") == ""
}

// segmentsMayMatch: two path segments, either of which may be a pattern,
// could name the same file.
func segmentsMayMatch(x, y string) bool {
	xp, yp := strings.ContainsAny(x, globMeta), strings.ContainsAny(y, globMeta)
	switch {
	case xp && yp:
		// *.pem and *.md name no file in common; two patterns that are
		// each one * and a literal suffix (or prefix) are told apart,
		// any other pair is taken to match.
		if a, b, ok := affixes(x, y, strings.HasPrefix); ok {
			return strings.HasSuffix(a, b) || strings.HasSuffix(b, a)
		}
		if a, b, ok := affixes(x, y, strings.HasSuffix); ok {
			return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
		}
		return true
	case xp:
		ok, err := doublestar.Match(x, y)
		return ok || err != nil
	case yp:
		ok, err := doublestar.Match(y, x)
		return ok || err != nil
	}
	return x == y
}

// affixes returns the literal parts of two patterns that are each a single
// * at the end has checks (strings.HasPrefix: "*.pem") and a literal rest.
func affixes(x, y string, has func(s, prefix string) bool) (string, string, bool) {
	cut := func(s string) (string, bool) {
		if !has(s, "*") {
			return "", false
		}
		rest := strings.TrimPrefix(s, "*")
		if len(rest) == len(s) {
			rest = strings.TrimSuffix(s, "*")
		}
		return rest, rest != "" && !strings.ContainsAny(rest, globMeta)
	}
	a, ok1 := cut(x)
	b, ok2 := cut(y)
	return a, b, ok1 && ok2
}

// foldCase folds a path for the deny side's case-insensitive match: upper
// then lower case, so that the characters a file system folds to an ASCII
// letter (ſ to s, the Kelvin sign to k) match it too.
func foldCase(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.ToLower(strings.ToUpper(s))
		}
	}
	return strings.ToLower(s) // ASCII: no allocation when already lower case
}

// isRelative reports whether the glob is relative (resolved against a
// run's workspace).
func (g *pathGlob) isRelative() bool { return !strings.HasPrefix(g.pattern, "/") }

// unreachableWithoutWorkspace reports whether a relative glob, read as a
// rule of verdict v reads it, fails to match an absolute path it names
// (a sample path of its own shape under /work) when the run has no
// workspace. It asks the very matcher the rule's verdict uses, so a
// warning about it says what the match does.
func (g *pathGlob) unreachableWithoutWorkspace(v Verdict) bool {
	abs := pathValue{text: "/work/" + samplePath(g.pattern)}
	if v == VerdictAllow {
		return !g.matchStrict(abs, &Env{})
	}
	return !g.matchLoose(abs, &Env{})
}

// samplePath is a path a glob matches, its wildcards filled in with "x"
// ("**/" with nothing, a class with its first character), for asking the
// matchers what they do with a path of the glob's shape.
func samplePath(glob string) string {
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			if strings.HasPrefix(glob[i:], "**/") {
				i += 2
				continue
			}
			for i+1 < len(glob) && glob[i+1] == '*' {
				i++
			}
			b.WriteByte('x')
		case '?':
			b.WriteByte('x')
		case '[':
			end, err := classEnd(glob, i)
			if err != nil {
				b.WriteByte(c)
				continue
			}
			class := glob[i+1 : end]
			if class != "" && (class[0] == '!' || class[0] == '^') {
				b.WriteByte('x') // a negated class: x, unless it excludes x
			} else if class != "" {
				b.WriteByte(class[0])
			}
			i = end
		case '{':
			// The first alternative of a {a,b} group.
			end := strings.IndexByte(glob[i:], '}')
			if end < 0 {
				b.WriteByte(c)
				continue
			}
			alt, _, _ := strings.Cut(glob[i+1:i+end], ",")
			b.WriteString(samplePath(alt))
			i += end
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteByte(glob[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func hasLiteralSegment(segs []string) bool {
	for _, s := range segs {
		if s != "" && !strings.ContainsAny(s, globMeta) {
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

// matchStrict is the allow-side reading of one path of a call. A relative
// glob with a workspace covers paths under the workspace. A pattern value
// (Glob's pattern, Grep's glob) is inside only when the glob allows the
// whole tree the pattern searches ("dir/**" covering its literal
// directory), and never when it climbs with "..".
func (g *pathGlob) matchStrict(v pathValue, env *Env) bool {
	if v.pattern {
		return g.coversPattern(v.text, env)
	}
	cleaned, ok := strictPath(v.text)
	if !ok {
		return false
	}
	return g.matchStrictPath(cleaned, env)
}

func (g *pathGlob) matchStrictPath(cleaned string, env *Env) bool {
	if g.isRelative() && env.Workspace != "" && strings.HasPrefix(cleaned, "/") {
		if cleaned == path.Clean(env.Workspace) {
			// The workspace itself (a search of its root) is covered
			// only by its whole tree.
			return g.pattern == "**"
		}
		rel, ok := under(cleaned, env.Workspace)
		if !ok {
			return false
		}
		return doublestar.MatchUnvalidated(g.pattern, rel)
	}
	return doublestar.MatchUnvalidated(g.pattern, cleaned)
}

// under returns p relative to dir when p is strictly inside dir.
func under(p, dir string) (string, bool) {
	dir = path.Clean(dir)
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), p != "/"
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	return rest, ok && rest != ""
}

func (g *pathGlob) coversPattern(pat string, env *Env) bool {
	if strings.IndexByte(pat, 0) >= 0 {
		return false
	}
	segs := strings.Split(pat, "/")
	static := make([]string, 0, len(segs))
	for _, s := range segs {
		if s == ".." {
			return false
		}
		if strings.ContainsAny(s, globMeta) {
			break
		}
		static = append(static, s)
	}
	if len(static) == len(segs) {
		// No pattern characters: an ordinary path.
		cleaned, ok := strictPath(pat)
		return ok && g.matchStrictPath(cleaned, env)
	}
	tree, ok := strings.CutSuffix(g.pattern, "/**")
	if g.pattern == "**" && env.Workspace != "" {
		// The workspace's whole tree: a pattern searching from inside it.
		d := path.Clean(strings.Join(static, "/"))
		return d == path.Clean(env.Workspace) || strings.HasPrefix(d, path.Clean(env.Workspace)+"/")
	}
	if !ok {
		return false
	}
	dir := strings.Join(static, "/")
	if dir == "" && strings.HasPrefix(pat, "/") {
		dir = "/"
	}
	sub := &pathGlob{pattern: tree}
	// The tree is covered when the literal directory, or one of its
	// ancestors, is the glob's tree root.
	for d := path.Clean(dir); ; d = path.Dir(d) {
		if tree == "" || sub.matchStrictPath(d, env) {
			return true
		}
		if d == "/" || d == "." || !strings.Contains(d, "/") {
			return false
		}
	}
}

// matchLoose is the deny-side reading, case-insensitive. The working
// directory may be unknown, so a path matches when it could name something
// the pattern covers: the cleaned path itself; with leading ".." segments
// removed; any trailing run of its segments for a relative pattern
// ("/home/u/repo/secrets/k" matches "secrets/**"); and, for an absolute
// pattern, a relative path against the pattern's trailing segments. A
// pattern value matches when the glob matches its text, or when its last
// segment could name the file the glob's last segment names ("*.env" could
// be ".env").
func (g *pathGlob) matchLoose(v pathValue, _ *Env) bool {
	c := path.Clean(foldCase(v.text))
	if v.pattern && g.mayReach(c) {
		return true
	}
	if v.pattern && g.lastLiteral != "" {
		last := c[strings.LastIndexByte(c, '/')+1:]
		if strings.ContainsAny(last, globMeta) && doublestar.MatchUnvalidated(last, g.lastLiteral) {
			return true
		}
	}
	if doublestar.MatchUnvalidated(g.lower, c) {
		return true
	}
	for c == ".." || strings.HasPrefix(c, "../") {
		c = strings.TrimPrefix(strings.TrimPrefix(c, ".."), "/")
	}
	if g.isRelative() {
		for s := strings.TrimPrefix(c, "/"); s != ""; {
			if doublestar.MatchUnvalidated(g.lower, s) {
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
