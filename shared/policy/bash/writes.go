package bash

import (
	"fmt"
	"path"
	"strings"
)

// Target is a path a command line may write, as far as the analysis can
// tell from the line's words.
type Target struct {
	// Text is the path's text: the literal parts of the word (for a word
	// with an expansion, what follows it: $HOME/.bashrc is "/.bashrc"
	// with Partial set).
	Text string
	// Pattern: the word is an unquoted glob pattern (or starts with ~),
	// so the shell chooses the names.
	Pattern bool
	// Partial: part of the word is known only at run time; Text is its
	// literal tail, which may be anywhere.
	Partial bool
	// Operand: the target is a command's word, not a redirection's (a
	// word HEAD of git reset is a revision).
	Operand bool
}

// inDir records a redirection target relative to the directory literal cd
// words moved to, or as a tail at an unknown place when a cd went somewhere
// known only at run time.
func (n *normalizer) inDir(w word) word {
	if w.dynamic && !w.glob || strings.HasPrefix(w.text, "/") || strings.HasPrefix(w.text, "~") {
		return w
	}
	if n.anyDir {
		// Its directory is unknown: only its literal tail is known.
		w.dynamic, w.glob = true, false
		return w
	}
	if n.dir != "" {
		w.text = path.Join(n.dir, w.text)
	}
	return w
}

// Writes returns the paths the line may write: output redirection targets
// and every word of a command the read-only catalogue does not accept
// (which of its words are outputs is not known, so each is taken as one:
// cp a .git/hooks/x, tee ~/.bashrc, sed -i ... .gitattributes, dd
// of=...), with values after '=' and attached to a short option. A line
// that also writes files no word names (an archive extracted, a patch
// applied, git config setting a key, npm config set) has unseen set,
// naming the program and what it writes. Words of catalogue commands are
// not writes: those commands cannot write.
func (a *Analysis) Writes() (targets []Target, unseen string) {
	a.writesOnce.Do(func() { a.writes, a.unseen = a.computeWrites() })
	return a.writes, a.unseen
}

func (a *Analysis) computeWrites() ([]Target, string) {
	if ok, _ := a.ReadOnly(); ok {
		// A plain line of catalogue commands writes nothing: the strict
		// reading admits no redirection but to /dev/null.
		return nil, ""
	}
	var out []Target
	unseen := a.configWrite
	add := func(w word, dir string) { out = append(out, wordTargets(w, dir)...) }
	for _, w := range a.redirected {
		add(w, "")
	}
	var texts []string
	var glob []bool
	for _, c := range a.loose {
		if len(c.words) == 0 || c.words[0].dynamic {
			continue
		}
		prog := c.words[0].text
		if f, ok := treeWriters[prog]; ok && f(c.words) && unseen == "" {
			unseen = fmt.Sprintf("%s writes files whose names no word of the line shows", quoteWord(prog))
		}
		if why := configWriter(c.words); why != "" && unseen == "" {
			unseen = why
		}
		// Judged with its patterns read as plain operands: whether ls
		// writes does not depend on what * expands to.
		texts, glob = texts[:0], glob[:0]
		for _, w := range c.words {
			t := w.text
			if w.dynamic {
				t = "x"
			}
			texts = append(texts, t)
			glob = append(glob, false)
		}
		if catalogueSafe(texts, glob, 0) == "" {
			continue
		}
		for _, w := range c.words[1:] {
			if c.anyDir && !w.dynamic && !strings.HasPrefix(w.text, "/") {
				w.dynamic = true // only its tail is known
			}
			for _, t := range wordTargets(w, c.dir) {
				t.Operand = true
				out = append(out, t)
			}
		}
	}
	return out, unseen
}

// compressed are suffixes a decompressor drops to name what it writes
// (gunzip .bashrc.gz writes .bashrc).
var compressed = []string{".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".br", ".Z", ".z", ".lz", ".tgz"}

// wordTargets reads one word as the paths it may name.
func wordTargets(w word, dir string) []Target {
	if w.text == "" {
		return nil
	}
	if !strings.ContainsAny(w.text, "=.") && w.text[0] != '-' && dir == "" {
		// The usual word: itself, and nothing else it could name.
		return []Target{{Text: w.text, Pattern: w.glob, Partial: w.dynamic && !w.glob}}
	}
	texts := []string{w.text}
	if _, v, ok := strings.Cut(w.text, "="); ok {
		texts = append(texts, v) // --output=x, of=x
	}
	if len(w.text) > 2 && w.text[0] == '-' && w.text[1] != '-' {
		texts = append(texts, w.text[2:]) // -ox, -t.git/hooks
	}
	var out []Target
	for _, t := range texts {
		if t == "" {
			continue
		}
		for _, suf := range compressed {
			if s, ok := strings.CutSuffix(t, suf); ok && s != "" {
				texts = append(texts, s)
				break
			}
		}
	}
	for _, t := range texts {
		if t == "" {
			continue
		}
		tg := Target{Text: t, Pattern: w.glob, Partial: w.dynamic && !w.glob}
		if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "~") && dir != "" && !tg.Partial {
			tg.Text = path.Join(dir, t)
		}
		out = append(out, tg)
	}
	return out
}

// configWriter says why a command writes a protected configuration file
// no word names ("" when it does not).
func configWriter(words []word) string {
	for _, cw := range configWriters {
		if len(words) < len(cw.words) {
			continue
		}
		hit := true
		for i, t := range cw.words {
			if words[i].dynamic || words[i].text != t {
				hit = false
				break
			}
		}
		if !hit {
			continue
		}
		if len(cw.reads) > 0 {
			reads := false
			for _, w := range words[len(cw.words):] {
				for _, r := range cw.reads {
					if !w.dynamic && w.text == r {
						reads = true
					}
				}
			}
			if reads {
				continue
			}
		}
		return fmt.Sprintf("`%s` writes %s", strings.Join(cw.words, " "), cw.file)
	}
	return ""
}
