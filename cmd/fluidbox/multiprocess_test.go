package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/devstack"
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
		// Built as shared/internal/rie builds the Lambda functions (static,
		// -tags lambda.norpc, -trimpath), so that on a fresh cache the
		// packages they share are compiled once for both.
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", binPath, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
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
	dbURL string
	urls  []string // one per dev process
	db    *proc
	devs  []*proc
}

type proc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// cpu is the processor time p has used so far (user and system, from
// /proc: the benchmarks run on Linux), or 0 where it cannot be read.
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which ends with the last ')':
	// utime and stime are the 12th and 13th, in clock ticks (100 a second
	// on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// errorsOf is what the dev process serving caller i logged at WARN or
// ERROR (the cause of a 503, which the answer never says), then whatever
// the table's process printed (a panic serving a request would be there).
func (c *cluster) errorsOf(i int) string {
	var out []string
	for _, line := range strings.Split(c.devs[i%len(c.devs)].out.String(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + "\nfluidbox dynamodb printed:\n" + c.db.out.String()
}

// cpu is the processor time the dev processes and the table have used.
func (c *cluster) cpu() (devs, db time.Duration) {
	for _, d := range c.devs {
		devs += d.cpu()
	}
	return devs, c.db.cpu()
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
	c := &cluster{t: t, token: "multi-admin-token-0123456789", dbURL: "http://" + dbAddr}
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
	for i := range n {
		addr := freeAddr(t)
		// The tests send one run's requests by the dozen at once, and
		// the benchmarks some thousands a minute (the default 600 would
		// refuse them); the bounds on a run's open requests and requests
		// a minute have their own tests.
		env := []string{"FLUIDBOX_ADDR=" + addr, "FLUIDBOX_ADMIN_TOKEN=" + c.token, "AWS_ENDPOINT_URL_DYNAMODB=" + c.dbURL, "FLUIDBOX_TABLE=multi", "FLUIDBOX_RUN_MAX_OPEN_REQUESTS=100", "FLUIDBOX_RUN_REQUESTS_PER_MINUTE=100000"}
		if i > 0 {
			// As on AWS: the API's instances number events only when
			// they read them; one sequencer (the notify function there,
			// process 0 here) numbers the rest.
			env = append(env, "FLUIDBOX_SEQUENCER=read")
		}
		dev := startProc(t, bin, env, "dev")
		c.devs = append(c.devs, dev)
		c.urls = append(c.urls, "http://"+addr)
	}
	for _, u := range c.urls {
		waitHealthy(t, u)
	}
	return c
}

// dbRequests is how many DynamoDB requests the table has served so far,
// as its validating layer counts them: asked of `fluidbox dynamodb`
// itself, since a counting proxy between the processes and the table
// would add a hop and its processor time to every request it counts (on
// two cores, a fifth of the machine at 16 callers).
func (c *cluster) dbRequests(t testing.TB) int64 {
	t.Helper()
	resp, err := clusterClient.Get(c.dbURL + devstack.DynamoStatsPath)
	if err != nil {
		t.Fatalf("the table's counts: %v", err)
	}
	defer resp.Body.Close()
	var st devstack.DynamoStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("the table's counts: %v", err)
	}
	return st.Requests
}

// tableItems is how many items the shared table holds now.
func (c *cluster) tableItems(t testing.TB) int64 {
	t.Helper()
	client := devstack.DynamoClient(c.dbURL)
	var n int64
	p := ddb.NewScanPaginator(client, &ddb.ScanInput{TableName: aws.String("multi"), Select: types.SelectCount})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan the table: %v", err)
		}
		n += int64(page.Count)
	}
	return n
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
// `fluidbox dynamodb --chaos latency=20ms,hold=18ms,conflict=0.2,throttle=0.05`
// (the DynamoDB timing model, and random faults on top), one run: 24
// concurrent permission requests spread over the processes (no 503, every
// one decided or pending), then for each approval three deciders racing
// from different processes (exactly one wins), then the re-asks; the
// ledger is gapless with exactly one decision per call.
func TestMultiProcessUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and execs fluidbox")
	}
	const procs, calls = 3, 24
	c := startCluster(t, procs, benchChaos+",conflict=0.2,throttle=0.05,seed=12")
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
			t.Fatalf("call c%02d = %d %v, want 200 %s; its process logged:\n%s", i, a.status, a.body, want, c.errorsOf(i))
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

// benchChaos is DynamoDB's timing as the benchmarks model it: a
// TransactWriteItems takes 20 ms and holds its items for 18 of them, and
// one that meets a held item is cancelled with TransactionConflict.
const benchChaos = "latency=20ms,hold=18ms"

// BenchmarkMultiProcessDecisions: 1, 4, 16 and 32 concurrent callers in
// one run, one `fluidbox dev` process per caller as on Lambda (API
// Gateway gives each request in flight its own instance), under the
// DynamoDB timing model, alone and with conflict=0.2 on top. Reports
// decisions/s of the run, the p50/p99 latency of a decision, the share
// answered 503 (which the runner takes as deny), DynamoDB requests per
// decision, and the table's size at the end of the cell. Each cell has a
// table of its own (minidyn copies the whole table on every transaction,
// so a shared one would slow the later cells for that reason alone).
// Every request must be answered allow.
func BenchmarkMultiProcessDecisions(b *testing.B) {
	for _, chaos := range []string{benchChaos, benchChaos + ",conflict=0.2,seed=3"} {
		name := "model"
		if strings.Contains(chaos, "conflict") {
			name = "model+conflict=0.2"
		}
		b.Run(name, func(b *testing.B) {
			for _, callers := range []int{1, 4, 16, 32} {
				b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
					b.StopTimer()
					c := startCluster(b, callers, chaos)
					b.StartTimer()
					benchDecisions(b, c, callers)
				})
			}
		})
	}
}

func benchDecisions(b *testing.B, c *cluster, callers int) {
	id, tok := c.run(multiPolicy)
	// Each process first decides once, untimed: a run's first decision on
	// an instance reads the run's state and reserves its share of the rate
	// limit (its requests are counted by TestRequestsPerDecision); with
	// 400 decisions over 32 instances, timing those would make the p99 a
	// measure of cold instances, not of parallel calls.
	var warm sync.WaitGroup
	for w := range callers {
		warm.Go(func() {
			if st, body := c.do(w, "POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": fmt.Sprintf("warm%02d", w), "tool_name": "Bash", "input": map[string]any{"command": "git status"}}); st != 200 || body["decision"] != "allow" {
				b.Errorf("warm-up of process %d: %d %v, want allow", w, st, body)
			}
		})
	}
	warm.Wait()
	before := c.dbRequests(b)
	devsBefore, dbBefore := c.cpu()
	lat := make([]time.Duration, b.N)
	status := make([]int, b.N)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for w := range callers {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				st, body := c.do(w, "POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": fmt.Sprintf("b%06d", i), "tool_name": "Bash", "input": map[string]any{"command": "git status"}})
				lat[i] = time.Since(t0)
				status[i] = st
				if st != 200 && st != 503 || st == 200 && body["decision"] != "allow" {
					b.Errorf("request %d: %d %v, want allow (or a 503, counted)", i, st, body)
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
	devsAfter, dbAfter := c.cpu()
	unavailable := 0
	for _, st := range status {
		if st == 503 {
			unavailable++
		}
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	pct := func(p float64) float64 {
		return float64(sorted[min(len(sorted)-1, int(p*float64(len(sorted))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(b.N-unavailable)/elapsed.Seconds(), "decided/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(100*float64(unavailable)/float64(b.N), "503-%")
	b.ReportMetric(float64(c.dbRequests(b)-before)/float64(b.N), "requests/decision")
	b.ReportMetric(float64(c.tableItems(b)), "table-items")
	// Processor time per decision, fluidbox's and the local table's apart:
	// on two cores it is what bounds decisions/s and stretches the p99,
	// whatever the machine's load.
	b.ReportMetric(float64((devsAfter-devsBefore).Microseconds())/1000/float64(b.N), "fluidbox-cpu-ms/decision")
	b.ReportMetric(float64((dbAfter-dbBefore).Microseconds())/1000/float64(b.N), "table-cpu-ms/decision")
	b.ReportMetric(0, "ns/op")
}

// TestTimelineOf32ParallelCallers: 32 callers decide in one run at once,
// spread over eight `fluidbox dev` processes under the DynamoDB timing
// model, while a follower long-polls the run's timeline through another
// of them. No call is refused; the timeline is gapless with each call's
// request and decision once; and the follower sees every decision within
// 2 s of its answer (it waits for each with that deadline).
func TestTimelineOf32ParallelCallers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and execs fluidbox")
	}
	const procs, callers, each = 8, 32, 3
	c := startCluster(t, procs, benchChaos)
	id, tok := c.run(multiPolicy)

	var mu sync.Mutex
	seen := map[string]chan struct{}{}
	arrived := func(call string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		ch, ok := seen[call]
		if !ok {
			ch = make(chan struct{})
			seen[call] = ch
		}
		return ch
	}
	stop := make(chan struct{})
	followed := make(chan []map[string]any, 1)
	go func() {
		var all []map[string]any
		defer func() { followed <- all }()
		after := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, body := c.do(procs-1, "GET", fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=1000&wait_seconds=1", id, after), c.token, nil)
			if st != 200 {
				t.Errorf("follow after %d = %d %v", after, st, body)
				return
			}
			evs, _ := body["events"].([]any)
			for _, e := range evs {
				m := e.(map[string]any)
				all = append(all, m)
				after = int(m["seq"].(float64))
				if m["type"] == "tool.decision" {
					d, _ := m["data"].(map[string]any)
					close(arrived(fmt.Sprint(d["tool_call_id"])))
				}
			}
		}
	}()

	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for i := range each {
				call := fmt.Sprintf("p%02d-%d", w, i)
				st, body := c.do(w%(procs-1), "POST", "/v1/sessions/"+id+"/permission", tok, map[string]any{"tool_call_id": call, "tool_name": "Bash", "input": map[string]any{"command": "git status"}})
				if st != 200 || body["decision"] != "allow" {
					t.Errorf("%s = %d %v, want 200 allow", call, st, body)
					continue
				}
				select {
				case <-arrived(call):
				case <-time.After(2 * time.Second):
					t.Errorf("%s: its decision was not on the timeline 2 s after the answer", call)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	all := <-followed
	calls := map[string]int{}
	for i, m := range all {
		if m["seq"] != float64(i+1) {
			t.Fatalf("timeline gap: seq %v at position %d", m["seq"], i)
		}
		if m["type"] == "tool.requested" || m["type"] == "tool.decision" {
			d, _ := m["data"].(map[string]any)
			calls[fmt.Sprint(d["tool_call_id"])]++
		}
	}
	if len(calls) != callers*each {
		t.Errorf("%d calls on the timeline, want %d", len(calls), callers*each)
	}
	for call, n := range calls {
		if n != 2 {
			t.Errorf("%s has %d events, want its request and decision", call, n)
		}
	}
	for i, d := range c.devs {
		if strings.Contains(d.out.String(), "status=503") {
			t.Errorf("process %d answered a 503", i)
		}
	}
}
