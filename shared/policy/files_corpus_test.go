package policy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/policy/tree"
)

// The file corpus (testdata/files_corpus.jsonl) is issue 31's: under a
// policy that denies **/.env, **/*.pem and secrets/** for the file tools
// and allows reads, calls across Read, Grep, Glob and Bash with their
// expected answers ("narrowed": allowed with the search rewritten). Paths
// are relative to the workspace, which is a temporary repository holding
// those secrets ("tree": "clean" for one holding none); every Bash line the
// gate allows (as narrowed, if so) that runs only programs found here is
// run in it, and must print no secret. A Glob carries the report the hook
// would send, walked from the workspace (package tree), unless "report"
// says "none" or "incomplete"; "reason" lists words the reason must hold.
const filesPolicy = `{"name":"secrets","default_verdict":"deny","rules":[
  {"id":"env-read","tool":"Read","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"env-grep","tool":"Grep","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"env-glob","tool":"Glob","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"env-write","tool":"Write","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"read","tool":"Read","match":{"path":["**"]},"verdict":"allow"},
  {"id":"grep","tool":"Grep","match":{"path":["**"]},"verdict":"allow"},
  {"id":"glob","tool":"Glob","match":{"path":["**"]},"verdict":"allow"},
  {"id":"shell-read","tool":"Bash","match":{"command_prefix":["cat","head","tail","wc","ls","grep","rg","find","sed","awk","jq","diff","git show","git diff","git status","git log","git grep"]},"verdict":"allow"},
  {"id":"copy","tool":"Bash","match":{"command_prefix":["cp"],"options":"any"},"verdict":"allow"},
  {"id":"no-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"deny"}]}`

type filesCase struct {
	Tool     string            `json:"tool"`
	Input    map[string]any    `json:"input"`
	Expect   string            `json:"expect"`
	Resolved map[string]string `json:"resolved"`
	Kinds    map[string]string `json:"kinds"`
	Tree     string            `json:"tree"`
	Report   string            `json:"report"`
	Reason   []string          `json:"reason"`
	Note     string            `json:"note"`
}

func readFilesCorpus(t *testing.T) []filesCase {
	t.Helper()
	f, err := os.Open("testdata/files_corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []filesCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c filesCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	return out
}

// ordinaryFiles are a repository's files that no rule denies.
var ordinaryFiles = map[string]string{
	"src/main.go": "package main // KEY=1", "README.md": "read me KEY", ".env.example": "KEY=example",
	"config.json": `{"KEY":1}`, "docs/guide.md": "a guide",
}

// secretRepo writes a workspace holding secrets, each file's content naming
// itself, and returns its path.
func secretRepo(t *testing.T) string {
	t.Helper()
	files := map[string]string{
		".env": "KEY=SECRET-dotenv", ".Env": "KEY=SECRET-dotenv-case", "secrets/k": "KEY=SECRET-dir",
		"keys/server.pem": "KEY=SECRET-pem", "src/deep/secrets/x": "KEY=SECRET-deep", "src/app/.env": "KEY=SECRET-nested",
	}
	for name, body := range ordinaryFiles {
		files[name] = body
	}
	return writeRepo(t, files)
}

// writeRepo writes files (and a link notes.txt to .env, dangling where
// there is none) into a new git repository whose working tree then
// changes every file, and returns its path.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".env", filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	// A repository whose history and working tree change every secret, so
	// that git diff, git log -p and git grep would show them.
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if _, err := exec.LookPath("git"); err == nil {
		git("init", "-q")
		git("add", "-A")
		git("commit", "-qm", "secrets")
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body+" changed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func TestFilesCorpus(t *testing.T) {
	t.Parallel()
	cases := readFilesCorpus(t)
	if len(cases) < 40 {
		t.Fatalf("corpus has %d cases, want at least 40", len(cases))
	}
	p := mustParse(t, filesPolicy)
	trees := map[string]string{"": secretRepo(t), "clean": writeRepo(t, ordinaryFiles)}
	for _, c := range cases {
		ws, ok := trees[c.Tree]
		if !ok {
			t.Fatalf("%s %v: unknown tree %q", c.Tool, c.Input, c.Tree)
		}
		env := Env{Workspace: ws, Cwd: ws, Kinds: c.Kinds, Report: corpusReport(t, c, ws)}
		if c.Resolved != nil {
			env.Resolved = map[string]string{}
			for k, v := range c.Resolved {
				// "command@TEXT" stands for the key a runner sends
				// for the operand TEXT (OperandTextField).
				if text, ok := strings.CutPrefix(k, "command@"); ok {
					k = OperandTextField(text)
				}
				env.Resolved[k] = filepath.Join(ws, v)
			}
		}
		got := p.EvaluateIn(env, c.Tool, c.Input)
		answer := string(got.Verdict)
		if got.Verdict == VerdictAllow && got.UpdatedInput != nil {
			answer = "narrowed"
		}
		if answer != c.Expect {
			t.Errorf("%s %v (tree %q): %s (%s), want %s %s", c.Tool, c.Input, c.Tree, answer, got.Reason, c.Expect, c.Note)
			continue
		}
		for _, w := range c.Reason {
			if !strings.Contains(got.Reason, w) {
				t.Errorf("%s %v: reason %q does not say %q", c.Tool, c.Input, got.Reason, w)
			}
		}
		if c.Tool != "Bash" || got.Verdict != VerdictAllow {
			continue
		}
		cmd, _ := c.Input["command"].(string)
		if got.UpdatedInput != nil {
			cmd, _ = got.UpdatedInput["command"].(string)
		}
		runAllowed(t, ws, cmd)
	}
}

// corpusReport is the report the hook sends with a Glob: the searched
// directory walked (tree.Walk), or none, or one cut at its bound.
func corpusReport(t *testing.T, c filesCase, ws string) *tree.Report {
	t.Helper()
	if c.Tool != "Glob" || c.Report == "none" {
		return nil
	}
	dir, _ := c.Input["path"].(string)
	rep := tree.Walk(context.Background(), tree.Root(dir, ws))
	if !rep.Complete {
		t.Fatalf("%v: the walk of %s is incomplete", c.Input, ws)
	}
	if c.Report == "incomplete" {
		rep.Complete = false
	}
	return &rep
}

// runAllowed runs an allowed line in the workspace when every program it
// names is installed here, and fails if it prints a secret.
func runAllowed(t *testing.T, ws, cmd string) {
	t.Helper()
	for _, prog := range []string{"rg", "jq", "git"} {
		if strings.Contains(cmd, prog+" ") || strings.HasPrefix(cmd, prog) {
			if _, err := exec.LookPath(prog); err != nil {
				return
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", cmd)
	sh.Dir = ws
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + ws, "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_PAGER=cat"}
	out, _ := sh.CombinedOutput()
	if bytes.Contains(out, []byte("SECRET")) {
		t.Errorf("allowed line %q printed a secret:\n%s", cmd, out)
	}
}
