package policy

import (
	"strings"
	"testing"
)

// TestFromClaudeSettings: Claude Code's permission rules become rules of
// the same verdict that decide the same calls; what has no equivalent is
// listed, not guessed.
func TestFromClaudeSettings(t *testing.T) {
	t.Parallel()
	settings := `{"permissions":{
	  "allow":["Bash(git diff:*)","Bash(npm run test)","Read(./src/**)","WebFetch(domain:docs.example.com)","mcp__github__get_issue","WebSearch"],
	  "deny":["Bash(git push:*)","Read(//etc/**)","Edit(/.github/**)","mcp__jira","Read(~/.ssh/**)"],
	  "ask":["Bash(rm *)","Bash(echo $(x) *)","Bash(git * push)","Task(reviewer)"]},
	  "model":"opus"}`
	doc, rep, err := FromClaudeSettings([]byte(settings), ClaudeImport{Name: "imported", DefaultVerdict: VerdictRequireApproval})
	if err != nil {
		t.Fatal(err)
	}
	left := rep.Untranslated
	p, _, err := New(doc)
	if err != nil {
		t.Fatalf("the imported document does not compile: %v", err)
	}
	env := Env{Workspace: "/work/app"}
	tests := []struct {
		tool  string
		input map[string]any
		want  Verdict
	}{
		{"Bash", map[string]any{"command": "git diff --stat"}, VerdictAllow},
		// Not allowed (--output writes); and not asked about either: the
		// diff may show what Read(//etc/**) denies, and a line that
		// requires approval is not narrowed.
		{"Bash", map[string]any{"command": "git diff --output=x"}, VerdictDeny},
		{"Bash", map[string]any{"command": "npm run test"}, VerdictAllow},
		{"Bash", map[string]any{"command": "sudo git push"}, VerdictDeny},
		{"Bash", map[string]any{"command": "rm -rf x"}, VerdictRequireApproval},
		{"Read", map[string]any{"file_path": "/work/app/src/a.go"}, VerdictAllow},
		{"Grep", map[string]any{"path": "/work/app/src", "pattern": "x"}, VerdictAllow},
		{"Read", map[string]any{"file_path": "/etc/passwd"}, VerdictDeny},
		{"Write", map[string]any{"file_path": "/work/app/.github/workflows/ci.yml", "content": "x"}, VerdictDeny},
		{"WebFetch", map[string]any{"url": "https://docs.example.com/a", "prompt": "x"}, VerdictAllow},
		{"WebFetch", map[string]any{"url": "https://docs.example.com.evil.test/a", "prompt": "x"}, VerdictRequireApproval},
		{"mcp__github__get_issue", map[string]any{}, VerdictAllow},
		{"mcp__jira__create_issue", map[string]any{}, VerdictDeny},
		{"WebSearch", map[string]any{"query": "x"}, VerdictAllow},
	}
	for _, tt := range tests {
		if got := p.EvaluateIn(env, tt.tool, tt.input); got.Verdict != tt.want {
			t.Errorf("%s %v = %s (%s), want %s", tt.tool, tt.input, got.Verdict, got.Reason, tt.want)
		}
	}
	var untranslated []string
	for _, u := range left {
		untranslated = append(untranslated, u.List+":"+u.Rule)
		if u.Reason == "" {
			t.Errorf("%s has no reason", u.Rule)
		}
	}
	if got, want := strings.Join(untranslated, " "), "deny:Read(~/.ssh/**) ask:Bash(echo $(x) *) ask:Bash(git * push) ask:Task(reviewer)"; got != want {
		t.Errorf("untranslated = %s, want %s", got, want)
	}
	if _, _, err := FromClaudeSettings([]byte(`[1]`), ClaudeImport{Name: "x", DefaultVerdict: VerdictDeny}); err == nil {
		t.Error("a JSON list was read as settings")
	}
}

// A WebFetch deny or ask is not translated into a match on the URL's text:
// other spellings of the host would pass it. It is listed instead.
func TestFromClaudeSettingsWebFetchDenyListed(t *testing.T) {
	t.Parallel()
	settings := `{"permissions":{"deny":["WebFetch(domain:evil.example)"],"ask":["WebFetch(domain:ask.example)"]}}`
	doc, rep, err := FromClaudeSettings([]byte(settings), ClaudeImport{Name: "imported", DefaultVerdict: VerdictAllow})
	if err != nil {
		t.Fatal(err)
	}
	left := rep.Untranslated
	if len(doc.Rules) != 0 {
		t.Errorf("rules = %+v, want none", doc.Rules)
	}
	if len(left) != 2 || left[0].List != "deny" || left[1].List != "ask" || !strings.Contains(left[0].Reason, "spellings") {
		t.Errorf("untranslated = %+v, want the deny and the ask", left)
	}
}

// An import keeps Claude Code's meaning or says it changed it: a
// Bash(prefix:*) allow is narrowed to the catalogue's words and reported,
// or with AnyOptions imported with "options": "any" and reported; an exact
// Bash allow is reported as a prefix; every key of the file that is not a
// permission list is listed with why.
func TestFromClaudeSettingsReport(t *testing.T) {
	t.Parallel()
	settings := `{"$schema":"https://json.schemastore.org/claude-code-settings.json",
	  "permissions":{"allow":["Bash(go test:*)","Bash(git diff)"],"deny":["Bash(git push:*)"],"defaultMode":"acceptEdits","additionalDirectories":["../x"]},
	  "env":{"K":"v"},"hooks":{},"mcpServers":{},"model":"opus","statusLine":{}}`
	env := Env{Workspace: "/work/app"}
	for _, anyOptions := range []bool{false, true} {
		doc, rep, err := FromClaudeSettings([]byte(settings), ClaudeImport{Name: "x", DefaultVerdict: VerdictDeny, AnyOptions: anyOptions})
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := New(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := VerdictDeny // go test -exec runs another program: refused either way
		if got := p.EvaluateIn(env, "Bash", map[string]any{"command": "go test -exec ./x ./..."}); got.Verdict != want {
			t.Errorf("AnyOptions=%v: go test -exec = %s, want %s", anyOptions, got.Verdict, want)
		}
		want = VerdictDeny
		if anyOptions {
			want = VerdictAllow
		}
		if got := p.EvaluateIn(env, "Bash", map[string]any{"command": "go test -run TestX -count=1 ./..."}); got.Verdict != want {
			t.Errorf("AnyOptions=%v: go test -run ... = %s (%s), want %s", anyOptions, got.Verdict, got.Reason, want)
		}
		var changed []string
		for _, c := range rep.Changed {
			changed = append(changed, c.Rule+"="+c.RuleID)
			if c.Change == "" {
				t.Errorf("%s: no change said", c.Rule)
			}
		}
		if got, wantC := strings.Join(changed, " "), "Bash(go test:*)=allow-bash-1 Bash(git diff)=allow-bash-2"; got != wantC {
			t.Errorf("AnyOptions=%v: changed = %s, want %s", anyOptions, got, wantC)
		}
		if first := rep.Changed[0].Change; strings.HasPrefix(first, "narrowed") == anyOptions {
			t.Errorf("AnyOptions=%v: change = %q", anyOptions, first)
		}
		var ignored []string
		for _, k := range rep.Ignored {
			ignored = append(ignored, k.Key)
			if k.Reason == "" {
				t.Errorf("%s: no reason", k.Key)
			}
		}
		if got, wantI := strings.Join(ignored, " "), "env hooks mcpServers model permissions.additionalDirectories permissions.defaultMode statusLine"; got != wantI {
			t.Errorf("ignored = %s, want %s", got, wantI)
		}
	}
}
