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
)

// The file corpus (testdata/files_corpus.jsonl) is issue 31's: under a
// policy that denies **/.env, **/*.pem and secrets/** for the file tools
// and allows reads, calls across Read, Grep, Glob and Bash with their
// expected answers ("narrowed": allowed with the search rewritten). Paths
// are relative to the workspace, which is a temporary repository holding
// those secrets; every Bash line the gate allows (as narrowed, if so) that
// runs only programs found here is run in it, and must print no secret.
const filesPolicy = `{"name":"secrets","default_verdict":"deny","rules":[
  {"id":"env-read","tool":"Read","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"env-grep","tool":"Grep","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"env-glob","tool":"Glob","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"env-write","tool":"Write","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
  {"id":"read","tool":"Read","match":{"path":["**"]},"verdict":"allow"},
  {"id":"grep","tool":"Grep","match":{"path":["**"]},"verdict":"allow"},
  {"id":"glob","tool":"Glob","match":{"path":["**"]},"verdict":"allow"},
  {"id":"shell-read","tool":"Bash","match":{"command_prefix":["cat","head","tail","wc","ls","grep","rg","find","sed","awk","jq","diff","git show","git diff","git status","git log","git grep"]},"verdict":"allow"},
  {"id":"copy","tool":"Bash","match":{"command_prefix":["cp"],"options":"any"},"verdict":"allow"}]}`

type filesCase struct {
	Tool     string            `json:"tool"`
	Input    map[string]any    `json:"input"`
	Expect   string            `json:"expect"`
	Resolved map[string]string `json:"resolved"`
	Kinds    map[string]string `json:"kinds"`
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

// secretRepo writes a workspace holding secrets, each file's content naming
// itself, and returns its path.
func secretRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		".env": "KEY=SECRET-dotenv", ".Env": "KEY=SECRET-dotenv-case", "secrets/k": "KEY=SECRET-dir",
		"keys/server.pem": "KEY=SECRET-pem", "src/deep/secrets/x": "KEY=SECRET-deep", "src/app/.env": "KEY=SECRET-nested",
		"src/main.go": "package main // KEY=1", "README.md": "read me KEY", ".env.example": "KEY=example",
		"config.json": `{"KEY":1}`,
	}
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
	ws := secretRepo(t)
	for _, c := range cases {
		env := Env{Workspace: ws, Cwd: ws, Kinds: c.Kinds}
		if c.Resolved != nil {
			env.Resolved = map[string]string{}
			for k, v := range c.Resolved {
				env.Resolved[k] = filepath.Join(ws, v)
			}
		}
		got := p.EvaluateIn(env, c.Tool, c.Input)
		answer := string(got.Verdict)
		if got.Verdict == VerdictAllow && got.UpdatedInput != nil {
			answer = "narrowed"
		}
		if answer != c.Expect {
			t.Errorf("%s %v: %s (%s), want %s %s", c.Tool, c.Input, answer, got.Reason, c.Expect, c.Note)
			continue
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
