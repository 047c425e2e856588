//go:build unix

// Package rie runs built Lambda `bootstrap` binaries under the AWS Lambda
// Runtime Interface Emulator: our stand-in for `sam local invoke`, with no
// Docker and no network beyond the loopback interface.
//
// Guarantees:
//   - Both of the emulator's listeners (the invoke API and the Runtime API the
//     bootstrap talks to) are bound to 127.0.0.1 on ports chosen here. The
//     emulator's own defaults are 0.0.0.0:8080 and 127.0.0.1:9001, which would
//     expose the function and make two emulators collide.
//   - The function sees only the environment given to Start plus the Lambda
//     variables set here (timeout, name, memory, region): never the caller's
//     environment, so real AWS credentials on the host do not leak into it.
//   - Close stops the emulator and the bootstrap it spawned (which runs in a
//     process group of its own) and waits for them.
//
// The package is unix-only: it manages process groups, and the binaries it
// runs are Linux executables.
package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// InvokePath is the emulator's invoke endpoint (the Lambda Invoke API path).
const InvokePath = "/2015-03-31/functions/function/invocations"

const (
	// readyTimeout bounds how long Start waits for the emulator to listen.
	// It is ready in ~20 ms on a warm machine; the bound only matters when
	// something is wrong.
	readyTimeout = 10 * time.Second
	// stopGrace is how long Close lets the emulator shut the runtime down on
	// SIGTERM before everything is killed.
	stopGrace = 3 * time.Second
	// maxLogBytes caps the captured output; the newest bytes are kept.
	maxLogBytes = 1 << 20
	// startAttempts covers the small race between choosing a free port and
	// the emulator binding it.
	startAttempts = 3
)

// Default environment of the function, overridable through Start's env.
var defaultEnv = []string{
	"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
	"AWS_LAMBDA_FUNCTION_NAME=fluidbox-local",
	"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
	"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
	"AWS_REGION=us-east-1",
	"AWS_DEFAULT_REGION=us-east-1",
	"LOG_LEVEL=warn", // the emulator's own log level
}

// ErrTimeout is returned by Invoke when the function ran past
// AWS_LAMBDA_FUNCTION_TIMEOUT. (The emulator answers 200 with a plain-text
// "Task timed out" body, which is easy to mistake for a result.)
var ErrTimeout = errors.New("rie: function timed out")

// FunctionError is a function's own error result: its handler returned an
// error or panicked. Lambda reports it as a successful invoke whose payload
// is {"errorMessage": ..., "errorType": ...}.
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("rie: function error %s: %s", e.Type, e.Message)
}

// StatusError is a non-2xx answer of the emulator itself (bad request, the
// runtime crashed during init, ...).
type StatusError struct {
	StatusCode int
	Body       string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("rie: emulator answered %d: %s", e.StatusCode, e.Body)
}

// Emulator is one running aws-lambda-rie process serving one bootstrap.
type Emulator struct {
	cmd      *exec.Cmd
	url      string
	logs     *logBuffer
	client   *http.Client
	exited   chan struct{} // closed when the emulator process has been reaped
	waitErr  error         // set before exited is closed
	invokeMu sync.Mutex    // the emulator serves one invoke at a time
	closeMu  sync.Mutex
	closed   bool
}

// Start runs rieBinary serving bootstrap and returns once the emulator
// accepts connections. env is the function's environment (KEY=VALUE);
// entries override the defaults (AWS_LAMBDA_FUNCTION_TIMEOUT=30, a
// function name, memory size, AWS_REGION=us-east-1). The function is
// initialised lazily by the first Invoke, as the real service does.
//
// ctx bounds start-up only; the emulator runs until Close.
func Start(ctx context.Context, rieBinary, bootstrap string, env []string) (*Emulator, error) {
	if _, err := os.Stat(rieBinary); err != nil {
		return nil, fmt.Errorf("rie: emulator binary: %w", err)
	}
	if _, err := os.Stat(bootstrap); err != nil {
		return nil, fmt.Errorf("rie: bootstrap: %w", err)
	}
	var lastErr error
	for range startAttempts {
		e, err := start(ctx, rieBinary, bootstrap, env)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if ctx.Err() != nil || !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return nil, lastErr
}

var errExitedEarly = errors.New("emulator exited before it was ready")

func start(ctx context.Context, rieBinary, bootstrap string, env []string) (*Emulator, error) {
	invokeAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	runtimeAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	logs := &logBuffer{max: maxLogBytes}
	cmd := exec.Command(rieBinary,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		bootstrap)
	cmd.Env = mergeEnv(defaultEnv, env)
	cmd.Stdout = logs
	cmd.Stderr = logs
	// Own process group, so Close can signal the emulator and anything it
	// forks without touching the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The bootstrap inherits the output pipe; if it outlived the emulator,
	// Wait would block on the pipe forever without this bound.
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rie: start %s: %w", rieBinary, err)
	}
	e := &Emulator{
		cmd:    cmd,
		url:    "http://" + invokeAddr + InvokePath,
		logs:   logs,
		client: &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}},
		exited: make(chan struct{}),
	}
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	if err := e.waitReady(ctx, invokeAddr); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

// waitReady polls until the invoke listener accepts a connection. The
// emulator opens it last, after the Runtime API listener.
func (e *Emulator) waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-e.exited:
			return fmt.Errorf("rie: %w (%v); output:\n%s", errExitedEarly, e.waitErr, e.Logs())
		case <-ctx.Done():
			return fmt.Errorf("rie: emulator not ready on %s: %w; output:\n%s", addr, ctx.Err(), e.Logs())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Invoke sends payload as one synchronous invocation and returns the
// function's response payload. A function error is a *FunctionError, a
// timeout ErrTimeout, a non-2xx emulator answer a *StatusError. Concurrent
// calls are serialised, as one Lambda execution environment would.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	e.invokeMu.Lock()
	defer e.invokeMu.Unlock()
	select {
	case <-e.exited:
		return nil, fmt.Errorf("rie: emulator is not running (%v)", e.waitErr)
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("rie: invoke: read response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &StatusError{StatusCode: resp.StatusCode, Body: string(body)}
	}
	if bytes.HasPrefix(body, []byte("Task timed out after")) {
		return nil, fmt.Errorf("%w: %s", ErrTimeout, body)
	}
	if fe := asFunctionError(body); fe != nil {
		return nil, fe
	}
	return body, nil
}

// asFunctionError recognises Lambda's error payload: an object whose only
// keys are errorMessage, errorType and optionally stackTrace.
func asFunctionError(body []byte) *FunctionError {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(trimmed, &m) != nil {
		return nil
	}
	if _, ok := m["errorType"]; !ok {
		return nil
	}
	for k := range m {
		switch k {
		case "errorMessage", "errorType", "stackTrace":
		default:
			return nil
		}
	}
	var fe FunctionError
	if json.Unmarshal(trimmed, &fe) != nil {
		return nil
	}
	return &fe
}

// Logs returns what the emulator and the function wrote so far (stdout and
// stderr interleaved; at most the last 1 MiB).
func (e *Emulator) Logs() string { return e.logs.String() }

// Close stops the emulator and the function process and waits for both.
// The emulator gets SIGTERM first, which makes it shut the runtime down;
// whatever is left after a short grace period is killed. Close is
// idempotent.
func (e *Emulator) Close() error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true

	pid := e.cmd.Process.Pid
	// The runtime is a child of the emulator in a process group of its own:
	// note the groups now, while the parent link still exists.
	groups := append([]int{pid}, descendantGroups(pid)...)

	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(stopGrace):
	}
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	<-e.exited // bounded: SIGKILL plus cmd.WaitDelay
	for _, g := range groups {
		waitGroupGone(g, stopGrace)
	}
	return nil
}

// PID returns the emulator's process id (for tests and diagnostics).
func (e *Emulator) PID() int { return e.cmd.Process.Pid }

// freeLoopbackAddr returns a loopback address with a port free right now.
// The port is drawn below Linux's ephemeral range (32768-60999): a port
// from ":0" is free only until the next outgoing connection or test server
// takes it, and the emulator binds its Runtime API late (at the first
// invoke), so a port from the ephemeral range was seen taken by then.
func freeLoopbackAddr() (string, error) {
	const lo, hi = 20000, 32000
	var lastErr error
	for range 50 {
		addr := fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			lastErr = err
			continue
		}
		if err := l.Close(); err != nil {
			return "", fmt.Errorf("rie: find a free port: %w", err)
		}
		return addr, nil
	}
	return "", fmt.Errorf("rie: find a free port: %w", lastErr)
}

// mergeEnv returns base overridden by over, keyed by variable name, in a
// stable order.
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(over))
	for _, list := range [][]string{base, over} {
		for _, kv := range list {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// logBuffer is an io.Writer safe for concurrent use that keeps the newest
// max bytes.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
