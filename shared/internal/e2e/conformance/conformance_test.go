//go:build e2e

package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/e2e/controlplane"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const (
	adminToken = "conformance-admin-token-0123456789"
	// publicURL is fluidbox's public base URL in these runs. The suite's
	// metadata document scenario names this host for its client's
	// document; the callback under it is delivered by the browser below,
	// which plays the front proxy of a custom domain.
	publicURL = "https://conformance-test.local"
	// callbackPrefix is where the provider must send the browser back to:
	// the client ID metadata document's redirect URI, or its server's own
	// under it.
	callbackPrefix = publicURL + "/v1/oauth/callback"
	// startPrefix is fluidbox's authorize redirect.
	startPrefix = publicURL + "/v1/oauth/start?"
	metadataURL = publicURL + "/v1/oauth/client-metadata.json"
	connName    = "conf"
	tool        = "test-tool" // the suite's MCP server's one tool
)

// How the client was registered, read off the authorization URL.
const (
	byPreregistered    = "the pre-registered client"
	byMetadataDocument = "fluidbox's client ID metadata document"
	byDCR              = "dynamic registration"
)

// wantRegistration: the scenarios that decide the registration.
var wantRegistration = map[string]string{
	"auth/pre-registration": byPreregistered, // no registration endpoint
	"auth/basic-cimd":       byMetadataDocument,
	"auth/metadata-default": byDCR,
}

var scenarioLine = regexp.MustCompile(`(?m)^\s+- (auth/\S+)`)

// TestConformance runs every auth scenario of the suite's client mode, one
// at a time (the machine is small; the suite's --suite runs them all at
// once), with this test binary's TestConformanceClient as the client and
// baseline.yml as the expected failures: a scenario failing outside it, or
// passing inside it (a stale entry), fails the test.
func TestConformance(t *testing.T) {
	entry := os.Getenv("FLUIDBOX_E2E_CONFORMANCE")
	if entry == "" {
		t.Fatal("FLUIDBOX_E2E_CONFORMANCE is not set: run `make e2e-conformance`, which installs @modelcontextprotocol/conformance")
	}
	preload := abs(t, "../../../connection/testdata/loopback.cjs") // pins every listener to 127.0.0.1
	register := abs(t, "testdata/register.mjs")
	baseline := abs(t, "baseline.yml")
	out := os.Getenv("FLUIDBOX_E2E_OUT")
	if out == "" {
		out = t.TempDir()
	}
	node := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "node", append([]string{"-r", preload, "--import", register, entry}, args...)...)
		cmd.Dir = out
		return cmd
	}
	listed, err := node(context.Background(), "list").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, listed)
	}
	var scenarios []string
	for _, m := range scenarioLine.FindAllStringSubmatch(string(listed), -1) {
		scenarios = append(scenarios, m[1])
	}
	if len(scenarios) < 10 {
		t.Fatalf("the suite lists %d auth scenarios:\n%s", len(scenarios), listed)
	}
	checkBaseline(t, baseline, scenarios)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The suite splits the command on spaces and appends the server URL.
	command := self + " -test.run=^TestConformanceClient$ -test.v -test.count=1 -test.timeout=100s"
	passed, expected := 0, 0
	for _, sc := range scenarios {
		t.Run(strings.TrimPrefix(sc, "auth/"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := node(ctx, "client", "--command", command, "--scenario", sc, "--timeout", "120000",
				"--expected-failures", baseline, "--output-dir", out)
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", sc, err, b)
			}
			if strings.Contains(string(b), "OVERALL: PASSED") {
				passed++
			} else {
				expected++
			}
			t.Logf("%s\n%s", sc, lastLines(string(b), 12))
		})
	}
	t.Logf("%d auth scenarios: %d pass, %d fail as baseline.yml expects; results in %s", len(scenarios), passed, expected, out)
}

// checkBaseline: every entry names a listed scenario and gives a reason
// (a comment above it or above its group of entries).
func checkBaseline(t *testing.T, path string, scenarios []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range scenarios {
		known[s] = true
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		name, ok := strings.CutPrefix(strings.TrimSpace(l), "- ")
		if !ok {
			continue
		}
		if !known[name] {
			t.Errorf("baseline.yml lists %q, which the suite does not have", name)
		}
		// The reason is the comment above the entry, or above the group
		// of entries it closes.
		j := i - 1
		for j >= 0 && strings.HasPrefix(strings.TrimSpace(lines[j]), "- ") {
			j--
		}
		if j < 0 || !strings.HasPrefix(strings.TrimSpace(lines[j]), "#") {
			t.Errorf("baseline.yml: %q has no reason above it", name)
		}
	}
}

// TestConformanceClient is the client the suite runs for one scenario
// (MCP_CONFORMANCE_SCENARIO), with the scenario's MCP server URL as its
// argument: the control plane on 127.0.0.1, an OAuth connection to the
// server (with the scenario's pre-registered client when it gives one),
// the authorization through the API and the browser, then a tool call
// brokered through the gate with the provider's token.
func TestConformanceClient(t *testing.T) {
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if scenario == "" {
		t.Skip("the conformance suite runs this (TestConformance)")
	}
	serverURL := flag.Arg(0)
	if err := loopbackURL(serverURL); err != nil {
		t.Fatalf("server URL %q: %v", serverURL, err)
	}
	given := scenarioClient(t)
	assertLoopbackListener(t, serverURL)
	ctx := context.Background()
	s := controlplane.Start(t, controlplane.Options{AdminToken: adminToken, TablePrefix: "conformance", PublicURL: publicURL})

	conID := createConnection(t, s, serverURL, given)
	var started struct {
		AuthorizationURL string `json:"authorization_url"`
	}
	if err := s.Admin.Do(ctx, "POST", "/v1/connections/"+conID+"/authorize", nil, &started); err != nil {
		t.Fatalf("authorize: %v", err)
	}
	au, nonce := start(t, s.API.URL, started.AuthorizationURL)
	assertLoopbackListener(t, au.String())
	checkRegistration(t, scenario, au, given)

	complete(t, s.API.URL, au, nonce)
	refreshTools(t, s, scenario, conID)
	ans := callTool(t, s, conID)
	if ans.Decision == vocab.Deny && ans.Source == "binding" && strings.Contains(ans.Reason, "fluidbox connections authorize "+conID) {
		ans = stepUp(t, s, scenario, conID, ans)
	}
	if ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError {
		t.Fatalf("tools/call = %+v", ans)
	}
}

// preregistered is the client a scenario registered beforehand, if any.
type preregistered struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	Issuer       string `json:"issuer"`
}

// scenarioClient reads the scenario's pre-registered client from
// MCP_CONFORMANCE_CONTEXT (none when it is unset).
func scenarioClient(t *testing.T) preregistered {
	var given preregistered
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		if err := json.Unmarshal([]byte(c), &given); err != nil {
			t.Fatalf("MCP_CONFORMANCE_CONTEXT: %v", err)
		}
	}
	return given
}

// createConnection creates the OAuth connection to the scenario's server,
// with the pre-registered client when there is one, and returns its id.
func createConnection(t *testing.T, s *controlplane.Stack, serverURL string, given preregistered) string {
	cred := map[string]any{"type": "oauth"}
	if given.ClientID != "" {
		// The operator's client is bound to its issuer at creation; the
		// scenario names it beside the client.
		cred["client_id"], cred["client_secret"], cred["issuer"] = given.ClientID, given.ClientSecret, given.Issuer
	}
	var con struct{ ID, Status string }
	if err := s.Admin.Do(context.Background(), "POST", "/v1/connections", map[string]any{
		"name": connName, "url": serverURL, "kind": "shared", "credential": cred,
		"tool_classes": map[string]string{tool: "read"},
	}, &con); err != nil {
		t.Fatalf("create the connection: %v", err)
	}
	return con.ID
}

// checkRegistration logs how the authorization URL au registered the
// client, and fails where the scenario wants another way.
func checkRegistration(t *testing.T, scenario string, au *url.URL, given preregistered) {
	how := byDCR
	switch id := au.Query().Get("client_id"); {
	case given.ClientID != "" && id == given.ClientID:
		how = byPreregistered
	case id == metadataURL:
		how = byMetadataDocument
	}
	t.Logf("%s: authorizing as %s", scenario, how)
	// The suite's own checks of these two tolerate a client that registers
	// some other way; the specification's order does not.
	if want, ok := wantRegistration[scenario]; ok && how != want {
		t.Fatalf("%s: authorized as %s, want %s", scenario, how, want)
	}
}

// refreshTools lists the connection's tools. If the connection went back
// to authorization_required (its upstream now names another authorization
// server), it authorizes again, as an operator would, which registers a
// client there, and lists them then.
func refreshTools(t *testing.T, s *controlplane.Stack, scenario, conID string) {
	ctx := context.Background()
	err := s.Admin.Do(ctx, "POST", "/v1/connections/"+conID+"/tools/refresh", nil, nil)
	if err == nil {
		return
	}
	var c struct{ Status string }
	if gerr := s.Admin.Do(ctx, "GET", "/v1/connections/"+conID, nil, &c); gerr != nil || c.Status != "authorization_required" {
		t.Fatalf("tools/refresh: %v (status %q)", err, c.Status)
	}
	t.Logf("%s: the connection needs authorization again (%v); re-authorizing", scenario, err)
	var started struct {
		AuthorizationURL string `json:"authorization_url"`
	}
	if err := s.Admin.Do(ctx, "POST", "/v1/connections/"+conID+"/authorize", nil, &started); err != nil {
		t.Fatalf("authorize again: %v", err)
	}
	authorize(t, s.API.URL, started.AuthorizationURL)
	if err := s.Admin.Do(ctx, "POST", "/v1/connections/"+conID+"/tools/refresh", nil, nil); err != nil {
		t.Fatalf("tools/refresh after the re-authorization: %v", err)
	}
}

// stepUp: the server asked for more scopes (ans refused by the binding):
// as an operator would, re-authorize (the connection lists what it asked
// for) and call again in a new run, bound to the new generation.
func stepUp(t *testing.T, s *controlplane.Stack, scenario, conID string, ans callAnswer) callAnswer {
	ctx := context.Background()
	var c struct {
		AuthorizationGeneration int      `json:"authorization_generation"`
		StepUpScopes            []string `json:"step_up_scopes"`
	}
	if err := s.Admin.Do(ctx, "GET", "/v1/connections/"+conID, nil, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.StepUpScopes) == 0 {
		t.Fatalf("refused for scopes (%s), but the connection lists no step_up_scopes", ans.Reason)
	}
	t.Logf("%s: step-up asked for %q; re-authorizing", scenario, c.StepUpScopes)
	var started struct {
		AuthorizationURL string `json:"authorization_url"`
	}
	if err := s.Admin.Do(ctx, "POST", "/v1/connections/"+conID+"/authorize", nil, &started); err != nil {
		t.Fatalf("authorize again: %v", err)
	}
	authorize(t, s.API.URL, started.AuthorizationURL)
	var after struct {
		AuthorizationGeneration int `json:"authorization_generation"`
	}
	if err := s.Admin.Do(ctx, "GET", "/v1/connections/"+conID, nil, &after); err != nil {
		t.Fatal(err)
	}
	if after.AuthorizationGeneration != c.AuthorizationGeneration+1 {
		t.Fatalf("generation %d after the re-authorization, want %d", after.AuthorizationGeneration, c.AuthorizationGeneration+1)
	}
	return callTool(t, s, conID)
}

// authorize follows an authorization URL to fluidbox's callback.
func authorize(t *testing.T, api, authURL string) {
	t.Helper()
	au, nonce := start(t, api, authURL)
	complete(t, api, au, nonce)
}

// complete follows the authorization server's URL au to fluidbox's
// callback, delivered with the browser's nonce cookie.
func complete(t *testing.T, api string, au *url.URL, nonce *http.Cookie) {
	t.Helper()
	back := browse(t, au.String())
	page := deliver(t, api, back, nonce)
	if !strings.Contains(page, "Connected") {
		t.Fatalf("the callback page says: %s", page)
	}
}

// start opens fluidbox's authorize redirect (on the API, as the custom
// domain's front proxy would) and returns where it sends the browser and
// the nonce cookie it set (the browser carries it back to the callback).
func start(t *testing.T, api, authURL string) (*url.URL, *http.Cookie) {
	t.Helper()
	if !strings.HasPrefix(authURL, startPrefix) {
		t.Fatalf("authorization URL %s, want fluidbox's authorize redirect", authURL)
	}
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := browser.Get(api + u.Path + "?" + u.RawQuery)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if resp.StatusCode != http.StatusFound || err != nil || len(resp.Cookies()) != 1 {
		t.Fatalf("authorize redirect = %d %v, %d cookies", resp.StatusCode, err, len(resp.Cookies()))
	}
	return loc, resp.Cookies()[0]
}

type callAnswer struct {
	Decision vocab.Decision `json:"decision"`
	Source   string         `json:"source"`
	Reason   string         `json:"reason"`
	Result   *struct {
		IsError bool `json:"isError"`
	} `json:"result"`
}

// callTool calls the suite's tool, brokered through the gate, in a new run.
func callTool(t *testing.T, s *controlplane.Stack, conID string) callAnswer {
	t.Helper()
	pol := fmt.Sprintf(`{"name":"conformance","default_verdict":"deny","rules":[{"id":"t","tool":"mcp__%s__%s","verdict":"allow"}]}`, connName, tool)
	run := s.NewRun(t, pol, map[string]any{"connections": []string{conID}})
	rc, err := client.New(s.API.URL, run.Token)
	if err != nil {
		t.Fatal(err)
	}
	var ans callAnswer
	if err := rc.Do(context.Background(), "POST", "/v1/sessions/"+run.ID+"/tools/call", map[string]any{
		"tool_call_id": "c1", "tool_name": "mcp__" + connName + "__" + tool, "input": map[string]any{},
	}, &ans); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	return ans
}

// browser is the member's browser: it follows nothing by itself and dials
// loopback only, whatever a URL names.
var browser = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if host == "localhost" {
			host = "127.0.0.1" // where the preload pinned the suite's servers
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("the browser dials loopback only, not %s", host)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
	}},
}

// browse opens the authorization URL and follows the provider's redirects
// (the suite's server approves at once) up to the one back to fluidbox.
func browse(t *testing.T, raw string) *url.URL {
	t.Helper()
	for range 5 {
		if err := loopbackURL(raw); err != nil {
			t.Fatalf("the browser was sent to %s: %v", raw, err)
		}
		resp, err := browser.Get(raw)
		if err != nil {
			t.Fatalf("GET the authorization URL: %v", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" {
			t.Fatalf("the provider answered %d without a redirect: %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		next, err := resp.Request.URL.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(next.String(), callbackPrefix) {
			return next
		}
		raw = next.String()
	}
	t.Fatal("the provider never redirected to the callback")
	return nil
}

// deliver hands the provider's redirect to the control plane, as the
// custom domain's front proxy would: same path and query, on the API, with
// the browser's nonce cookie.
func deliver(t *testing.T, api string, back *url.URL, nonce *http.Cookie) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, api+back.Path+"?"+back.RawQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: nonce.Name, Value: nonce.Value})
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8192))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback = %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// loopbackURL: an http URL to localhost or a loopback address.
func loopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return errors.New("not http to loopback")
	}
	if h := u.Hostname(); h != "localhost" {
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsLoopback() {
			return errors.New("not a loopback host")
		}
	}
	return nil
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatal(err)
	}
	return a
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// assertLoopbackListener: the suite's server behind raw listens on
// 127.0.0.1 only, as the preload pins it, read off the kernel's socket
// table (Linux) rather than by dialing any other address.
func assertLoopbackListener(t *testing.T, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		t.Fatalf("%s has no port", u.Redacted())
	}
	want := fmt.Sprintf(":%04X", port)
	found := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" || !strings.HasSuffix(f[1], want) { // 0A: LISTEN
				continue
			}
			found++
			if local := strings.TrimSuffix(f[1], want); local != "0100007F" {
				t.Fatalf("port %d listens on %s (hex, %s), not 127.0.0.1 only", port, local, table)
			}
		}
	}
	if found == 0 {
		t.Fatalf("nothing listens on port %d", port)
	}
}
