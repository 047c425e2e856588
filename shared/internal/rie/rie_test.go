//go:build unix

package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Built once per test binary: the emulator and the echo function.
var (
	rieBin, echoBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rie-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// A variable of the test process that must not reach the function.
	if err := os.Setenv("ECHO_GREETING", "leaked from the host"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var errRIE, errEcho error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); rieBin, errRIE = BuildRIE(ctx, filepath.Join(dir, "rie")) }()
	go func() {
		defer wg.Done()
		echoBin, errEcho = BuildFunction(ctx, "./testdata/echo", filepath.Join(dir, "echo"))
	}()
	wg.Wait()
	if err := errors.Join(errRIE, errEcho); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func startEcho(t testing.TB, env ...string) *Emulator {
	t.Helper()
	e, err := Start(t.Context(), rieBin, echoBin, env)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("emulator output:\n%s", e.Logs())
		}
	})
	return e
}

type echoed struct {
	Method   string `json:"method"`
	Path     string `json:"path"`
	Body     string `json:"body"`
	Greeting string `json:"greeting"`
	PID      int    `json:"pid"`
}

func invokeEcho(t testing.TB, e *Emulator, method, path, body string) (echoed, error) {
	t.Helper()
	payload, err := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := e.Invoke(t.Context(), payload)
	if err != nil {
		return echoed{}, err
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("Invoke returned %q: not an API Gateway response: %v", raw, err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("statusCode = %d, want 200 (body %q)", resp.StatusCode, resp.Body)
	}
	var got echoed
	if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return got, nil
}

func TestInvokeEcho(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	e := startEcho(t, "ECHO_GREETING=hello")
	started := time.Since(t0)

	t1 := time.Now()
	got, err := invokeEcho(t, e, "POST", "/v1/things", `{"a":1}`)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	first := time.Since(t1)
	want := echoed{Method: "POST", Path: "/v1/things", Body: `{"a":1}`, Greeting: "hello", PID: got.PID}
	if got != want {
		t.Errorf("Invoke = %+v, want %+v", got, want)
	}

	t2 := time.Now()
	again, err := invokeEcho(t, e, "GET", "/healthz", "")
	if err != nil {
		t.Fatalf("second Invoke: %v", err)
	}
	warm := time.Since(t2)
	if again.PID != got.PID {
		t.Errorf("second invoke ran in pid %d, want the warm process %d", again.PID, got.PID)
	}
	t.Logf("start %v, first invoke (cold) %v, warm invoke %v", started, first, warm)
}

func TestEnvironmentIsNotInherited(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	got, err := invokeEcho(t, e, "GET", "/", "")
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if got.Greeting != "" {
		t.Errorf("function saw ECHO_GREETING=%q from the test process, want it unset", got.Greeting)
	}
}

func TestFunctionError(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	_, err := invokeEcho(t, e, "GET", "/fail", "")
	var fe *FunctionError
	if !errors.As(err, &fe) {
		t.Fatalf("Invoke(/fail) error = %v, want a *FunctionError", err)
	}
	if fe.Message != "asked to fail" {
		t.Errorf("FunctionError.Message = %q, want %q", fe.Message, "asked to fail")
	}
	// The environment survives a function error.
	if _, err := invokeEcho(t, e, "GET", "/", ""); err != nil {
		t.Errorf("Invoke after a function error: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	e := startEcho(t, "AWS_LAMBDA_FUNCTION_TIMEOUT=1")
	_, err := invokeEcho(t, e, "GET", "/sleep", "")
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Invoke(/sleep) with a 1 s timeout: error = %v, want ErrTimeout", err)
	}
}

func TestConcurrentInvokesAreSerialised(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprint(i)
			got, err := invokeEcho(t, e, "POST", "/", body)
			if err == nil && got.Body != body {
				err = fmt.Errorf("invoke %d got body %q", i, got.Body)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	e, err := Start(t.Context(), rieBin, echoBin, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	got, err := invokeEcho(t, e, "GET", "/", "")
	if err != nil {
		_ = e.Close()
		t.Fatalf("Invoke: %v", err)
	}
	riePID, fnPID := e.PID(), got.PID
	if processGone(riePID) || processGone(fnPID) {
		t.Fatalf("before Close: emulator %d gone=%v, function %d gone=%v; want both running",
			riePID, processGone(riePID), fnPID, processGone(fnPID))
	}
	t0 := time.Now()
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(t0))
	for name, pid := range map[string]int{"emulator": riePID, "function": fnPID} {
		if !processGone(pid) {
			t.Errorf("after Close the %s (pid %d) is still running", name, pid)
		}
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := e.Invoke(t.Context(), []byte(`{}`)); err == nil {
		t.Error("Invoke after Close succeeded, want an error")
	}
}

func TestStartFailsFast(t *testing.T) {
	t.Parallel()
	if _, err := Start(t.Context(), rieBin, filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("Start with a missing bootstrap succeeded, want an error")
	}
	if _, err := Start(t.Context(), filepath.Join(t.TempDir(), "missing"), echoBin, nil); err == nil {
		t.Error("Start with a missing emulator succeeded, want an error")
	}
}

func TestMergeEnv(t *testing.T) {
	t.Parallel()
	got := mergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4"})
	want := []string{"A=1", "B=3", "C=4"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mergeEnv = %v, want %v", got, want)
	}
}

// BenchmarkInvoke measures one warm invocation through the emulator.
func BenchmarkInvoke(b *testing.B) {
	e := startEcho(b)
	payload, _ := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/"})
	for b.Loop() {
		if _, err := e.Invoke(b.Context(), payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartInvokeClose measures a cold start: emulator up, first
// invoke (which starts the bootstrap), shut down.
func BenchmarkStartInvokeClose(b *testing.B) {
	payload, _ := json.Marshal(events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/"})
	for b.Loop() {
		e, err := Start(b.Context(), rieBin, echoBin, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Invoke(b.Context(), payload); err != nil {
			b.Fatal(err)
		}
		_ = e.Close()
	}
}

// TestBuildsAreShared builds the echo function from many goroutines at
// once, as test packages running in parallel do, after removing the shared
// output TestMain's build left: one of them links it again, the others wait
// for it under the lock, and every caller gets a complete copy of its own.
func TestBuildsAreShared(t *testing.T) {
	ctx := t.Context()
	env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH}
	dir, err := sharedDir(ctx, env, []string{"-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "./testdata/echo"})
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "bootstrap")
	if err := os.Remove(shared); err != nil {
		t.Fatalf("TestMain's build left no shared output: %v", err)
	}
	want, err := os.ReadFile(echoBin)
	if err != nil {
		t.Fatal(err)
	}

	const builders = 8
	paths := make([]string, builders)
	errs := make([]error, builders)
	var wg sync.WaitGroup
	for i := range builders {
		wg.Go(func() {
			paths[i], errs[i] = BuildFunction(ctx, "./testdata/echo", filepath.Join(t.TempDir(), "echo"))
		})
	}
	wg.Wait()
	sharedInfo, err := os.Stat(shared)
	if err != nil {
		t.Fatalf("no shared output after the builds: %v", err)
	}
	for i := range builders {
		if errs[i] != nil {
			t.Fatalf("builder %d: %v", i, errs[i])
		}
		got, err := os.ReadFile(paths[i])
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("builder %d's copy %s differs from TestMain's build (%v)", i, paths[i], err)
		}
		if info, err := os.Stat(paths[i]); err != nil || os.SameFile(info, sharedInfo) {
			t.Errorf("builder %d was handed the shared output itself, not a copy (%v)", i, err)
		}
	}
}
