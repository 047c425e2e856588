package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFileGlobs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"f","default_verdict":"require_approval","rules":[
	  {"id":"src","tool":"Write","match":{"path":["src/**","/work/repo/src/**"]},"verdict":"allow"},
	  {"id":"read-all","tool":"Read","match":{"path":["**"]},"verdict":"allow"},
	  {"id":"env","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"secrets","tool":"Read","match":{"path":["secrets/**"]},"verdict":"deny"},
	  {"id":"etc","tool":"Read","match":{"path":["/etc/**"]},"verdict":"deny"},
	  {"id":"grep-secrets","tool":"Grep","match":{"path":["secrets/**"]},"verdict":"deny"},
	  {"id":"nb","tool":"NotebookEdit","match":{"path":["*.ipynb"]},"verdict":"allow"}]}`)
	tests := []struct {
		tool  string
		input map[string]any
		want  Verdict
		rule  string
	}{
		{"Write", map[string]any{"file_path": "src/a.go"}, VerdictAllow, "src"},
		{"Write", map[string]any{"file_path": "./src/pkg/a.go"}, VerdictAllow, "src"},
		{"Write", map[string]any{"file_path": "/work/repo/src/a.go"}, VerdictAllow, "src"},
		{"Write", map[string]any{"file_path": "src/../main.go"}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"file_path": "src/../../x/src/a.go"}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"file_path": "../src/a.go"}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"file_path": "/work/repo/src/../../etc/x"}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"file_path": "/tmp/src/a.go"}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"file_path": ""}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"file_path": 3}, VerdictRequireApproval, ""},
		{"Write", map[string]any{}, VerdictRequireApproval, ""},
		{"Write", map[string]any{"path": "src/a.go"}, VerdictRequireApproval, ""},
		{"Read", map[string]any{"file_path": "README.md"}, VerdictAllow, "read-all"},
		{"Read", map[string]any{"file_path": ".env"}, VerdictDeny, "env"},
		{"Read", map[string]any{"file_path": "/home/u/app/.env"}, VerdictDeny, "env"},
		{"Read", map[string]any{"file_path": "secrets/key"}, VerdictDeny, "secrets"},
		{"Read", map[string]any{"file_path": "x/../secrets/key"}, VerdictDeny, "secrets"},
		{"Read", map[string]any{"file_path": "../repo/secrets/key"}, VerdictDeny, "secrets"},
		{"Read", map[string]any{"file_path": "/work/repo/secrets/key"}, VerdictDeny, "secrets"},
		{"Read", map[string]any{"file_path": "/etc/passwd"}, VerdictDeny, "etc"},
		{"Read", map[string]any{"file_path": "/tmp/../etc/passwd"}, VerdictDeny, "etc"},
		{"Read", map[string]any{"file_path": "etc/passwd"}, VerdictDeny, "etc"},
		{"Read", map[string]any{"file_path": "../../etc/passwd"}, VerdictDeny, "etc"},
		{"Read", map[string]any{"file_path": "../outside.txt"}, VerdictRequireApproval, ""},
		{"Grep", map[string]any{"pattern": "x"}, VerdictDeny, "grep-secrets"},
		// Grep without a glob reads every file under its path, and
		// src/secrets/k is what a relative "secrets/**" matches.
		{"Grep", map[string]any{"pattern": "x", "path": "src"}, VerdictDeny, "grep-secrets"},
		{"NotebookEdit", map[string]any{"notebook_path": "a.ipynb"}, VerdictAllow, "nb"},
		{"NotebookEdit", map[string]any{"file_path": "a.ipynb"}, VerdictRequireApproval, ""},
	}
	for _, tt := range tests {
		got := p.Evaluate(tt.tool, tt.input)
		if got.Verdict != tt.want || got.RuleID != tt.rule {
			t.Errorf("Evaluate(%q, %v) = %v %q (%s), want %v %q", tt.tool, tt.input, got.Verdict, got.RuleID, got.Reason, tt.want, tt.rule)
		}
	}
}

func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestInputMatchers(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"i","default_verdict":"allow","rules":[
	  {"id":"ops","tool":"mcp__jira__create_issue","match":{"input":{"/project":["OPS","SEC*"]}},"verdict":"deny"},
	  {"id":"big","tool":"mcp__jira__*","match":{"input":{"/fields/priority":["1","2"],"/fields/urgent":["true"]}},"verdict":"require_approval"},
	  {"id":"tilde","tool":"mcp__x__y","match":{"input":{"/a~1b/c~0d":["v"],"/list/1":["second"]}},"verdict":"deny"},
	  {"id":"url","tool":"mcp__fetch__get","match":{"input":{"/url":["https://evil.example/*"]}},"verdict":"deny"}]}`)
	tests := []struct {
		tool  string
		input string
		want  Verdict
		rule  string
	}{
		{"mcp__jira__create_issue", `{"project":"OPS"}`, VerdictDeny, "ops"},
		{"mcp__jira__create_issue", `{"project":"SECURITY"}`, VerdictDeny, "ops"},
		{"mcp__jira__create_issue", `{"project":"DEV"}`, VerdictAllow, ""},
		{"mcp__jira__create_issue", `{"project":["OPS"]}`, VerdictAllow, ""},
		{"mcp__jira__create_issue", `{}`, VerdictAllow, ""},
		{"mcp__jira__create_issue", `{"project":"DEV","fields":{"priority":1,"urgent":true}}`, VerdictRequireApproval, "big"},
		{"mcp__jira__update", `{"fields":{"priority":"2","urgent":true}}`, VerdictRequireApproval, "big"},
		{"mcp__jira__update", `{"fields":{"priority":2}}`, VerdictAllow, ""},
		{"mcp__jira__update", `{"fields":{"priority":3,"urgent":true}}`, VerdictAllow, ""},
		{"mcp__jira__update", `{"fields":{"priority":null,"urgent":true}}`, VerdictAllow, ""},
		{"mcp__x__y", `{"a/b":{"c~d":"v"},"list":["first","second"]}`, VerdictDeny, "tilde"},
		{"mcp__x__y", `{"a/b":{"c~d":"v"},"list":["first"]}`, VerdictAllow, ""},
		{"mcp__fetch__get", `{"url":"https://evil.example/a/b?c"}`, VerdictDeny, "url"},
		{"mcp__fetch__get", `{"url":"https://good.example/"}`, VerdictAllow, ""},
	}
	for _, tt := range tests {
		got := p.Evaluate(tt.tool, decodeJSON(t, tt.input))
		if got.Verdict != tt.want || got.RuleID != tt.rule {
			t.Errorf("Evaluate(%q, %s) = %v %q, want %v %q", tt.tool, tt.input, got.Verdict, got.RuleID, tt.want, tt.rule)
		}
	}
}

func TestPrecedenceAndDefaults(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"default","default_verdict":"require_approval",
	  "approval":{"scope":"once","ttl_seconds":900},
	  "autonomy":{"on_approval_rule":"allow"},
	  "rules":[
	    {"id":"allow-all","tool":"*","verdict":"allow"},
	    {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status","git diff"]},"verdict":"allow"},
	    {"id":"git-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session","ttl_seconds":3600,"on_autonomous":"deny"},
	    {"id":"jira","tool":"mcp__jira__*","verdict":"require_approval"},
	    {"id":"jira-field","tool":"mcp__jira__create_issue","match":{"input":{"/project":["OPS"]}},"verdict":"deny"},
	    {"id":"kill","tool":"mcp__danger__*","verdict":"deny"}
	  ]}`)
	tests := []struct {
		tool  string
		input any
		want  Result
	}{
		{"Read", map[string]any{"file_path": "x"}, Result{Verdict: VerdictAllow, RuleID: "allow-all", Reason: `allowed by rule "allow-all"`}},
		{"mcp__danger__drop", map[string]any{}, Result{Verdict: VerdictDeny, RuleID: "kill", Reason: `denied by rule "kill"`}},
		{"mcp__jira__create_issue", map[string]any{"project": "OPS"}, Result{Verdict: VerdictDeny, RuleID: "jira-field", Reason: `denied by rule "jira-field"`}},
		{"mcp__jira__create_issue", map[string]any{"project": "DEV"}, Result{
			Verdict: VerdictRequireApproval, RuleID: "jira", Reason: `rule "jira" requires approval`,
			Scope: ScopeOnce, TTL: 900 * time.Second, OnAutonomous: VerdictAllow, ScopeKey: "mcp__jira__create_issue"}},
		{"Bash", bashInput("git push --force origin main"), Result{
			Verdict: VerdictRequireApproval, RuleID: "git-push", Reason: `rule "git-push" requires approval`,
			Scope: ScopeSession, TTL: time.Hour, OnAutonomous: VerdictDeny, ScopeKey: "Bash:git push"}},
		{"Bash", bashInput("git -C repo push"), Result{
			Verdict: VerdictRequireApproval, RuleID: "git-push", Reason: `rule "git-push" requires approval`,
			Scope: ScopeSession, TTL: time.Hour, OnAutonomous: VerdictDeny, ScopeKey: "Bash:git push"}},
		{"Bash", bashInput("git status"), Result{Verdict: VerdictAllow, RuleID: "allow-all", Reason: `allowed by rule "allow-all"`}},
	}
	for _, tt := range tests {
		got := p.Evaluate(tt.tool, tt.input)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Evaluate(%q, %v) mismatch (-want +got):\n%s", tt.tool, tt.input, diff)
		}
	}
}

func TestDefaultVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string
		tool string
		in   any
		want Result
	}{
		{`{"name":"d","default_verdict":"deny","rules":[]}`, "Read", map[string]any{"file_path": "x"},
			Result{Verdict: VerdictDeny, Reason: "no rule matched; default verdict deny"}},
		{`{"name":"a","default_verdict":"allow","rules":[]}`, "Read", map[string]any{"file_path": "x"},
			Result{Verdict: VerdictAllow, Reason: "no rule matched; default verdict allow"}},
		// Autonomy absent: the fallback is deny.
		{`{"name":"r","default_verdict":"require_approval"}`, "mcp__a__b", map[string]any{},
			Result{Verdict: VerdictRequireApproval, Reason: "no rule matched; default verdict require_approval",
				Scope: ScopeOnce, TTL: 900 * time.Second, OnAutonomous: VerdictDeny, ScopeKey: "mcp__a__b"}},
		{`{"name":"r","default_verdict":"require_approval","approval":{"scope":"session","ttl_seconds":60},"autonomy":{"on_approval_rule":"allow"}}`, "mcp__a__b", map[string]any{},
			Result{Verdict: VerdictRequireApproval, Reason: "no rule matched; default verdict require_approval",
				Scope: ScopeSession, TTL: time.Minute, OnAutonomous: VerdictAllow, ScopeKey: "mcp__a__b"}},
		// Rule without on_autonomous inherits the policy's fallback.
		{`{"name":"r","default_verdict":"deny","autonomy":{"on_approval_rule":"allow"},"rules":[{"id":"x","tool":"T","verdict":"require_approval"}]}`, "T", nil,
			Result{Verdict: VerdictRequireApproval, RuleID: "x", Reason: `rule "x" requires approval`,
				Scope: ScopeOnce, TTL: 900 * time.Second, OnAutonomous: VerdictAllow, ScopeKey: "T"}},
		// Bash default approval: no rule, so no prefix to key a grant
		// by; a program alone would let "rm a.txt" cover "rm -rf /".
		{`{"name":"r","default_verdict":"require_approval","approval":{"scope":"session"}}`, "Bash", bashInput("curl -H 'Authorization: Bearer sk-live-1' https://x"),
			Result{Verdict: VerdictRequireApproval, Reason: "no rule matched (the policy has no allow rule for Bash); default verdict require_approval",
				Scope: ScopeOnce, TTL: 900 * time.Second, OnAutonomous: VerdictDeny}},
		// A line of two programs cannot be keyed: no key, scope forced to once.
		{`{"name":"r","default_verdict":"require_approval","approval":{"scope":"session"}}`, "Bash", bashInput("npm test && curl x"),
			Result{Verdict: VerdictRequireApproval, Reason: "no rule matched (the policy has no allow rule for Bash); default verdict require_approval",
				Scope: ScopeOnce, TTL: 900 * time.Second, OnAutonomous: VerdictDeny}},
		// An opaque line is never keyed either.
		{`{"name":"r","default_verdict":"require_approval","approval":{"scope":"session"}}`, "Bash", bashInput("python3 -c 'print(1)'"),
			Result{Verdict: VerdictRequireApproval, Reason: "no rule matched (`python3` runs code (inline, from stdin or from a file), which fluidbox cannot analyse, so no allow rule can match); default verdict require_approval",
				Scope: ScopeOnce, TTL: 900 * time.Second, OnAutonomous: VerdictDeny}},
	}
	for _, tt := range tests {
		p := mustParse(t, tt.doc)
		got := p.Evaluate(tt.tool, tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Evaluate(%q, %v) under %s mismatch (-want +got):\n%s", tt.tool, tt.in, tt.doc, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	rule := func(s string) string {
		return `{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"Bash","verdict":"allow"},` + s + `]}`
	}
	tests := []struct {
		name  string
		doc   string
		field string
		msg   string
	}{
		{"unknown verdict", rule(`{"id":"b","tool":"x","verdict":"alow"}`), "rules[1].verdict", `"alow" is not one of allow, deny, require_approval`},
		{"unknown field", rule(`{"id":"b","tool":"x","verdict":"allow","tools":"y"}`), "rules[1].tools", "unknown field"},
		{"unknown match field", rule(`{"id":"b","tool":"Bash","verdict":"allow","match":{"prefix":["ls"]}}`), "rules[1].match.prefix", "unknown field"},
		{"unknown top field", `{"name":"x","default_verdict":"deny","rulez":[]}`, "rulez", "unknown field"},
		{"bad tool glob", rule(`{"id":"b","tool":"mcp__[jira","verdict":"allow"}`), "rules[1].tool", "unterminated"},
		{"bad path glob", rule(`{"id":"b","tool":"Read","match":{"path":["src/[x"]},"verdict":"allow"}`), "rules[1].match.path[0]", "bad glob"},
		{"bad input glob", rule(`{"id":"b","tool":"x","match":{"input":{"/a":["x\\"]}},"verdict":"allow"}`), `rules[1].match.input["/a"][0]`, "trailing backslash"},
		{"bad pointer", rule(`{"id":"b","tool":"x","match":{"input":{"a":["x"]}},"verdict":"allow"}`), `rules[1].match.input["a"]`, "JSON pointer"},
		{"bad pointer escape", rule(`{"id":"b","tool":"x","match":{"input":{"/a~2":["x"]}},"verdict":"allow"}`), `rules[1].match.input["/a~2"]`, "~"},
		{"duplicate id", rule(`{"id":"a","tool":"x","verdict":"allow"}`), "rules[1].id", "duplicate id"},
		{"missing id", rule(`{"tool":"x","verdict":"allow"}`), "rules[1].id", "required"},
		{"missing tool", rule(`{"id":"b","verdict":"allow"}`), "rules[1].tool", "required"},
		{"missing verdict", rule(`{"id":"b","tool":"x"}`), "rules[1].verdict", "required"},
		{"prefix on other tool", rule(`{"id":"b","tool":"Read","match":{"command_prefix":["ls"]},"verdict":"allow"}`), "rules[1].match.command_prefix", "only for tool"},
		{"prefix on glob tool", rule(`{"id":"b","tool":"Ba*","match":{"command_prefix":["ls"]},"verdict":"allow"}`), "rules[1].match.command_prefix", "only for tool"},
		{"empty prefix", rule(`{"id":"b","tool":"Bash","match":{"command_prefix":[" "]},"verdict":"allow"}`), "rules[1].match.command_prefix[0]", "empty"},
		{"path on other tool", rule(`{"id":"b","tool":"Bash","match":{"path":["x"]},"verdict":"allow"}`), "rules[1].match.path", "file tools"},
		{"ttl too big", rule(`{"id":"b","tool":"x","verdict":"require_approval","ttl_seconds":99999999}`), "rules[1].ttl_seconds", "between"},
		{"ttl negative", rule(`{"id":"b","tool":"x","verdict":"require_approval","ttl_seconds":-1}`), "rules[1].ttl_seconds", "between"},
		{"bad scope", rule(`{"id":"b","tool":"x","verdict":"require_approval","scope":"forever"}`), "rules[1].scope", `"forever" is not one of once, session`},
		{"bad on_autonomous", rule(`{"id":"b","tool":"x","verdict":"require_approval","on_autonomous":"require_approval"}`), "rules[1].on_autonomous", "allow or deny"},
		{"wrong type", rule(`{"id":"b","tool":"x","verdict":"allow","ttl_seconds":"10"}`), "rules[1].ttl_seconds", "must be an integer, not a string"},
		{"prefix not a list", rule(`{"id":"b","tool":"Bash","verdict":"allow","match":{"command_prefix":"ls"}}`), "rules[1].match.command_prefix", "must be a list, not a string"},
		{"prefix entry not a string", rule(`{"id":"b","tool":"Bash","verdict":"allow","match":{"command_prefix":["ls",3]}}`), "rules[1].match.command_prefix[1]", "must be a string, not 3"},
		{"input value not a list", rule(`{"id":"b","tool":"x","verdict":"allow","match":{"input":{"/a":"x"}}}`), `rules[1].match.input["/a"]`, "must be a list, not a string"},
		{"rules not a list", `{"name":"x","default_verdict":"deny","rules":{}}`, "rules", "must be a list, not an object"},
		{"rule not an object", `{"name":"x","default_verdict":"deny","rules":["allow"]}`, "rules[0]", "must be an object, not a string"},
		{"verdict not a string", rule(`{"id":"b","tool":"x","verdict":true}`), "rules[1].verdict", "must be a string, not true or false"},
		{"bad options", rule(`{"id":"b","tool":"Bash","verdict":"allow","match":{"command_prefix":["ls"],"options":"all"}}`), "rules[1].match.options", `"all" is not one of catalogue, any`},
		{"bad opaque", `{"name":"x","default_verdict":"deny","bash":{"opaque":"ask"}}`, "bash.opaque", `"ask" is not one of deny, require_approval`},
		{"ask", rule(`{"id":"b","tool":"x","verdict":"ask"}`), "rules[1].verdict", `"ask" is not one of allow, deny, require_approval`},
		{"unknown field lists the known", rule(`{"id":"b","tool":"x","verdict":"allow","tools":"y"}`), "rules[1].tools", "known: id, tool, match, verdict, scope, ttl_seconds, on_autonomous"},
		{"missing default", `{"name":"x","rules":[]}`, "default_verdict", "required"},
		{"bad default", `{"name":"x","default_verdict":"maybe"}`, "default_verdict", `"maybe" is not one of allow, deny, require_approval`},
		{"bad approval ttl", `{"name":"x","default_verdict":"deny","approval":{"ttl_seconds":0.5}}`, "approval.ttl_seconds", "must be an integer, not 0.5"},
		{"bad approval scope", `{"name":"x","default_verdict":"deny","approval":{"scope":"run"}}`, "approval.scope", `"run" is not one of once, session`},
		{"bad autonomy", `{"name":"x","default_verdict":"deny","autonomy":{"on_approval_rule":"yes"}}`, "autonomy.on_approval_rule", `"yes" is not one of allow, deny`},
		{"autonomy unknown field", `{"name":"x","default_verdict":"deny","autonomy":{"fallback":"deny"}}`, "autonomy.fallback", "unknown field"},
		{"not an object", `[1,2]`, "", "must be an object, not a list"},
		{"trailing data", `{"name":"x","default_verdict":"deny"} {}`, "", "after the document"},
		{"empty", ``, "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _, err := Parse([]byte(tt.doc))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse(%q) = %v, %v, want *ValidationError", tt.doc, p, err)
			}
			if ve.Field != tt.field || !strings.Contains(ve.Message, tt.msg) {
				t.Errorf("Parse(%q) error = %q (field %q), want field %q and message containing %q", tt.doc, err, ve.Field, tt.field, tt.msg)
			}
			if p != nil {
				t.Errorf("Parse(%q) returned a policy with an error", tt.doc)
			}
		})
	}
}

func TestValidationErrorText(t *testing.T) {
	t.Parallel()
	_, _, err := Parse([]byte(`{"name":"x","default_verdict":"deny","rules":[{"id":"a","tool":"x","verdict":"allow"},{"id":"b","tool":"x","verdict":"allow"},{"id":"c","tool":"x","verdict":"alow"}]}`))
	if got, want := err.Error(), `rules[2].verdict: "alow" is not one of allow, deny, require_approval`; got != want {
		t.Errorf("Parse error = %q, want %q", got, want)
	}
}

func TestDocumentNormalizedAndImmutable(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"n","default_verdict":"deny","rules":[
	  {"id":"a","tool":"Bash","match":{"command_prefix":[]},"verdict":"allow"},
	  {"id":"b","tool":"x","match":{"input":{"/a":["b"]}},"verdict":"deny"}]}`)
	doc := p.Document()
	want := Document{
		Name: "n", DefaultVerdict: VerdictDeny,
		Approval: &ApprovalDefaults{Scope: ScopeOnce, TTLSeconds: 900},
		Autonomy: &Autonomy{OnApprovalRule: VerdictDeny},
		Bash:     &BashSettings{Opaque: VerdictRequireApproval},
		Rules: []Rule{
			{ID: "a", Tool: "Bash", Match: &Match{CommandPrefix: []string{}}, Verdict: VerdictAllow},
			{ID: "b", Tool: "x", Match: &Match{Input: map[string][]string{"/a": {"b"}}}, Verdict: VerdictDeny},
		},
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("Document() mismatch (-want +got):\n%s", diff)
	}
	digest := p.Digest()
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		t.Errorf("Digest() = %q, want sha256:<64 hex>", digest)
	}
	doc.Rules[1].Match.Input["/a"][0] = "changed"
	doc.Approval.TTLSeconds = 1
	doc.Rules[0].Verdict = VerdictDeny
	if diff := cmp.Diff(want, p.Document()); diff != "" {
		t.Errorf("Document() changed after mutating a copy (-want +got):\n%s", diff)
	}
	// The normalized document round-trips to the same policy: an empty
	// prefix list stays empty (matches nothing) instead of vanishing.
	data, err := json.Marshal(p.Document())
	if err != nil {
		t.Fatal(err)
	}
	q := mustParse(t, string(data))
	if q.Digest() != digest {
		t.Errorf("Digest after round trip = %s, want %s (document %s)", q.Digest(), digest, data)
	}
	if got := q.Evaluate("Bash", bashInput("ls")); got.Verdict != VerdictDeny {
		t.Errorf("round-tripped Evaluate(ls) = %v, want deny (empty prefix list matches nothing)", got.Verdict)
	}
	// Explicit defaults digest like omitted ones.
	r := mustParse(t, `{"name":"n","default_verdict":"deny","approval":{"scope":"once","ttl_seconds":900},"autonomy":{"on_approval_rule":"deny"},"rules":[
	  {"id":"a","tool":"Bash","match":{"command_prefix":[]},"verdict":"allow"},
	  {"id":"b","tool":"x","match":{"input":{"/a":["b"]}},"verdict":"deny"}]}`)
	if r.Digest() != digest {
		t.Errorf("Digest with explicit defaults = %s, want %s", r.Digest(), digest)
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	_, warns, err := Parse([]byte(`{"name":"w","default_verdict":"deny","rules":[
	  {"id":"empty","tool":"Bash","match":{"command_prefix":[]},"verdict":"allow"},
	  {"id":"ops","tool":"Bash","match":{"command_prefix":["ls && rm -rf /","git $(x)","ls *.go","ls"]},"verdict":"allow"},
	  {"id":"nopath","tool":"Read","match":{"path":[]},"verdict":"allow"},
	  {"id":"noval","tool":"x","match":{"input":{"/a":[]}},"verdict":"allow"},
	  {"id":"nomatch","tool":"y","match":{},"verdict":"allow"},
	  {"id":"scope","tool":"z","verdict":"deny","scope":"session"},
	  {"id":"kill","tool":"mcp__*","verdict":"deny"},
	  {"id":"shadowed","tool":"mcp__jira__create","verdict":"allow"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]bool)
	for _, w := range warns {
		got[w.Field] = true
	}
	for _, f := range []string{
		"rules[0].match.command_prefix",
		"rules[1].match.command_prefix[0]",
		"rules[1].match.command_prefix[1]",
		"rules[1].match.command_prefix[2]",
		"rules[2].match.path",
		`rules[3].match.input["/a"]`,
		"rules[4].match",
		"rules[5].scope",
		"rules[7]",
	} {
		if !got[f] {
			t.Errorf("Parse warnings = %v, want one for %s", warns, f)
		}
	}
	if got["rules[1].match.command_prefix[3]"] {
		t.Errorf("Parse warned about the valid prefix %q", "ls")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	doc := Document{Name: "go", DefaultVerdict: VerdictDeny, Rules: []Rule{{ID: "a", Tool: "x", Verdict: "nope"}}}
	if _, _, err := New(doc); err == nil || !strings.Contains(err.Error(), "rules[0].verdict") {
		t.Errorf("New(bad verdict) error = %v, want rules[0].verdict", err)
	}
	doc.Rules[0].Verdict = VerdictAllow
	p, _, err := New(doc)
	if err != nil {
		t.Fatal(err)
	}
	doc.Rules[0].Verdict = VerdictDeny // the policy copied its input
	if got := p.Evaluate("x", nil); got.Verdict != VerdictAllow {
		t.Errorf("Evaluate after mutating the input document = %v, want allow", got.Verdict)
	}
}

func TestGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"mcp__jira__*", "mcp__jira__create_issue", true},
		{"mcp__jira__*", "mcp__jira", false},
		{"*", "anything/with/slashes", true},
		{"a?c", "abc", true},
		{"a?c", "aéc", true},
		{"a[bc]d", "acd", true},
		{"a[!bc]d", "acd", false},
		{"a[a-z]d", "aqd", true},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"*x*y*", "aaxbbyc", true},
		{"*x*y", "aaxbbyc", false},
		{"https://evil.example/*", "https://evil.example/a/b", true},
	}
	for _, tt := range tests {
		g, err := compileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tt.pattern, err)
		}
		if got := g.match(tt.s); got != tt.want {
			t.Errorf("glob(%q).match(%q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// TestDocumentTests: a document's tests decide their calls; the failing
// ones are reported with what was expected and what came; malformed tests
// do not compile.
func TestDocumentTests(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"t","default_verdict":"deny","rules":[
	  {"id":"read","tool":"Bash","match":{"command_prefix":["git diff"]},"verdict":"allow"},
	  {"id":"src","tool":"Read","match":{"path":["src/**"]},"verdict":"allow"},
	  {"id":"ops","tool":"mcp__jira__create_issue","match":{"input":{"/priority":["1"]}},"verdict":"require_approval"}],
	 "tests":[
	  {"name":"diff","tool_name":"Bash","input":{"command":"git diff --stat"},"expect":"allow"},
	  {"name":"push","tool_name":"Bash","input":{"command":"git push"},"expect":"allow"},
	  {"tool_name":"Read","input":{"file_path":"/w/src/a.go"},"workspace":"/w","expect":"allow"},
	  {"tool_name":"mcp__jira__create_issue","input":{"priority":1},"expect":"require_approval"},
	  {"tool_name":"Read","input":{"file_path":"/w/src/a.go"},"expect":"allow"}]}`)
	failed := p.RunTests()
	if len(failed) != 2 || failed[0].Index != 1 || failed[0].Name != "push" || failed[0].Got != VerdictDeny || failed[1].Index != 4 {
		t.Fatalf("RunTests = %+v, want tests 1 and 4 failing", failed)
	}
	if got := failed[0].String(); !strings.Contains(got, "tests[1] push: expected allow, got deny") {
		t.Errorf("failure text = %q", got)
	}
	if q, _, err := New(p.Document()); err != nil || q.Digest() != p.Digest() || len(q.RunTests()) != 2 {
		t.Errorf("round trip: %v, digest equal %v", err, err == nil && q.Digest() == p.Digest())
	}
	for _, tt := range []struct{ tests, field, msg string }{
		{`[{"input":{},"expect":"allow"}]`, "tests[0].tool_name", "required"},
		{`[{"tool_name":"Bash","input":{}}]`, "tests[0].expect", "required"},
		{`[{"tool_name":"Bash","input":{},"expect":"ask"}]`, "tests[0].expect", `"ask" is not one of allow, deny, require_approval`},
		{`[{"tool_name":"Bash","input":{},"expect":"allow","workspace":"rel"}]`, "tests[0].workspace", "absolute"},
		{`[{"tool_name":"Bash","input":{},"expect":"allow","colour":1}]`, "tests[0].colour", "unknown field"},
		{`{"tool_name":"Bash"}`, "tests", "must be a list"},
	} {
		_, _, err := Parse([]byte(`{"name":"t","default_verdict":"deny","tests":` + tt.tests + `}`))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field || !strings.Contains(ve.Message, tt.msg) {
			t.Errorf("tests %s: error %v, want %s: %s", tt.tests, err, tt.field, tt.msg)
		}
	}
}

// TestCreationWarnings: Claude Code's syntax as a tool, a known tool's name
// in another case, and a document that can only give one verdict are
// flagged.
func TestCreationWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc, field, msg string
	}{
		{`{"name":"w","default_verdict":"deny","rules":[{"id":"a","tool":"Bash(git status:*)","verdict":"allow"}]}`, "rules[0].tool",
			`write {"tool":"Bash","match":{"command_prefix":["git status"]}}`},
		{`{"name":"w","default_verdict":"deny","rules":[{"id":"a","tool":"Read(./src/**)","verdict":"allow"}]}`, "rules[0].tool", `Claude Code's permission syntax`},
		{`{"name":"w","default_verdict":"deny","rules":[{"id":"a","tool":"read","verdict":"allow"}]}`, "rules[0].tool", `Claude Code's is "Read"`},
		{`{"name":"w","default_verdict":"deny","rules":[{"id":"a","tool":"BASH","verdict":"allow"}]}`, "rules[0].tool", `Claude Code's is "Bash"`},
		{`{"name":"w","default_verdict":"allow"}`, "default_verdict", "every call is allowed"},
		{`{"name":"w","default_verdict":"allow","rules":[{"id":"a","tool":"Bash","verdict":"allow"}]}`, "default_verdict", "every call is allowed"},
		{`{"name":"w","default_verdict":"deny","rules":[{"id":"a","tool":"x","verdict":"deny"}]}`, "default_verdict", "every call is denied"},
		{`{"name":"w","default_verdict":"require_approval"}`, "default_verdict", "every call waits for a human"},
	}
	for _, tt := range tests {
		_, warns, err := Parse([]byte(tt.doc))
		if err != nil {
			t.Fatalf("Parse(%s): %v", tt.doc, err)
		}
		found := false
		for _, w := range warns {
			found = found || w.Field == tt.field && strings.Contains(w.Message, tt.msg)
		}
		if !found {
			t.Errorf("Parse(%s) warnings = %v, want %s: ...%s...", tt.doc, warns, tt.field, tt.msg)
		}
	}
	// A document that can decide both ways draws none of these.
	_, warns, _ := Parse([]byte(`{"name":"w","default_verdict":"deny","rules":[{"id":"a","tool":"Read","verdict":"allow"},{"id":"b","tool":"mcp__x__y","verdict":"allow"}]}`))
	if len(warns) != 0 {
		t.Errorf("warnings for a plain document: %v", warns)
	}
}

// TestInputDenyMatchesOtherSpellings: deny and require_approval input
// globs match a value however the caller spells it for a receiver that
// reads it loosely: in another case (GitHub owners, hosts, Jira keys), or
// a number in another notation (5, 5.0, 5e0, "05"). An allow reads the
// value exactly as before.
func TestInputDenyMatchesOtherSpellings(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"i","default_verdict":"allow","rules":[
	  {"id":"evil","tool":"mcp__github__create_issue","match":{"input":{"/owner":["evil-org"]}},"verdict":"deny"},
	  {"id":"ms","tool":"mcp__github__create_issue","match":{"input":{"/milestone":["5"]}},"verdict":"deny"},
	  {"id":"ours","tool":"mcp__github__get_issue","match":{"input":{"/owner":["fluidbox"]}},"verdict":"allow"}]}`)
	strict := mustParse(t, `{"name":"s","default_verdict":"deny","rules":[
	  {"id":"ours","tool":"mcp__github__get_issue","match":{"input":{"/owner":["fluidbox"],"/number":["7"]}},"verdict":"allow"}]}`)
	for _, in := range []string{`{"owner":"Evil-Org"}`, `{"owner":"EVIL-ORG"}`, `{"milestone":5.0}`, `{"milestone":5e0}`, `{"milestone":"05"}`, `{"milestone":"5.0"}`} {
		if got := p.Evaluate("mcp__github__create_issue", decodeJSON(t, in)); got.Verdict != VerdictDeny {
			t.Errorf("create_issue %s = %v (%s), want deny", in, got.Verdict, got.Reason)
		}
	}
	if got := p.Evaluate("mcp__github__create_issue", decodeJSON(t, `{"owner":"good-org","milestone":6}`)); got.Verdict != VerdictAllow {
		t.Errorf("create_issue good-org = %v (%s), want allow", got.Verdict, got.Reason)
	}
	for in, want := range map[string]Verdict{
		`{"owner":"fluidbox","number":7}`:   VerdictAllow,
		`{"owner":"FluidBox","number":7}`:   VerdictDeny,
		`{"owner":"fluidbox","number":7.0}`: VerdictDeny,
	} {
		if got := strict.Evaluate("mcp__github__get_issue", decodeJSON(t, in)); got.Verdict != want {
			t.Errorf("get_issue %s = %v (%s), want %v", in, got.Verdict, got.Reason, want)
		}
	}
}

func TestWarningOnURLDeny(t *testing.T) {
	t.Parallel()
	_, warns, err := Parse([]byte(`{"name":"u","default_verdict":"allow","rules":[
	  {"id":"evil","tool":"WebFetch","match":{"input":{"/url":["https://evil.example/*"]}},"verdict":"deny"},
	  {"id":"good","tool":"WebFetch","match":{"input":{"/url":["https://good.example/*"]}},"verdict":"allow"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range warns {
		if strings.Contains(w.Message, "URL's text") {
			n++
			if w.Field != `rules[0].match.input["/url"]` {
				t.Errorf("warning on %s, want rules[0]", w.Field)
			}
		}
	}
	if n != 1 {
		t.Errorf("warnings = %v, want one about the deny's URL", warns)
	}
}
