package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
)

func TestCheckRefusesInternal(t *testing.T) {
	t.Parallel()
	g := New(nil)
	refusedAddrs := []string{
		"127.0.0.1", "127.1.2.3", "::1", "0.0.0.0", "::", "0.1.2.3",
		"169.254.169.254", "169.254.0.1", "fe80::1", "fe80::1%eth0", "fd00:ec2::254",
		"10.0.0.5", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1",
		"fc00::1", "fdff::1", "224.0.0.1", "255.255.255.255", "240.0.0.1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "2002:a9fe:a9fe::1", "2001::1",
		"192.0.0.1", "198.18.0.1", "2001:db8::1", "::7f00:1", "::a9fe:a9fe", "fec0::1",
		"64:ff9b:1::a00:1", "192.0.2.1", "203.0.113.9", "198.51.100.7",
		"::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "2001:2::1", "3fff::1", "5f00::1",
	}
	for _, s := range refusedAddrs {
		if err := g.Check(netip.MustParseAddr(s)); !errors.Is(err, ErrRefused) {
			t.Errorf("Check(%s) = %v, want ErrRefused", s, err)
		}
	}
	public := []string{"1.1.1.1", "8.8.8.8", "140.82.112.3", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "172.32.0.1", "100.128.0.1"}
	for _, s := range public {
		if err := g.Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", s, err)
		}
	}
}

func TestCheckAllowedRanges(t *testing.T) {
	t.Parallel()
	g := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16")})
	for s, want := range map[string]bool{
		"127.0.0.1": true, "::ffff:127.0.0.1": true, "10.1.2.3": true,
		"10.2.0.1": false, "169.254.169.254": false, "::1": false, "192.168.0.1": false,
	} {
		if err := g.Check(netip.MustParseAddr(s)); (err == nil) != want {
			t.Errorf("Check(%s) = %v, want allowed %v", s, err, want)
		}
	}
	if !g.LoopbackAllowed() || New(nil).LoopbackAllowed() {
		t.Error("LoopbackAllowed does not follow the allowed ranges")
	}
}

// TestControlHook: the dialer's hook, called as net.Dialer calls it, with
// the address about to be connected.
func TestControlHook(t *testing.T) {
	t.Parallel()
	g := New(nil)
	for addr, want := range map[string]bool{
		"10.0.0.5:443": false, "[fd00:ec2::254]:80": false, "169.254.169.254:80": false,
		"127.0.0.1:8080": false, "1.1.1.1:443": true, "[2606:4700::1]:443": true, "garbage": false,
	} {
		if err := g.Control("tcp4", addr, nil); (err == nil) != want {
			t.Errorf("Control(%s) = %v, want allowed %v", addr, err, want)
		}
	}
}

// TestDialRefusesAResolvedInternalName: a name that resolves to an
// internal address (DNS rebinding's second answer) is refused after
// resolution and before any dial: the stub resolver is asked, nothing is
// connected. Nothing here sends a packet anywhere.
func TestDialRefusesAResolvedInternalName(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	answers := map[string][]netip.Addr{
		"rebind.example":  {netip.MustParseAddr("10.0.0.5")},
		"meta.example":    {netip.MustParseAddr("169.254.169.254")},
		"mixed.example":   {netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("192.168.0.10")},
		"mapped.example":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"nothing.example": {},
	}
	g := New(nil).WithResolver(func(_ context.Context, host string) ([]netip.Addr, error) {
		asked.Add(1)
		return answers[host], nil
	})
	// The dialer itself must never run.
	var dialled atomic.Int32
	g.dial = func(context.Context, string, string) (net.Conn, error) {
		dialled.Add(1)
		return nil, errors.New("dialled")
	}
	for host := range answers {
		_, err := g.DialContext(context.Background(), "tcp", net.JoinHostPort(host, "443"))
		if !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%s) = %v, want ErrRefused", host, err)
		}
	}
	if int(asked.Load()) != len(answers) {
		t.Errorf("resolver asked %d times, want %d", asked.Load(), len(answers))
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("dialled %d times, want 0: refusals come before the dial", n)
	}
	for _, lit := range []string{"10.0.0.5:443", "[::1]:443", "169.254.169.254:80"} {
		if _, err := g.DialContext(context.Background(), "tcp", lit); !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%s) = %v, want ErrRefused", lit, err)
		}
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("dialled %d times for literal addresses, want 0", n)
	}
}

// TestDialThroughATransport: an HTTP client whose transport dials through
// the guard reaches a loopback server only where loopback is allowed; a
// refused one never reaches it.
func TestDialThroughATransport(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	get := func(g *Guard) error {
		c := &http.Client{Transport: &http.Transport{DialContext: g.DialContext}}
		resp, err := c.Get(srv.URL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(New(nil)); !errors.Is(err, ErrRefused) || hits.Load() != 0 {
		t.Errorf("GET loopback with loopback refused = %v, %d hits; want ErrRefused and none", err, hits.Load())
	}
	if err := get(New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})); err != nil || hits.Load() != 1 {
		t.Errorf("GET loopback with loopback allowed = %v, %d hits; want ok and one", err, hits.Load())
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	strict := New(nil)
	dev := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	cases := []struct {
		url    string
		strict bool
		dev    bool
	}{
		{"https://mcp.example.com/mcp", true, true},
		{"https://1.1.1.1/mcp", true, true},
		{"http://mcp.example.com/mcp", false, false},
		{"http://127.0.0.1:8080/mcp", false, true},
		{"http://[::1]:8080/mcp", false, true},
		{"http://localhost:8080/mcp", false, true},
		{"https://localhost/mcp", false, true},
		{"http://169.254.169.254/latest/meta-data", false, false},
		{"https://169.254.169.254/", false, false},
		{"https://10.0.0.5/", false, false},
		{"https://[fd00:ec2::254]/", false, false},
		{"https://[::ffff:127.0.0.1]/", false, true},
		{"ftp://mcp.example.com/", false, false},
		{"http://10.0.0.5/", false, false},
	}
	for _, c := range cases {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := strict.CheckURL(u); (err == nil) != c.strict {
			t.Errorf("strict CheckURL(%s) = %v, want accepted %v", c.url, err, c.strict)
		}
		if err := dev.CheckURL(u); (err == nil) != c.dev {
			t.Errorf("dev CheckURL(%s) = %v, want accepted %v", c.url, err, c.dev)
		}
	}
}

// TestNilGuardRefusesInternal: a connection service or proxy built
// without a guard fails closed.
func TestNilGuardRefusesInternal(t *testing.T) {
	t.Parallel()
	var g *Guard
	if err := g.Check(netip.MustParseAddr("127.0.0.1")); !errors.Is(err, ErrRefused) {
		t.Errorf("nil Check(127.0.0.1) = %v, want ErrRefused", err)
	}
	if _, err := g.DialContext(t.Context(), "tcp", "127.0.0.1:1"); !errors.Is(err, ErrRefused) {
		t.Errorf("nil DialContext(127.0.0.1:1) = %v, want ErrRefused", err)
	}
	if g.LoopbackAllowed() {
		t.Error("nil guard allows loopback")
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	got, err := ParseAllow(" 10.1.0.0/16, 127.0.0.1 ,::1\tfd00::/8,192.168.1.7/24")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.1.0.0/16", "127.0.0.1/32", "::1/128", "fd00::/8", "192.168.1.0/24"}
	if len(got) != len(want) {
		t.Fatalf("ParseAllow = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("ParseAllow[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	if got, err := ParseAllow(""); err != nil || len(got) != 0 {
		t.Errorf("ParseAllow(\"\") = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "fe80::1%eth0", "10.0.0.0/8,x"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

// TestControlHookRefusesOnTheSocket: a plain net.Dialer carrying the
// guard's Control hook, dialling a loopback listener directly (no
// DialContext check before it), never connects: the refusal happens on
// the socket before connect(2), so the listener accepts nothing.
func TestControlHookRefusesOnTheSocket(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	d := &net.Dialer{Control: New(nil).Control}
	if _, err := d.DialContext(t.Context(), "tcp", ln.Addr().String()); !errors.Is(err, ErrRefused) {
		t.Fatalf("dial with the hook = %v, want ErrRefused", err)
	}
	// The same dialer with loopback allowed connects: the listener is
	// reachable, so the refusal above was the hook's.
	ok := &net.Dialer{Control: New(Loopback).Control}
	c, err := ok.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with loopback allowed: %v", err)
	}
	c.Close()
	ln.Close()
	if n := accepted.Load(); n > 1 {
		t.Errorf("listener accepted %d connections, want at most the allowed one", n)
	}
}

// TestRebindingIsRefusedAtEveryDial: a name whose first answer is allowed
// and whose second is internal (DNS rebinding) reaches the server once and
// is refused the second time, before any dial. Loopback stands in for
// both: 127.0.0.1 is the allowed ("public") answer, 127.0.0.2 the refused
// one, so nothing leaves the machine.
func TestRebindingIsRefusedAtEveryDial(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var answers atomic.Int32
	g := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).WithResolver(func(_ context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.example" {
			return nil, errors.New("unknown name")
		}
		if answers.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	})
	// A new connection per request, as after an idle timeout.
	c := &http.Client{Transport: &http.Transport{DialContext: g.DialContext, DisableKeepAlives: true}}
	u := "http://" + net.JoinHostPort("rebind.example", port) + "/"
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("first GET: %v", err)
	}
	resp.Body.Close()
	if _, err := c.Get(u); !errors.Is(err, ErrRefused) {
		t.Errorf("second GET after rebinding = %v, want ErrRefused", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("server hit %d times, want 1", n)
	}
}
