// Package egress decides which network addresses fluidbox may reach on a
// tenant's behalf: connection (MCP upstream) and model-upstream URLs.
//
// A member chooses a connection's URL, and the broker sends a credential
// to it and reports what comes back, so a URL pointing inside (loopback,
// the cloud's metadata service, a private network, the control plane
// itself) would turn the broker into a request forger holding a key. What
// it guarantees:
//
//   - Refused ranges: loopback, link-local (169.254.0.0/16, fe80::/10),
//     private (RFC 1918), shared address space (100.64.0.0/10),
//     unique-local (fc00::/7, which holds the EC2 metadata service's
//     fd00:ec2::254), site-local, unspecified, multicast, broadcast, the
//     documentation and benchmarking blocks and the other special-purpose
//     blocks, and IPv6 forms that embed an IPv4 address (mapped,
//     IPv4-compatible, NAT64, 6to4, Teredo) unless the embedded address
//     would pass. Among them, only ranges the operator allows
//     (FLUIDBOX_CONNECTION_ALLOW_CIDRS) are reachable.
//   - The check is made on the address actually dialled: Guard.DialContext
//     resolves the name, refuses it unless every address passes, and dials
//     a checked address itself; the dialer's Control hook checks again on
//     the socket, after resolution and before connect(2). A name that
//     resolves to a public address once and an internal one the next time
//     (DNS rebinding) gains nothing, and no packet is sent to a refused
//     address.
//   - CheckURL refuses at creation what can never be dialled: anything but
//     https, except http to a loopback host where loopback is allowed; a
//     literal address, or "localhost", in a refused range.
//   - Refusals never quote the URL or the resolved address (the first may
//     carry a token, the second would tell a member what an internal name
//     resolves to).
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused wraps every refusal.
var ErrRefused = errors.New("egress: address refused")

// AllowVariable is the setting that lets an operator open ranges.
const AllowVariable = "FLUIDBOX_CONNECTION_ALLOW_CIDRS"

// Loopback is what `fluidbox dev` allows by default, so connections to
// local MCP servers and a local model stand-in work.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// special are the special-purpose blocks (RFC 6890 and successors) that
// are not the public internet, beyond what netip's predicates name.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	// IPv4-compatible (deprecated), which a stack may route to IPv4.
	netip.MustParsePrefix("::/96"),
	// IPv4-translated (SIIT, RFC 2765), which a translator sends to the
	// embedded IPv4 address whatever it is.
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:2::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("5f00::/16"),
	netip.MustParsePrefix("2001:10::/28"),
	netip.MustParsePrefix("2001:20::/28"),
	// Local-use NAT64 translates to whatever the site chose: internal.
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("fec0::/10"),
}

// Embedded IPv4 forms whose IPv4 address is judged instead.
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
	teredo = netip.MustParsePrefix("2001::/32")
)

// Guard is an egress decision. A nil or zero Guard refuses every internal
// address (use New to allow ranges).
type Guard struct {
	allow []netip.Prefix
	// resolve looks a host up; nil is net.DefaultResolver.
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// dial connects to a checked address: a net.Dialer whose Control hook
	// checks again.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New returns a guard that lets through the allowed ranges and refuses
// every other internal address.
func New(allow []netip.Prefix) *Guard {
	g := &Guard{}
	for _, p := range allow {
		g.allow = append(g.allow, p.Masked())
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
	g.dial = d.DialContext
	return g
}

// WithResolver returns a copy of g that resolves names with resolve (a
// test's stand-in for DNS; production uses the system resolver).
func (g *Guard) WithResolver(resolve func(ctx context.Context, host string) ([]netip.Addr, error)) *Guard {
	c := New(g.allowed())
	c.resolve = resolve
	return c
}

func (g *Guard) allowed() []netip.Prefix {
	if g == nil {
		return nil
	}
	return g.allow
}

// Allowed returns the ranges g lets through, for a start-up log line.
func (g *Guard) Allowed() []netip.Prefix { return append([]netip.Prefix(nil), g.allowed()...) }

// ParseAllow reads FLUIDBOX_CONNECTION_ALLOW_CIDRS's form: CIDRs or
// single addresses separated by commas or spaces; empty is none.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("egress: %q is not a CIDR or an address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Check reports whether addr may be dialled: nil, or an error wrapping
// ErrRefused that names the kind of range (never the address).
func (g *Guard) Check(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("%w: not an address", ErrRefused)
	}
	addr = addr.WithZone("")
	for _, p := range g.allowed() {
		if p.Contains(addr) || (addr.Is4In6() && p.Contains(addr.Unmap())) {
			return nil
		}
	}
	if kind := internal(addr); kind != "" {
		return fmt.Errorf("%w: the address is %s (an operator can allow a range with %s)", ErrRefused, kind, AllowVariable)
	}
	return nil
}

// internal names the refused range addr is in, or "" for a public address.
func internal(addr netip.Addr) string {
	if addr.Is4In6() {
		return internal(addr.Unmap())
	}
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64.Contains(addr):
			if k := internal(netip.AddrFrom4([4]byte(b[12:16]))); k != "" {
				return k + " behind NAT64"
			}
		case sixTo4.Contains(addr):
			if k := internal(netip.AddrFrom4([4]byte(b[2:6]))); k != "" {
				return k + " behind 6to4"
			}
		case teredo.Contains(addr):
			// The embedded client address is obfuscated and the server
			// address is the relay's; neither says where the packet lands.
			return "a Teredo tunnel address"
		}
	}
	switch {
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "a link-local address"
	case addr.IsPrivate():
		return "a private or unique-local address"
	case addr.IsUnspecified():
		return "the unspecified address"
	case addr.IsMulticast(), addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast or broadcast address"
	}
	for _, p := range special {
		if p.Contains(addr) {
			return "a special-purpose address (" + p.String() + ")"
		}
	}
	return ""
}

// LoopbackAllowed reports whether g lets loopback through (as `fluidbox
// dev` does by default), which is also what allows plain http.
func (g *Guard) LoopbackAllowed() bool {
	return g.Check(netip.MustParseAddr("127.0.0.1")) == nil || g.Check(netip.IPv6Loopback()) == nil
}

// Control is the dialer's Control hook: it runs on the socket before
// connect(2), with the numeric address about to be connected, so nothing
// resolved after DialContext's check can slip past it.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address being dialled", ErrRefused)
	}
	return g.Check(ap.Addr())
}

// DialContext resolves address's host, refuses it unless every address it
// resolves to passes Check, and dials a checked address (the Control hook
// checks it once more on the socket). It is an http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if g == nil {
		g = zero
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: the address has no port", ErrRefused)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%w: bad port", ErrRefused)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		resolve := g.resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("egress: resolve: %w", err)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: the name resolves to no address", ErrRefused)
	}
	// Every address must pass: a name that mixes a public address with an
	// internal one is refused whole, so which one a retry picks does not
	// matter.
	for _, a := range addrs {
		if err := g.Check(a); err != nil {
			return nil, err
		}
	}
	var last error
	for _, a := range addrs {
		c, err := g.dial(ctx, network, netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(p)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// zero is the guard a nil *Guard dials as: every internal address refused.
var zero = New(nil)

// CheckURL refuses, before anything is stored, a connection or model
// upstream URL that can never be dialled: a scheme other than https (http
// only to a loopback host, where loopback is allowed), or a literal
// address or "localhost" in a refused range. A name is judged again at
// every dial, after resolution. Messages never quote the URL.
func (g *Guard) CheckURL(u *url.URL) error {
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return fmt.Errorf("%w: the URL has no host", ErrRefused)
	}
	loopbackName := host == "localhost" || strings.HasSuffix(host, ".localhost")
	addr, perr := netip.ParseAddr(host)
	literal := perr == nil
	isLoopback := loopbackName || (literal && addr.Unmap().IsLoopback())
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback {
			return fmt.Errorf("%w: must be https (http only to a loopback host, where loopback is allowed)", ErrRefused)
		}
	default:
		return fmt.Errorf("%w: must be an https URL", ErrRefused)
	}
	if isLoopback && !g.LoopbackAllowed() {
		return fmt.Errorf("%w: it points at loopback, which this server does not allow (%s)", ErrRefused, AllowVariable)
	}
	if literal {
		return g.Check(addr)
	}
	return nil
}
