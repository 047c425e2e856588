// Command agent stands in for the Claude Code CLI in the runner's tests: it
// is run as `claude -p PROMPT --output-format json` and reports, as its
// final message, what it could see and do from inside: its user, its
// environment, whether it could read the runner's environment and files,
// whether it could change the managed settings, and the workspace.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type report struct {
	UID            int               `json:"uid"`
	Args           []string          `json:"args"`
	Env            map[string]string `json:"env"`
	ParentEnviron  string            `json:"parent_environ"`
	ReadProbe      string            `json:"read_probe"`
	WriteSettings  string            `json:"write_settings"`
	Settings       string            `json:"settings"`
	Files          []string          `json:"files"`
	ReadmeContents string            `json:"readme"`
	Cwd            string            `json:"cwd"`
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return "error"
}

func main() {
	r := report{UID: os.Getuid(), Args: os.Args[1:], Env: map[string]string{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		r.Env[k] = v
	}
	// The prompt says what to probe: {"probe": a file, "settings": the
	// managed settings, "sleep": true}. The environment cannot: the runner
	// builds it from nothing.
	var prompt struct {
		Probe, Settings string
		Sleep           bool
	}
	if len(os.Args) > 2 {
		_ = json.Unmarshal([]byte(os.Args[2]), &prompt)
	}
	if prompt.Sleep {
		time.Sleep(time.Hour)
	}
	_, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
	r.ParentEnviron = errText(err)
	if p := prompt.Probe; p != "" {
		_, err = os.ReadFile(p)
		r.ReadProbe = errText(err)
	}
	if settings := prompt.Settings; settings != "" {
		b, _ := os.ReadFile(settings)
		r.Settings = string(b)
		r.WriteSettings = errText(os.WriteFile(settings, []byte("{}"), 0o644))
	}
	r.Cwd, _ = os.Getwd()
	_ = filepath.Walk(".", func(p string, info os.FileInfo, err error) error {
		if err == nil && p != "." {
			r.Files = append(r.Files, p)
		}
		return nil
	})
	sort.Strings(r.Files)
	b, _ := os.ReadFile("README.md")
	r.ReadmeContents = string(b)
	msg, _ := json.Marshal(r)
	out, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "result": string(msg)})
	os.Stdout.Write(out)
	os.Exit(3)
}
