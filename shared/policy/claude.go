package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ClaudeSettings is the part of a Claude Code settings file
// (.claude/settings.json) that says what its tools may do.
type ClaudeSettings struct {
	Permissions struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
		Ask   []string `json:"ask"`
	} `json:"permissions"`
}

// Untranslated is a Claude Code permission rule with no fluidbox
// equivalent, and why.
type Untranslated struct {
	List   string `json:"list"` // allow, deny or ask
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// FromClaudeSettings translates a Claude Code settings file's permissions
// into a policy document with the given default verdict: allow, deny and
// ask become allow, deny and require_approval rules. Bash(prefix:*) and
// Bash(command) become command prefixes (read-only catalogue words only
// after them, as every allow prefix); Read(...) and Edit(...) path rules
// become path rules on the file tools they cover in Claude Code, relative
// paths relative to the run's workspace; WebFetch(domain:host) an input
// rule on the URL's host; tool names and MCP tool or server names stay
// names. What has no equivalent is returned, not guessed; so is a
// WebFetch deny or ask, which a text match cannot enforce.
func FromClaudeSettings(data []byte, name string, defaultVerdict Verdict) (Document, []Untranslated, error) {
	var s ClaudeSettings
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return Document{}, nil, fmt.Errorf("not a Claude Code settings file (JSON): %w", err)
	}
	doc := Document{Name: name, DefaultVerdict: defaultVerdict, Rules: []Rule{}}
	var left []Untranslated
	seen := map[string]int{}
	for _, list := range []struct {
		name    string
		rules   []string
		verdict Verdict
	}{{"deny", s.Permissions.Deny, VerdictDeny}, {"ask", s.Permissions.Ask, VerdictRequireApproval}, {"allow", s.Permissions.Allow, VerdictAllow}} {
		for _, raw := range list.rules {
			rules, why := translateClaudeRule(strings.TrimSpace(raw), list.verdict)
			if why != "" {
				left = append(left, Untranslated{List: list.name, Rule: raw, Reason: why})
				continue
			}
			for _, r := range rules {
				base := list.name + "-" + ruleSlug(r.Tool)
				seen[base]++
				r.ID = fmt.Sprintf("%s-%d", base, seen[base])
				doc.Rules = append(doc.Rules, r)
			}
		}
	}
	return doc, left, nil
}

// ruleSlug makes a rule id part from a tool name.
func ruleSlug(tool string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(tool) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// Claude Code applies a Read rule to the tools that read files and an
// Edit rule to those that change them.
var (
	claudeReadTools = []string{"Read", "Glob", "Grep"}
	claudeEditTools = []string{"Edit", "MultiEdit", "Write", "NotebookEdit"}
)

func translateClaudeRule(raw string, v Verdict) ([]Rule, string) {
	if raw == "" {
		return nil, "empty rule"
	}
	m := claudeSyntax.FindStringSubmatch(raw)
	if m == nil {
		if strings.ContainsAny(raw, "()") {
			return nil, "not Claude Code's Tool or Tool(specifier) syntax"
		}
		tool := raw
		if strings.HasPrefix(raw, "mcp__") && strings.Count(raw, "__") == 1 {
			tool = raw + "__*" // a server's every tool
		}
		if _, err := compileGlob(tool); err != nil {
			return nil, "not a tool name fluidbox can match"
		}
		return []Rule{{Tool: tool, Verdict: v}}, ""
	}
	tool, spec := m[1], strings.TrimSpace(m[2])
	switch tool {
	case bashTool:
		prefix := spec
		switch {
		case strings.HasSuffix(prefix, ":*"):
			prefix = strings.TrimSuffix(prefix, ":*")
		case strings.HasSuffix(prefix, " *"):
			prefix = strings.TrimSuffix(prefix, " *")
		case strings.Contains(prefix, "*"):
			return nil, "a wildcard inside a Bash command; fluidbox matches command prefixes"
		}
		if prefix == "" {
			return []Rule{{Tool: bashTool, Verdict: v}}, ""
		}
		if why := plainPrefix(prefix); why != "" {
			return nil, why
		}
		return []Rule{{Tool: bashTool, Match: &Match{CommandPrefix: []string{prefix}}, Verdict: v}}, ""
	case "Read", "Edit":
		glob, why := claudePath(spec)
		if why != "" {
			return nil, why
		}
		tools := claudeReadTools
		if tool == "Edit" {
			tools = claudeEditTools
		}
		var out []Rule
		for _, t := range tools {
			out = append(out, Rule{Tool: t, Match: &Match{Path: []string{glob}}, Verdict: v})
		}
		return out, ""
	case "WebFetch":
		host, ok := strings.CutPrefix(spec, "domain:")
		if !ok || host == "" || strings.ContainsAny(host, "/*?[]{}\\ ") {
			return nil, "WebFetch rules translate only as WebFetch(domain:host)"
		}
		if v != VerdictAllow {
			// An allow on the URL's text is narrower than the host (it
			// needs this exact spelling); a deny is wider than its text:
			// other spellings of the same host (case, a port, userinfo,
			// percent-encoding, a trailing dot) would slip past it.
			return nil, "a WebFetch deny or ask on a host cannot be matched on the URL's text, which other spellings of the host evade; deny WebFetch by default and allow the hosts instead"
		}
		return []Rule{{Tool: "WebFetch", Match: &Match{Input: map[string][]string{"/url": {"https://" + host, "https://" + host + "/*", "http://" + host, "http://" + host + "/*"}}}, Verdict: v}}, ""
	}
	return nil, fmt.Sprintf("no fluidbox equivalent for a %s rule with a specifier", tool)
}

// plainPrefix says why a command cannot be a command prefix ("" if it can).
func plainPrefix(prefix string) string {
	if strings.ContainsAny(prefix, "|&;<>()$`\"'\\") {
		return "the command has shell syntax; a command prefix is plain words"
	}
	return ""
}

// claudePath turns a Claude Code path specifier into a path glob: //abs is
// absolute, /path and ./path and path are relative to the project (the
// run's workspace); ~ has no equivalent (the sandbox's home is not known).
func claudePath(spec string) (string, string) {
	switch {
	case spec == "":
		return "", "a path rule without a path"
	case strings.HasPrefix(spec, "~"):
		return "", "a path in the home directory, which fluidbox does not know for the sandbox"
	case strings.HasPrefix(spec, "//"):
		spec = spec[1:]
	case strings.HasPrefix(spec, "/"):
		spec = spec[1:]
	case strings.HasPrefix(spec, "./"):
		spec = spec[2:]
	}
	if spec == "" {
		spec = "**"
	}
	if _, err := compilePathGlob(spec); err != nil {
		return "", fmt.Sprintf("not a path glob fluidbox reads: %v", err)
	}
	return spec, ""
}
