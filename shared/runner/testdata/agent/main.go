// Command agent stands in for the Claude Code CLI in the runner's tests: it
// is run as `claude -p PROMPT --output-format json` and reports, as its
// final message, what it could see and do from inside: its user, its
// environment, whether it could read the runner's environment and files,
// whether it could change the managed settings, and the workspace.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
	Interfaces     []string          `json:"interfaces,omitempty"`
	Dial           string            `json:"dial,omitempty"`
	ControlPlane   string            `json:"control_plane,omitempty"`
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return "error"
}

// interfaces lists this process's network namespace's interfaces
// (/proc/self/net/dev is per namespace; /sys/class/net is not).
func interfaces() []string {
	b, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		return []string{"unreadable"}
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out = append(out, name)
		}
	}
	return out
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
		// Dial is an address to try, only once the agent has seen that
		// its network namespace holds nothing but loopback: a test must
		// never send a packet anywhere else.
		Dial string
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
	if prompt.Dial != "" {
		r.Interfaces = interfaces()
		if len(r.Interfaces) == 1 && r.Interfaces[0] == "lo" {
			c, err := net.DialTimeout("tcp", prompt.Dial, 2*time.Second)
			if err == nil {
				c.Close()
				r.Dial = "connected"
			} else {
				r.Dial = err.Error()
			}
		} else {
			r.Dial = "not dialled: the namespace has more than loopback"
		}
		resp, err := http.Get(os.Getenv("FLUIDBOX_URL") + "/healthz")
		if err != nil {
			r.ControlPlane = "error"
		} else {
			resp.Body.Close()
			r.ControlPlane = resp.Status
		}
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
