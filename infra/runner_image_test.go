package infra

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is runner/Dockerfile as instructions: continuation lines
// joined, comments and blank lines dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../runner/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur string
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

// makeVar is the value of a `NAME := value` line of the Makefile.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(\S+)\s*$`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("the Makefile has no %s", name)
	}
	return m[1]
}

// TestRunnerImagePins: the image's Claude Code is the version the e2e
// suites run (the Makefile's CLAUDE_CODE_VERSION, the one the hook's
// schemas were checked against), installed once and checked after; its
// fluidbox is built with go.mod's Go; git is installed.
func TestRunnerImagePins(t *testing.T) {
	t.Parallel()
	lines := dockerfile(t)
	want := makeVar(t, "CLAUDE_CODE_VERSION")
	var args, installs []string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "ARG CLAUDE_CODE_VERSION="); ok {
			args = append(args, v)
		}
		if strings.Contains(l, "@anthropic-ai/claude-code") {
			installs = append(installs, l)
		}
	}
	if !slices.Equal(args, []string{want}) {
		t.Errorf("runner/Dockerfile pins Claude Code %v, want the Makefile's %s", args, want)
	}
	if len(installs) != 1 || !strings.Contains(installs[0], "npm install --global") || !strings.Contains(installs[0], "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}") ||
		!strings.Contains(installs[0], `test "$(claude --version)" = "${CLAUDE_CODE_VERSION} (Claude Code)"`) {
		t.Errorf("Claude Code installs: %q, want one npm install of the pinned version, checked", installs)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if goVersion == nil {
		t.Fatal("go.mod has no go line")
	}
	if !slices.Contains(lines, "FROM --platform=$BUILDPLATFORM golang:"+string(goVersion[1])+"-bookworm AS build") {
		t.Errorf("runner/Dockerfile does not build with golang:%s (go.mod's)", goVersion[1])
	}
	if !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "RUN apt-get update") && strings.Contains(l, "apt-get install -y --no-install-recommends git ")
	}) {
		t.Error("runner/Dockerfile does not install git")
	}
	if !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "COPY --from=build /out/fluidbox /usr/local/bin/fluidbox")
	}) {
		t.Error("runner/Dockerfile does not copy the fluidbox binary it built")
	}
}

// TestRunnerImageLayout: the image lays out the sandbox with `fluidbox
// runner --layout` (runner.Layout, the code the local launcher and every
// runner start use) for the unprivileged user it creates, and its
// entrypoint, which stays root, runs the runner with the same user and
// paths: what was laid out is what runs.
func TestRunnerImageLayout(t *testing.T) {
	t.Parallel()
	lines := dockerfile(t)
	const paths = `"--user", "agent", "--workdir", "/workspace", "--home", "/home/agent", "--managed-settings", "/etc/claude-code/managed-settings.json"]`
	if !slices.Contains(lines, `RUN ["/usr/local/bin/fluidbox", "runner", "--layout", `+paths) {
		t.Error("runner/Dockerfile does not lay out the sandbox with `fluidbox runner --layout` for agent")
	}
	if !slices.Contains(lines, `ENTRYPOINT ["/usr/local/bin/fluidbox", "runner", `+paths) {
		t.Error("runner/Dockerfile's entrypoint is not `fluidbox runner` with the laid-out user and paths")
	}
	useradd := regexp.MustCompile(`^RUN useradd --system --uid ([1-9][0-9]+) .*--shell /usr/sbin/nologin agent$`)
	var users int
	for _, l := range lines {
		if useradd.MatchString(l) {
			users++
		}
		if u, ok := strings.CutPrefix(l, "USER "); ok && u != "root" {
			t.Errorf("runner/Dockerfile switches to %s: the runner must stay root to drop the agent to its user", u)
		}
	}
	if users != 1 {
		t.Error("runner/Dockerfile does not create the unprivileged user agent (no shell, a non-zero uid)")
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "ENTRYPOINT ") {
		t.Errorf("runner/Dockerfile ends with %q, want the entrypoint", last)
	}
}
