package lambdainit

import (
	"bytes"
	"compress/gzip"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// functionEnv is what a function finds in its environment on Lambda (and
// what its configuration requires), with nothing reachable: init does no
// I/O, so nothing is ever dialled.
var functionEnv = []string{
	"AWS_REGION=us-east-1",
	"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench", "AWS_SESSION_TOKEN=bench",
	"AWS_LAMBDA_FUNCTION_NAME=bench", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
	"FLUIDBOX_TABLE=bench",
	"FLUIDBOX_ADMIN_TOKEN=bench-admin-token-0123456789abcdef",
	"FLUIDBOX_KMS_KEY_ID=alias/bench",
	"FLUIDBOX_GITHUB_WEBHOOK_SECRET=bench-webhook-secret-0123",
	"HOME=/nonexistent",
}

// runtimeAPI is a stand-in for the Lambda Runtime API on loopback: it
// reports when a bootstrap first asks for the next invocation, and holds
// that request open (as Lambda does while no invocation is waiting).
type runtimeAPI struct {
	addr string
	next chan time.Time
}

func startRuntimeAPI(b *testing.B) *runtimeAPI {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	api := &runtimeAPI{addr: ln.Addr().String(), next: make(chan time.Time, 1)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/2018-06-01/runtime/invocation/next" {
			select {
			case api.next <- time.Now():
			default:
			}
		}
		<-r.Context().Done()
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return api
}

// initTime starts bin and returns how long it took to ask for its first
// invocation, then stops it.
func (api *runtimeAPI) initTime(b *testing.B, bin string) time.Duration {
	b.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"AWS_LAMBDA_RUNTIME_API=" + api.addr}, functionEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	select {
	case at := <-api.next:
		return at.Sub(start)
	case <-time.After(10 * time.Second):
		b.Fatalf("%s never asked for an invocation; output:\n%s", bin, out.String())
	}
	return 0
}

var subjects = []struct{ name, pkg string }{
	{"hello", "./testdata/hello"},
	{"dynamodb", "./testdata/dynamodb"},
	{"gate", "../../functions/gate"},
	{"approvals", "../../functions/approvals"},
	{"control", "../../functions/control"},
	{"broker", "../../functions/broker"},
	{"github", "../../functions/github"},
}

// BenchmarkInit starts each bootstrap b.N times, interleaved so that the
// machine's state weighs on all alike, and reports its mean init in ms and
// as a multiple of hello's (init-x), and the same for the median (init-med-
// ms, init-med-x), which a busy machine's outliers move less. Built for the
// host's architecture, which the process must be able to run; otherwise as
// make build does.
func BenchmarkInit(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("the bootstraps are linux executables")
	}
	dir := b.TempDir()
	bins := make([]string, len(subjects))
	for i, s := range subjects {
		bins[i] = build(b, s.pkg, filepath.Join(dir, s.name), runtime.GOARCH)
	}
	api := startRuntimeAPI(b)
	total := make([]time.Duration, len(subjects))
	times := make([][]time.Duration, len(subjects))
	b.ResetTimer()
	for range b.N {
		for i, bin := range bins {
			d := api.initTime(b, bin)
			total[i] += d
			times[i] = append(times[i], d)
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) time.Duration {
		s := slices.Sorted(slices.Values(ds))
		return s[len(s)/2]
	}
	for i, s := range subjects {
		ms := float64(total[i]) / float64(b.N) / float64(time.Millisecond)
		b.ReportMetric(ms, s.name+"-init-ms")
		b.ReportMetric(float64(median(times[i]))/float64(time.Millisecond), s.name+"-init-med-ms")
		if i > 0 {
			b.ReportMetric(float64(total[i])/float64(total[0]), s.name+"-init-x")
			b.ReportMetric(float64(median(times[i]))/float64(median(times[0])), s.name+"-init-med-x")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSize reports each bootstrap's gzipped size in MiB, built exactly
// as make build builds it (linux/arm64).
func BenchmarkSize(b *testing.B) {
	dir := b.TempDir()
	for _, s := range subjects {
		raw, err := os.ReadFile(build(b, s.pkg, filepath.Join(dir, s.name), "arm64"))
		if err != nil {
			b.Fatal(err)
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		_, _ = w.Write(raw)
		_ = w.Close()
		b.ReportMetric(float64(z.Len())/(1<<20), s.name+"-MiB-gz")
	}
	for range b.N {
	}
	b.ReportMetric(0, "ns/op")
}

// build builds pkg as make build does (static, linux, -tags lambda.norpc,
// -trimpath, stripped) for goarch, and returns the binary's path.
func build(b *testing.B, pkg, out, goarch string) string {
	b.Helper()
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", pkg, err, msg)
	}
	return out
}
