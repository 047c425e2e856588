// Package egress decides which network addresses fluidbox may reach on a
// tenant's behalf: connection (MCP upstream) and model-upstream URLs.
//
// A member chooses those URLs, and the broker sends a credential to them
// and reports what comes back, so a URL pointing inside (loopback, the
// cloud's metadata service, a private network, the control plane itself)
// would turn the broker into a request forger with a key. What it
// guarantees:
//
//   - Refused ranges: loopback, link-local (169.254.0.0/16, fe80::/10,
//     which holds fd00:ec2::254's sibling addresses), private (RFC 1918),
//     shared address space (100.64.0.0/10), unique-local (fc00::/7, which
//     holds fd00:ec2::254), unspecified, multicast, broadcast and the other
//     special-purpose blocks, and IPv6 forms that embed an IPv4 address
//     (mapped, NAT64, 6to4, Teredo) unless the embedded address would pass.
//     Only ranges the operator allows (FLUIDBOX_CONNECTION_ALLOW_CIDRS)
//     are reachable among them.
//   - The check is made on the address actually dialled: Guard.DialContext
//     resolves the name, checks every address, and dials the checked
//     address itself; the dialer's Control hook checks again on the socket
//     before connect(2). A name that resolves to a public address once and
//     a private one the next time (DNS rebinding) gains nothing, and no
//     packet is sent to a refused address.
//   - CheckURL refuses at creation what can never be dialled: anything
//     but https, except http to a loopback host where loopback is allowed;
//     and a literal address, or "localhost", in a refused range.
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

// refused are the special-purpose blocks (RFC 6890 and successors) that
// are not the public internet, beyond what netip's predicates name.
var refused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// Embedded IPv4 forms: the IPv4 address is judged instead.
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	nat64l = netip.MustParsePrefix("64:ff9b:1::/48")
	sixTo4 = netip.MustParsePrefix("2002::/16")
	teredo = netip.MustParsePrefix("2001::/32")
)

// Guard is an egress decision. The zero value refuses every internal
// address.
type Guard struct {
	allow []netip.Prefix
	// resolve looks a host up; nil is net.DefaultResolver.
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// dial connects to a checked address: a net.Dialer whose Control hook
	// checks again.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New returns a guard that also lets through the allowed ranges.
func New(allow []netip.Prefix) *Guard {
	g := &Guard{allow: append([]netip.Prefix(nil), allow...)}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	g.dial = d.DialContext
	return g
}

// WithResolver returns a copy of g that resolves names with resolve (a
// test's stub; production uses the system resolver).
func (g *Guard) WithResolver(resolve func(ctx context.Context, host string) ([]netip.Addr, error)) *Guard {
	c := New(g.allow)
	c.resolve = resolve
	return c
}

// Check reports whether addr may be dialled: nil, or an error wrapping
// ErrRefused that names the kind of range (never a URL).
func (g *Guard) Check(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("%w: not an address", ErrRefused)
	}
	addr = addr.WithZone("")
	for _, p := range g.allow {
		if p.Contains(addr) || (addr.Is4In6() && p.Contains(addr.Unmap())) {
			return nil
		}
	}
	if kind := internal(addr); kind != "" {
		// The address itself is left out: for a name, it would tell a
		// member what an internal name resolves to.
		return fmt.Errorf("%w: the address is %s (an operator can allow it with FLUIDBOX_CONNECTION_ALLOW_CIDRS)", ErrRefused, kind)
	}
	return nil
}

// internal names the refused range addr is in, or "" for a public address.
func internal(addr netip.Addr) string {
	if addr.Is4In6() {
		return internal(addr.Unmap())
	}
	if addr.Is6() {
		for _, p := range []netip.Prefix{nat64, nat64l} {
			if p.Contains(addr) {
				b := addr.As16()
				if k := internal(netip.AddrFrom4([4]byte(b[12:]))); k != "" {
					return k + " (NAT64)"
				}
			}
		}
		if sixTo4.Contains(addr) {
			b := addr.As16()
			if k := internal(netip.AddrFrom4([4]byte(b[2:6]))); k != "" {
				return k + " (6to4)"
			}
		}
		if teredo.Contains(addr) {
			return "a Teredo tunnel address"
		}
	}
	switch {
	case addr.IsLoopback():
		return "a loopback address"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "a link-local address"
	case addr.IsPrivate():
		return "a private address"
	case addr.IsUnspecified():
		return "the unspecified address"
	case addr.IsMulticast():
		return "a multicast address"
	}
	for _, p := range refused {
		if p.Contains(addr) {
			return "a special-purpose address (" + p.String() + ")"
		}
	}
	return ""
}

// LoopbackAllowed reports whether the guard lets loopback through (as
// `fluidbox dev` does), which is what allows plain http.
func (g *Guard) LoopbackAllowed() bool {
	return g.Check(netip.MustParseAddr("127.0.0.1")) == nil || g.Check(netip.IPv6Loopback()) == nil
}

// control is the dialer's Control hook: it runs on the socket before
// connect(2), with the address about to be connected.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address being dialled", ErrRefused)
	}
	return g.Check(ap.Addr())
}

// Control exposes the Control hook, for tests and for dialers built
// elsewhere.
func (g *Guard) Control(network, address string, c syscall.RawConn) error {
	return g.control(network, address, c)
}

// DialContext resolves address's host, refuses it unless every address it
// resolves to passes Check, and dials a checked address (the Control hook
// checks it once more on the socket). It is an http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
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
		c, err := g.dial(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(p)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// CheckURL refuses, before anything is stored, a connection or model
// upstream URL that can never be dialled: a scheme other than https
// (http only to a loopback host, where loopback is allowed), or a literal
// address or "localhost" in a refused range. A name is judged again at
// every dial, after resolution. Messages never quote the URL.
func (g *Guard) CheckURL(u *url.URL) error {
	host := u.Hostname()
	loopbackName := strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost")
	addr, literal := netip.ParseAddr(host)
	isLoopback := loopbackName || (literal == nil && addr.Unmap().IsLoopback())
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback {
			return fmt.Errorf("%w: must be https (http only to a loopback host)", ErrRefused)
		}
	default:
		return fmt.Errorf("%w: must be an https URL", ErrRefused)
	}
	if isLoopback && !g.LoopbackAllowed() {
		return fmt.Errorf("%w: points at loopback, which this server does not allow (FLUIDBOX_CONNECTION_ALLOW_CIDRS)", ErrRefused)
	}
	if literal == nil {
		if err := g.Check(addr); err != nil {
			return err
		}
	}
	return nil
}
