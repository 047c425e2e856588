package review

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// A reviewer approves a Bash line faster than they read it. Danger names
// what in a line deserves a second look before the click: a line the
// analyser cannot read (opaque: it may do anything), and commands that
// destroy what they touch. It is a warning for a human, computed from the
// same parse the gate used, never a verdict: the policy decided already.

// Part is the part of a compound line that the rule asked about.
type Part struct {
	Index int    `json:"index"` // 1-based
	Of    int    `json:"of"`
	Text  string `json:"text"` // its words as the deny side reads them, for a renderer to escape
}

// bashDanger lists what deserves a second look in a Bash call's input:
// "opaque: <why>" first, then each destructive command once.
func bashDanger(t *policy.BashTrace) []string {
	if t == nil {
		return nil
	}
	var out []string
	if t.Opaque != "" {
		out = append(out, "opaque: "+t.Opaque)
	} else if !t.Parsed {
		out = append(out, "opaque: the line does not parse")
	}
	for _, words := range t.Normalized {
		if d := destructive(words); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// destructive names what a command destroys ("" when nothing known):
// recursive or forced removal, history rewritten or deleted on a remote,
// local work thrown away, disks and files overwritten.
func destructive(words []string) string {
	if len(words) == 0 {
		return ""
	}
	prog, args := words[0], words[1:]
	switch prog {
	case "rm":
		if hasFlag(args, "r", "R", "f", "--recursive", "--force") {
			return "destructive: rm removes recursively or by force"
		}
	case "git":
		if len(args) == 0 {
			return ""
		}
		sub, rest := args[0], args[1:]
		switch {
		case sub == "push" && (hasFlag(rest, "f", "d", "--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune") || slices.ContainsFunc(rest, func(a string) bool {
			return strings.HasPrefix(a, "+") || strings.HasPrefix(a, ":")
		})):
			return "destructive: git push rewrites or deletes the remote's history (a force push or a deletion)"
		case sub == "reset" && hasFlag(rest, "--hard", "--merge", "--keep"):
			return "destructive: git reset discards local changes"
		case sub == "clean" && hasFlag(rest, "f", "--force"):
			return "destructive: git clean deletes untracked files"
		case sub == "branch" && hasFlag(rest, "D", "--delete"):
			return "destructive: git branch deletes a branch"
		case (sub == "checkout" || sub == "restore") && slices.Contains(rest, "."):
			return "destructive: git " + sub + " discards local changes"
		}
	case "find":
		if slices.Contains(args, "-delete") {
			return "destructive: find -delete removes what it finds"
		}
	case "dd", "shred", "mkfs", "wipefs", "truncate":
		return "destructive: " + prog + " overwrites data in place"
	default:
		if strings.HasPrefix(prog, "mkfs.") {
			return "destructive: " + prog + " formats a device"
		}
	}
	return ""
}

// hasFlag reports whether args hold one of the flags: a one-letter name
// ("f") matches it in any cluster of short options (-rf, -fd), a name
// with dashes ("--force") matches it alone or with a value ("--force=").
func hasFlag(args []string, flags ...string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		for _, f := range flags {
			switch {
			case strings.HasPrefix(f, "--"):
				if a == f || strings.HasPrefix(a, f+"=") {
					return true
				}
			case len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.Contains(a[1:], f):
				return true
			}
		}
	}
	return false
}

// matchedPart finds the part of a compound Bash line that the rule ruleID
// answers when the policy judges it alone: the part that made the line
// ask. It is nil for a line of one part, or when no part alone matches.
func matchedPart(p *policy.Policy, env policy.Env, t *policy.BashTrace, ruleID string) *Part {
	if t == nil || ruleID == "" || len(t.Normalized) < 2 {
		return nil
	}
	for i, words := range t.Normalized {
		text := shellWords(words)
		if d := p.EvaluateIn(env, "Bash", map[string]any{"command": text}); d.RuleID == ruleID {
			return &Part{Index: i + 1, Of: len(t.Normalized), Text: text}
		}
	}
	return nil
}

// shellWords joins words into a line the shell reads back as the same
// words: each that is not plain is single-quoted.
func shellWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		plain := w != ""
		for _, c := range w {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=:,+@%", c)) {
				plain = false
				break
			}
		}
		if plain {
			out[i] = w
		} else {
			out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// grantCovers says, for a rule whose prefixes reach git push, what
// "approve for run" lets through later: every push the rule asks about,
// force pushes and pushes to protected branches among them. "" for any
// other rule.
func grantCovers(rule json.RawMessage) string {
	var r policy.Rule
	if json.Unmarshal(rule, &r) != nil || r.Match == nil {
		return ""
	}
	for _, p := range r.Match.CommandPrefix {
		if f := strings.Fields(p); len(f) > 0 && f[0] == "git" && (len(f) == 1 || f[1] == "push") {
			return "approving for the run lets every later git push this rule asks about through without asking, force pushes and pushes to protected branches included"
		}
	}
	return ""
}
