package modelproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

const benchAdmin = "bench-admin-token-0123456789abcdef"

// proxied is fluidbox's model proxy as `fluidbox dev` serves it (minidyn
// behind the validating layer, on loopback) in front of the same loopback
// upstream as the forwarder, and a run with money for every request.
type proxied struct {
	url, token string
	client     *http.Client
}

func newProxied(tb testing.TB, upstreamURL string) *proxied {
	tb.Helper()
	ctx := context.Background()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	st := store.New(devstack.DynamoClient(db.URL), "bench")
	if err := st.CreateTable(ctx); err != nil {
		tb.Fatal(err)
	}
	sealer, err := seal.NewLocal(filepath.Join(tb.TempDir(), "key"))
	if err != nil {
		tb.Fatal(err)
	}
	h := api.New(api.Config{AdminToken: benchAdmin, Ledger: ledger.New(st, time.Now), Sealer: sealer,
		Egress: egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), Logger: slog.New(slog.DiscardHandler)})
	front := httptest.NewServer(h)
	tb.Cleanup(front.Close)
	admin := func(method, path string, body any, out any) {
		tb.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, front.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+benchAdmin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := front.Client().Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			msg, _ := io.ReadAll(resp.Body)
			tb.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, msg)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				tb.Fatal(err)
			}
		}
	}
	admin("PUT", "/v1/model-upstream", map[string]any{"url": upstreamURL, "credential": map[string]any{"type": "header", "name": "x-api-key", "value": "bench-upstream-key"}}, nil)
	var pol struct{ ID string }
	admin("POST", "/v1/policies", map[string]any{"name": "bench", "default_verdict": "deny", "rules": []any{}}, &pol)
	var run struct{ ID, Token string }
	admin("POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1e6}}, &run)
	return &proxied{url: front.URL + "/v1/sessions/" + run.ID + "/model/v1/messages?beta=true", token: run.Token, client: front.Client()}
}

func (p *proxied) send(tb testing.TB, body []byte) {
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", betas)
	req.Header.Set("X-Api-Key", p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(stream)) {
		tb.Fatalf("proxied: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
}

// BenchmarkProxiedShare does, in each iteration and in turn, the
// inspection, the request through fluidbox's model proxy (inspection,
// reservation, forwarding, the stream followed and settled) and the same
// request through the plain httputil.ReverseProxy, against the same
// loopback upstream, and reports the inspection's time as a share of the
// proxied request's latency (inspect-of-proxied-%) and of the plain
// forward's (inspect-of-forward-%).
func BenchmarkProxiedShare(b *testing.B) {
	body, h, f := request(b), header(), newForwarder(b)
	p := newProxied(b, f.upstream)
	f.forward(b, body)
	p.send(b, body)
	var inspecting, proxying, forwarding time.Duration
	for b.Loop() {
		t0 := time.Now()
		inspect(b, h, body)
		t1 := time.Now()
		p.send(b, body)
		t2 := time.Now()
		f.forward(b, body)
		inspecting += t1.Sub(t0)
		proxying += t2.Sub(t1)
		forwarding += time.Since(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(inspecting.Nanoseconds())/n, "inspect-ns/op")
	b.ReportMetric(float64(proxying.Nanoseconds())/n, "proxied-ns/op")
	b.ReportMetric(float64(forwarding.Nanoseconds())/n, "forward-ns/op")
	b.ReportMetric(100*float64(inspecting)/float64(proxying), "inspect-of-proxied-%")
	b.ReportMetric(100*float64(inspecting)/float64(forwarding), "inspect-of-forward-%")
}
