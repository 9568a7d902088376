package callbacks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// ErrRefusedAddress is wrapped by every connection the Guard refuses: the
// address is loopback, link-local, private, unspecified or otherwise not
// public, and the operator has not allow-listed it.
var ErrRefusedAddress = errors.New("callbacks: destination address refused")

// Guard keeps the logging destinations teams supply (langfuse_host,
// langsmith_base_url, a service account's token_uri) off the gateway's own
// network: the cloud metadata service, loopback, private ranges.
//
// The check that counts is made when connecting: Client's dialer checks the
// address it is about to connect to, after name resolution, so a name that
// resolved to a public address when the callback was added and to a private
// one later (DNS rebinding) is refused, and so is any address a redirect
// could name (redirects are not followed at all). CheckURL repeats the check
// when a callback is added, to refuse a bad host with a 400 at once.
//
// An operator allow-lists destinations with callback_settings.allow_hosts:
// a host name matches the URL's host (then any address it resolves to is
// accepted), an IP or CIDR prefix matches the address dialled. Only
// allow-listed hosts may be reached over plain http.
type Guard struct {
	names    map[string]bool
	prefixes []netip.Prefix
	// lookup resolves a host name for CheckURL.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// lookupTimeout bounds CheckURL's name resolution.
const lookupTimeout = 3 * time.Second

// NewGuard builds a guard over the allow list (entries as
// config.CallbackSettings.AllowHosts documents them).
func NewGuard(allowHosts []string) (*Guard, error) {
	g := &Guard{names: map[string]bool{}, lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}}
	for _, h := range allowHosts {
		if p, err := netip.ParsePrefix(h); err == nil {
			g.prefixes = append(g.prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(h); err == nil {
			a = a.Unmap()
			g.prefixes = append(g.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if h == "" || strings.ContainsAny(h, ":/@ ") {
			return nil, fmt.Errorf("callbacks: allow_hosts entry %q is not a host name, IP or CIDR prefix", h)
		}
		g.names[canonicalHost(h)] = true
	}
	return g, nil
}

func canonicalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// nonPublic lists ranges that are not reachable public unicast space beyond
// what netip's predicates name: "this network", carrier-grade NAT (cloud
// internals live there), IETF protocol assignments, benchmarking, reserved
// and broadcast, NAT64 (which can embed any IPv4 address) and the
// deprecated IPv6 site-local range.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("fec0::/10"),
}

// public reports whether a is an ordinary public unicast address.
func public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsPrivate() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// permits reports whether the guard lets a connection reach a.
func (g *Guard) permits(a netip.Addr) bool {
	a = a.Unmap()
	if public(a) {
		return true
	}
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allowListed reports whether host (a name or an IP literal, as in a URL)
// is on the operator's allow list.
func (g *Guard) allowListed(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		for _, p := range g.prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return g.names[canonicalHost(host)]
}

// CheckURL validates a destination base URL a team supplies for param: an
// absolute https URL (http only for an allow-listed host) without user
// info, query or fragment, whose host is — or resolves to — addresses the
// guard permits. A name that does not resolve now is accepted: the dialer
// checks again on every connection. Every refusal is a 400 naming param.
func (g *Guard) CheckURL(ctx context.Context, param, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, api.InvalidValue(param, "%s is not a valid URL: %v.", param, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.Opaque != "":
		return nil, api.InvalidValue(param, "%s must be an absolute https URL, such as https://cloud.langfuse.com.", param)
	case u.User != nil:
		return nil, api.InvalidValue(param, "%s must not carry user information; credentials go in their own callback_vars.", param)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, api.InvalidValue(param, "%s must not have a query or a fragment.", param)
	}
	host := u.Hostname()
	if u.Scheme == "http" && !g.allowListed(host) {
		return nil, api.InvalidValue(param, "%s must use https; plain http is only accepted for hosts the operator allow-lists (callback_settings.allow_hosts).", param)
	}
	if g.names[canonicalHost(host)] {
		return u, nil
	}
	refused := func(a netip.Addr) error {
		return api.InvalidValue(param, "%s points at %s, which is not a public address; the operator must allow-list it (callback_settings.allow_hosts).", param, a)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !g.permits(a) {
			return nil, refused(a)
		}
		return u, nil
	}
	if numericHost(host) {
		return nil, api.InvalidValue(param, "%s names its host %q as a number: write an IP address in its standard dotted form (which must be public or allow-listed), or use a host name.", param, host)
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := g.lookup(lctx, host)
	if err != nil {
		return u, nil
	}
	for _, a := range addrs {
		if !g.permits(a) {
			return nil, refused(a)
		}
	}
	return u, nil
}

// numericHost reports whether host, not a standard IP literal, is a name
// whose last label is a number — decimal, octal or 0x-hex, as in 2130706433,
// 0x7f000001, 0177.0.0.1 or 127.1. No DNS name ends so (top-level domains
// are never numeric), while C's inet_aton, curl, browsers and proxies read
// these as IPv4 addresses: such a host could reach loopback or the metadata
// service by a spelling the address checks do not parse.
func numericHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if l := strings.ToLower(last); strings.HasPrefix(l, "0x") {
		last = l[2:]
		return strings.Trim(last, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// DialContext connects like net.Dialer.DialContext, refusing addresses the
// guard does not permit. The check runs on the address actually dialled
// (net.Dialer.Control), after resolution, for every address tried.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if host, _, err := net.SplitHostPort(addr); err == nil && g.names[canonicalHost(host)] {
		return d.DialContext(ctx, network, addr)
	}
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrRefusedAddress, address, err)
		}
		if !g.permits(ap.Addr()) {
			return fmt.Errorf("%w: %s is not a public address and is not allow-listed (callback_settings.allow_hosts)", ErrRefusedAddress, ap.Addr())
		}
		return nil
	}
	return d.DialContext(ctx, network, addr)
}

// DestinationWriteBuffer is the write buffer of the destinations'
// connections. A destination request is a batch of up to a few MB, which
// net/http copies through the transport's write buffer: at the default
// 4 KiB, that is a system call per 4 KiB (a good part of a delivery's CPU in a
// profile); the connections are few (one request in flight per callback).
const DestinationWriteBuffer = 64 << 10

// Client returns an HTTP client for logging destinations: every connection
// through DialContext, no proxy (a proxy would dial the destination on our
// behalf, unchecked), and no redirects (a 3xx is the destination's answer,
// never followed, so credentials never travel to another host). Requests
// are bounded by their contexts.
func (g *Guard) Client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           g.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			WriteBufferSize:       DestinationWriteBuffer,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
