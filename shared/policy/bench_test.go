package policy

import (
	"fmt"
	"strings"
	"testing"
)

func bench200Doc() string {
	var rules []string
	for i := 0; i < 200; i++ {
		switch i % 8 {
		case 0:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"mcp__svc%d__*","verdict":"require_approval"}`, i, i))
		case 1:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"mcp__jira__create_issue","match":{"input":{"/project":["P%d","Q%d*"],"/fields/priority":["%d"]}},"verdict":"deny"}`, i, i, i, i))
		case 2:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"mcp__tool%d__op","verdict":"allow"}`, i, i))
		case 3:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"Bash","match":{"command_prefix":["tool%d run","git log -%d"]},"verdict":"allow"}`, i, i, i))
		case 4:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"mcp__jira__*","match":{"input":{"/labels/0":["label%d"]}},"verdict":"require_approval"}`, i, i))
		case 5:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"Read","match":{"path":["dir%d/**"]},"verdict":"allow"}`, i, i))
		case 6:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"mcp__*__delete_%d","verdict":"deny"}`, i, i))
		case 7:
			rules = append(rules, fmt.Sprintf(`{"id":"r%d","tool":"mcp__jira__create_issue","match":{"input":{"/summary":["*secret%d*"]}},"verdict":"require_approval"}`, i, i))
		}
	}
	return `{"name":"bench","default_verdict":"require_approval","rules":[` + strings.Join(rules, ",") + `]}`
}

func BenchmarkEvaluate200Rules(b *testing.B) {
	p := mustParse(b, bench200Doc())
	input := decodeJSON(b, `{"project":"OPS","summary":"Rotate the staging database credentials","issue_type":"Task",
	  "description":"The staging DB password leaked in a log line; rotate it and update the vault entry.",
	  "labels":["security","infra"],"fields":{"priority":2,"components":["db"],"due":"2026-05-01"}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := p.Evaluate("mcp__jira__create_issue", input)
		if r.Verdict != VerdictRequireApproval {
			b.Fatalf("verdict %v", r.Verdict)
		}
	}
}

func BenchmarkEvaluateBash(b *testing.B) {
	p := mustParse(b, bench200Doc())
	input := bashInput(`git log --oneline -20 | grep -v "fixup" | head -5`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.Evaluate("Bash", input)
	}
}

func BenchmarkEvaluateBashEvasion(b *testing.B) {
	p := mustParse(b, `{"name":"d","default_verdict":"allow","rules":[
	  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`)
	input := bashInput(`env X=1 bash -c "sudo -u bob git -C repo push --force origin main" && echo done`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := p.Evaluate("Bash", input); r.Verdict != VerdictDeny {
			b.Fatalf("verdict %v", r.Verdict)
		}
	}
}

// BenchmarkEvaluateBashCompound20: a 20-command compound line, every part
// judged against the catalogue, under the 200-rule policy plus a read rule.
func BenchmarkEvaluateBashCompound20(b *testing.B) {
	doc := strings.Replace(bench200Doc(), `"rules":[`, `"rules":[{"id":"read","tool":"Bash","match":{"command_prefix":["git status","git diff","git log","ls","grep","head","wc","cat"]},"verdict":"allow"},`, 1)
	p := mustParse(b, doc)
	parts := []string{"git status -sb", "git diff --stat HEAD~1", "git log --oneline -20 | head -5", "ls -la src", "grep -rn TODO src | wc -l"}
	var line []string
	for len(line) < 20 {
		line = append(line, parts[len(line)%len(parts)])
	}
	input := bashInput(strings.Join(line, " && "))
	if a := p.Evaluate("Bash", input); a.Verdict != VerdictAllow {
		b.Fatalf("verdict %v (%s)", a.Verdict, a.Reason)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.Evaluate("Bash", input)
	}
}

// BenchmarkEvaluateFileTools: the file tools under a secrets policy (deny
// .env for reads and writes, allow the workspace), a Write, a Read and a
// repository-wide Grep each loop.
func BenchmarkEvaluateFileTools(b *testing.B) {
	p := mustParse(b, `{"name":"files","default_verdict":"deny","rules":[
	  {"id":"env-w","tool":"Write","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"env-r","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"env-g","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"write","tool":"Write","match":{"path":["/work/**"]},"verdict":"allow"},
	  {"id":"read","tool":"Read","match":{"path":["/work/**"]},"verdict":"allow"},
	  {"id":"grep","tool":"Grep","match":{"path":["/work/**"]},"verdict":"allow"}]}`)
	write := decodeJSON(b, `{"file_path":"/work/repo/src/main.go","content":"package main"}`)
	read := decodeJSON(b, `{"file_path":"/work/repo/src/main.go"}`)
	grep := decodeJSON(b, `{"pattern":"TODO","path":"/work/repo","glob":"*.go"}`)
	env := Env{Workspace: "/work/repo", Cwd: "/work/repo"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p.EvaluateIn(env, "Write", write)
		p.EvaluateIn(env, "Read", read)
		p.EvaluateIn(env, "Grep", grep)
	}
}
