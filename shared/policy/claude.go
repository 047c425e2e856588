package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
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

// Changed is a Claude Code permission rule imported with a meaning that is
// not exactly Claude Code's, and how it differs.
type Changed struct {
	List   string `json:"list"`
	Rule   string `json:"rule"`
	RuleID string `json:"rule_id"` // the imported rule
	Change string `json:"change"`
}

// Ignored is a key of the settings file that is not carried over, and why.
type Ignored struct {
	Key    string `json:"key"` // "env", "permissions.defaultMode", ...
	Reason string `json:"reason"`
}

// ClaudeReport is what an import could not carry over as it was: every
// rule left out, every rule whose meaning changed, every key ignored.
type ClaudeReport struct {
	Untranslated []Untranslated `json:"untranslated"`
	Changed      []Changed      `json:"changed"`
	Ignored      []Ignored      `json:"ignored"`
}

// ClaudeImport says how to import a settings file.
type ClaudeImport struct {
	Name           string
	DefaultVerdict Verdict
	// AnyOptions imports a Bash(prefix:*) allow with "options": "any",
	// Claude Code's meaning (the prefix with any arguments); otherwise only
	// the read-only catalogue's words may follow the prefix, as in every
	// fluidbox allow rule. Either way the rule is reported as changed.
	AnyOptions bool
}

// ignoredKeys say why the settings that are not permission rules are not
// carried over; any other key gets ignoredOther.
var ignoredKeys = map[string]string{
	"permissions.defaultMode":                  "a policy has a default_verdict instead (--default); the runner's managed settings set Claude Code's own mode",
	"permissions.additionalDirectories":        "a run has one workspace; paths outside it are judged by the path rules as they are written",
	"permissions.disableBypassPermissionsMode": "the runner's managed settings disable bypass mode for every run",
	"env":                        "the sandbox's environment is the runner's to set, never a policy's",
	"hooks":                      "fluidbox's hook is in the runner's managed settings; a project's own hooks are not a policy",
	"mcpServers":                 "MCP servers become fluidbox connections (POST /v1/connections), brokered with a sealed credential",
	"enableAllProjectMcpServers": "MCP servers become fluidbox connections (POST /v1/connections), brokered with a sealed credential",
	"enabledMcpjsonServers":      "MCP servers become fluidbox connections (POST /v1/connections), brokered with a sealed credential",
	"disabledMcpjsonServers":     "MCP servers become fluidbox connections (POST /v1/connections), brokered with a sealed credential",
	"model":                      "the model is the runner's choice; the run's budget bounds what it costs",
	"apiKeyHelper":               "the sandbox's API key is its run's session token, given by the runner",
	"$schema":                    "",
}

const ignoredOther = "not a permission rule: a policy says only what tools may do"

// FromClaudeSettings translates a Claude Code settings file's permissions
// into a policy document with the import's name and default verdict:
// allow, deny and ask become allow, deny and require_approval rules. Bash(prefix:*) and
// Bash(command) become command prefixes (read-only catalogue words only
// after them, as every allow prefix); Read(...) and Edit(...) path rules
// become path rules on the file tools they cover in Claude Code, relative
// paths relative to the run's workspace; WebFetch(domain:host) an input
// rule on the URL's host; tool names and MCP tool or server names stay
// names. What has no equivalent is reported, not guessed (so is a WebFetch
// deny or ask, which a text match cannot enforce), and so is every rule
// imported with another meaning and every other key of the file.
func FromClaudeSettings(data []byte, imp ClaudeImport) (Document, ClaudeReport, error) {
	var s ClaudeSettings
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return Document{}, ClaudeReport{}, fmt.Errorf("not a Claude Code settings file (JSON): %w", err)
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&s); err != nil {
		return Document{}, ClaudeReport{}, fmt.Errorf("not a Claude Code settings file (JSON): %w", err)
	}
	doc := Document{Name: imp.Name, DefaultVerdict: imp.DefaultVerdict, Rules: []Rule{}}
	rep := ClaudeReport{Untranslated: []Untranslated{}, Changed: []Changed{}, Ignored: ignoredSettings(keys)}
	seen := map[string]int{}
	for _, list := range []struct {
		name    string
		rules   []string
		verdict Verdict
	}{{"deny", s.Permissions.Deny, VerdictDeny}, {"ask", s.Permissions.Ask, VerdictRequireApproval}, {"allow", s.Permissions.Allow, VerdictAllow}} {
		for _, raw := range list.rules {
			rules, why := translateClaudeRule(strings.TrimSpace(raw), list.verdict)
			if why != "" {
				rep.Untranslated = append(rep.Untranslated, Untranslated{List: list.name, Rule: raw, Reason: why})
				continue
			}
			for _, r := range rules {
				base := list.name + "-" + ruleSlug(r.Tool)
				seen[base]++
				r.ID = fmt.Sprintf("%s-%d", base, seen[base])
				if change := bashChange(raw, &r, imp.AnyOptions); change != "" {
					rep.Changed = append(rep.Changed, Changed{List: list.name, Rule: raw, RuleID: r.ID, Change: change})
				}
				doc.Rules = append(doc.Rules, r)
			}
		}
	}
	return doc, rep, nil
}

// bashChange says how an imported Bash allow rule's meaning differs from
// Claude Code's, setting its options when the import keeps Claude Code's
// meaning; "" when it does not differ. Deny and require_approval rules
// only ever catch more than Claude Code's (they see through wrappers), so
// they are not reported.
func bashChange(raw string, r *Rule, anyOptions bool) string {
	if r.Tool != bashTool || r.Verdict != VerdictAllow || r.Match == nil || len(r.Match.CommandPrefix) != 1 {
		return ""
	}
	prefix := r.Match.CommandPrefix[0]
	spec := strings.TrimSuffix(strings.TrimPrefix(raw, bashTool+"("), ")")
	if !strings.HasSuffix(spec, "*") {
		return fmt.Sprintf("Claude Code allows exactly %q; here it is a command prefix, which the read-only catalogue's words may follow when it knows the program", prefix)
	}
	if anyOptions {
		r.Match.Options = OptionsAny
		return fmt.Sprintf("imported with \"options\": \"any\", as Claude Code means it: %q with any arguments, which allows whatever the program can be made to do with them (options that change what runs, and patterns that could expand to an option, are still refused)", prefix)
	}
	return fmt.Sprintf("narrowed: Claude Code allows %q with any arguments; here only the read-only catalogue's words may follow it (none for a program the catalogue does not know): import with --bash-options any, or set \"options\": \"any\" on the rule, for Claude Code's meaning", prefix)
}

// ignoredSettings lists the keys of a settings file that are not carried
// over, in order, with why: everything but the three permission lists.
func ignoredSettings(keys map[string]json.RawMessage) []Ignored {
	var names []string
	for k, v := range keys {
		if k != "permissions" {
			names = append(names, k)
			continue
		}
		var perms map[string]json.RawMessage
		if json.Unmarshal(v, &perms) != nil {
			continue // the typed decode has refused it already
		}
		for p := range perms {
			switch p {
			case "allow", "deny", "ask":
			default:
				names = append(names, "permissions."+p)
			}
		}
	}
	sort.Strings(names)
	out := []Ignored{}
	for _, k := range names {
		why, known := ignoredKeys[k]
		if !known {
			why = ignoredOther
		}
		if why != "" {
			out = append(out, Ignored{Key: k, Reason: why})
		}
	}
	return out
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
