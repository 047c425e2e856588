package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The multi-process stack: one `fluidbox dynamodb --chaos ...` and several
// `fluidbox dev` processes sharing its table, as Lambda instances share
// one, each a built binary exec'd on 127.0.0.1.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// fluidboxBinary builds this command once per test binary.
func fluidboxBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fluidbox-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "fluidbox")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type cluster struct {
	t     testing.TB
	token string
	urls  []string // one per dev process
	db    *proc
	devs  []*proc
}

type proc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

func startProc(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &syncBuffer{}}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop() })
	return p
}

// stop interrupts the process and waits for it; it kills it if it does
// not stop in time.
func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// startCluster starts `fluidbox dynamodb --chaos chaos` and n `fluidbox
// dev` processes on its table.
func startCluster(t testing.TB, n int, chaos string) *cluster {
	t.Helper()
	bin := fluidboxBinary(t)
	dbAddr := freeAddr(t)
	args := []string{"dynamodb", "--addr", dbAddr}
	if chaos != "" {
		args = append(args, "--chaos", chaos)
	}
	c := &cluster{t: t, token: "multi-admin-token-0123456789"}
	c.db = startProc(t, bin, nil, args...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", dbAddr)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fluidbox dynamodb did not listen: %s", c.db.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range n {
		addr := freeAddr(t)
		// The tests send one run's requests by the dozen at once; the
		// bound on a run's open requests has its own tests.
		dev := startProc(t, bin, []string{"FLUIDBOX_ADDR=" + addr, "FLUIDBOX_ADMIN_TOKEN=" + c.token,
			"AWS_ENDPOINT_URL_DYNAMODB=http://" + dbAddr, "FLUIDBOX_TABLE=multi", "FLUIDBOX_RUN_MAX_OPEN_REQUESTS=100"}, "dev")
		waitHealthy(t, "http://"+addr)
		c.devs = append(c.devs, dev)
		c.urls = append(c.urls, "http://"+addr)
	}
	return c
}

var clusterClient = &http.Client{Timeout: 30 * time.Second}

// do sends one request to dev process i and returns the status and body.
func (c *cluster) do(i int, method, path, tok string, body any) (int, map[string]any) {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.urls[i%len(c.urls)]+path, r)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := clusterClient.Do(req)
	if err != nil {
		return 0, map[string]any{"transport_error": err.Error()}
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (c *cluster) must(i, want int, method, path, tok string, body any) map[string]any {
	c.t.Helper()
	status, out := c.do(i, method, path, tok, body)
	if status != want {
		c.t.Fatalf("process %d: %s %s = %d %v, want %d", i%len(c.urls), method, path, status, out, want)
	}
	return out
}

// run creates a policy and one run on it.
func (c *cluster) run(policy string) (string, string) {
	c.t.Helper()
	pol := c.must(0, 201, "POST", "/v1/policies", c.token, policy)["id"].(string)
	ses := c.must(0, 201, "POST", "/v1/sessions", c.token, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	return ses["id"].(string), ses["token"].(string)
}

const multiPolicy = `{"name":"multi","default_verdict":"deny","rules":[
 {"id":"read","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"allow"},
 {"id":"ask","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"}]}`

// TestMultiProcessUnderChaos: three `fluidbox dev` processes on one
// `fluidbox dynamodb --chaos conflict=0.2,throttle=0.05`, one run: 24
// concurrent permission requests spread over the processes (no 503, every
// one decided or pending), then for each approval three deciders racing
// from different processes (exactly one wins), then the re-asks; the
// ledger is gapless with exactly one decision per call.
func TestMultiProcessUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and execs fluidbox")
	}
	const procs, calls = 3, 24
	c := startCluster(t, procs, "conflict=0.2,throttle=0.05,seed=12")
	id, tok := c.run(multiPolicy)
	perm := func(i int, call, cmd string) (int, map[string]any) {
		return c.do(i, "POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": call, "tool_name": "Bash", "input": map[string]any{"command": cmd}})
	}
	cmdOf := func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf("rm -rf build%d", i)
		}
		return "git status"
	}

	type answer struct {
		status int
		body   map[string]any
	}
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			st, b := perm(i, fmt.Sprintf("c%02d", i), cmdOf(i))
			answers[i] = answer{st, b}
		})
	}
	wg.Wait()
	approvals := map[int]string{}
	for i, a := range answers {
		want := "allow"
		if i%3 == 0 {
			want = "pending"
		}
		if a.status != 200 || a.body["decision"] != want {
			t.Fatalf("call c%02d = %d %v, want 200 %s", i, a.status, a.body, want)
		}
		if want == "pending" {
			approvals[i] = a.body["approval_id"].(string)
		}
	}

	// Racing deciders: three processes decide each approval at once.
	wins := map[string][]string{}
	var mu sync.Mutex
	for _, apr := range approvals {
		for d, decision := range []string{"approved_once", "denied", "approved_once"} {
			wg.Go(func() {
				st, b := c.do(d, "POST", "/v1/approvals/"+apr+"/decision", c.token, map[string]any{"decision": decision})
				if st != 200 {
					t.Errorf("decide %s from process %d = %d %v", apr, d, st, b)
					return
				}
				if b["applied"] == true {
					mu.Lock()
					wins[apr] = append(wins[apr], fmt.Sprint(b["status"]))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, apr := range approvals {
		if len(wins[apr]) != 1 {
			t.Fatalf("approval %s: %d winners %v, want exactly one", apr, len(wins[apr]), wins[apr])
		}
	}

	// The re-asks get the winner's answer.
	for i, apr := range approvals {
		wg.Go(func() {
			want := "allow"
			if wins[apr][0] == "denied" {
				want = "deny"
			}
			if st, b := perm(i+1, fmt.Sprintf("c%02d", i), cmdOf(i)); st != 200 || b["decision"] != want {
				t.Errorf("re-ask c%02d = %d %v, want %s", i, st, b, want)
			}
		})
	}
	wg.Wait()

	evs := c.must(0, 200, "GET", "/v1/sessions/"+id+"/events?after=0&limit=1000", c.token, nil)["events"].([]any)
	counts := map[string]int{}
	decisions := map[string]int{}
	for i, e := range evs {
		m := e.(map[string]any)
		if m["seq"] != float64(i+1) {
			t.Fatalf("ledger gap: seq %v at position %d", m["seq"], i)
		}
		counts[m["type"].(string)]++
		if m["type"] == "tool.decision" {
			data, _ := json.Marshal(m["data"])
			var d struct {
				ToolCallID string `json:"tool_call_id"`
			}
			_ = json.Unmarshal(data, &d)
			decisions[d.ToolCallID]++
		}
	}
	want := map[string]int{"session.created": 1, "tool.requested": calls, "approval.requested": len(approvals), "approval.decided": len(approvals), "tool.decision": calls}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("event counts = %v, want %v", counts, want)
	}
	for call, n := range decisions {
		if n != 1 {
			t.Errorf("call %s decided %d times", call, n)
		}
	}
	c.db.stop()
	stats := c.db.out.String()
	if !strings.Contains(stats, "failed by chaos") {
		t.Fatalf("fluidbox dynamodb reported no chaos: %s", stats)
	}
	lines := strings.Split(strings.TrimSpace(stats), "\n")
	t.Logf("fluidbox dynamodb: %s", lines[len(lines)-1])
	if strings.Contains(stats, " 0 failed by chaos") {
		t.Error("no request failed by chaos: the test proved nothing")
	}
	for i, d := range c.devs {
		if strings.Contains(d.out.String(), "status=503") {
			t.Errorf("process %d answered a 503", i)
		}
	}
}

// BenchmarkMultiProcessDecisions: four `fluidbox dev` processes, one run,
// 16 concurrent permission requests at a time, with and without
// --chaos conflict=0.2. Reports decisions/s and the p50/p99 latency of a
// decision; every request must be decided.
func BenchmarkMultiProcessDecisions(b *testing.B) {
	for _, chaos := range []string{"", "conflict=0.2,seed=3"} {
		name := "chaos=none"
		if chaos != "" {
			name = "chaos=" + strings.Split(chaos, ",")[0]
		}
		b.Run(name, func(b *testing.B) {
			const procs, workers = 4, 16
			c := startCluster(b, procs, chaos)
			id, tok := c.run(multiPolicy)
			lat := make([]time.Duration, b.N)
			var failed sync.Map
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			next := make(chan int)
			for w := range workers {
				wg.Go(func() {
					for i := range next {
						t0 := time.Now()
						st, body := c.do(w, "POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": fmt.Sprintf("b%06d", i), "tool_name": "Bash", "input": map[string]any{"command": "git status"}})
						lat[i] = time.Since(t0)
						if st != 200 || body["decision"] != "allow" {
							failed.Store(i, fmt.Sprintf("%d %v", st, body))
						}
					}
				})
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			failed.Range(func(k, v any) bool {
				b.Errorf("request %v not decided: %v", k, v)
				return false
			})
			sorted := slices.Clone(lat)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
			pct := func(p float64) float64 {
				return float64(sorted[min(len(sorted)-1, int(p*float64(len(sorted))))].Microseconds()) / 1000
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
