package callbacks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
)

func TestGuardPermits(t *testing.T) {
	g, err := NewGuard([]string{"127.0.0.1", "10.20.0.0/16", "fd00::1"})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"203.0.113.10":           true,  // public (documentation range stands in)
		"2001:db8::1":            true,  // public IPv6
		"127.0.0.1":              true,  // allow-listed
		"::ffff:127.0.0.1":       true,  // the same, IPv4-mapped
		"10.20.3.4":              true,  // inside an allow-listed prefix
		"fd00::1":                true,  // allow-listed IPv6
		"127.0.0.2":              false, // loopback
		"::1":                    false, // IPv6 loopback
		"169.254.169.254":        false, // link-local: the cloud metadata service
		"fe80::1":                false, // IPv6 link-local
		"10.21.0.1":              false, // private, outside the prefix
		"172.16.0.1":             false, // private
		"192.168.1.1":            false, // private
		"fd00::2":                false, // IPv6 unique local
		"0.0.0.0":                false, // unspecified
		"::":                     false, // IPv6 unspecified
		"::ffff:169.254.169.254": false, // metadata, IPv4-mapped
		"100.64.0.1":             false, // carrier-grade NAT
		"224.0.0.1":              false, // multicast
		"255.255.255.255":        false, // broadcast
		"64:ff9b::a9fe:a9fe":     false, // NAT64 of 169.254.169.254
	} {
		if got := g.permits(netip.MustParseAddr(addr)); got != want {
			t.Errorf("permits(%s) = %v, want %v", addr, got, want)
		}
	}
	if _, err := NewGuard([]string{"http://x"}); err == nil {
		t.Error("NewGuard accepted a URL as an allow_hosts entry")
	}
}

// hits counts the requests a local server receives.
func hitServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestGuardRefusesWhenConnecting(t *testing.T) {
	srv, hits := hitServer(t) // on 127.0.0.1
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	refused, err := NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := NewGuard([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	byName, err := NewGuard([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		guard *Guard
		url   string
		ok    bool
	}{
		{"loopback, not allow-listed", refused, srv.URL, false},
		{"a name resolving to loopback (DNS decides at dial time)", refused, "http://localhost:" + strconv.Itoa(port), false},
		{"IPv4-mapped loopback", refused, "http://[::ffff:127.0.0.1]:" + strconv.Itoa(port), false},
		{"loopback allow-listed by IP", allowed, srv.URL, true},
		{"a name resolving to an allow-listed IP", allowed, "http://localhost:" + strconv.Itoa(port), true},
		{"allow-listed by name", byName, "http://localhost:" + strconv.Itoa(port), true},
		{"allow-listed name does not cover the IP", byName, srv.URL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			resp, err := tc.guard.Client().Get(tc.url)
			if resp != nil {
				resp.Body.Close()
			}
			if tc.ok {
				if err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("GET %s: %v, want through", tc.url, err)
				}
				return
			}
			if !errors.Is(err, ErrRefusedAddress) {
				t.Errorf("GET %s: err = %v, want ErrRefusedAddress", tc.url, err)
			}
			if hits.Load() != before {
				t.Error("the server was reached")
			}
		})
	}
}

func TestGuardDNSRebinding(t *testing.T) {
	// When the callback is added the name resolves to a public address; when
	// delivery connects, it resolves to loopback. The dialer refuses.
	srv, hits := hitServer(t)
	g, err := NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	g.lookup = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
	}
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	u, err := g.CheckURL(context.Background(), "callback_vars.langfuse_host", "https://localhost:"+port)
	if err != nil {
		t.Fatalf("CheckURL with the public answer: %v", err)
	}
	_, err = g.Client().Get(u.String())
	if !errors.Is(err, ErrRefusedAddress) {
		t.Errorf("connecting after the name rebound to loopback: err = %v, want ErrRefusedAddress", err)
	}
	if hits.Load() != 0 {
		t.Error("the loopback server was reached")
	}
}

func TestGuardDoesNotFollowRedirects(t *testing.T) {
	target, targetHits := hitServer(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	g, err := NewGuard([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, redirect.URL, nil)
	req.Header.Set("Authorization", "Basic c2VjcmV0")
	resp, err := g.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || targetHits.Load() != 0 {
		t.Errorf("status %d, target hit %d times: a redirect was followed", resp.StatusCode, targetHits.Load())
	}
}

func TestGuardIgnoresProxySettings(t *testing.T) {
	proxy, proxyHits := hitServer(t)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	g, err := NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Through a proxy the request would reach the proxy (allowed or not);
	// directly, the guard refuses the private address.
	_, err = g.Client().Get("http://10.255.255.1:9/")
	if !errors.Is(err, ErrRefusedAddress) || proxyHits.Load() != 0 {
		t.Errorf("err = %v, proxy hits %d; want a refusal and no proxy", err, proxyHits.Load())
	}
}

func TestCheckURL(t *testing.T) {
	g, err := NewGuard([]string{"127.0.0.1", "langfuse.internal"})
	if err != nil {
		t.Fatal(err)
	}
	g.lookup = fakeLookup
	for raw, ok := range map[string]bool{
		"https://cloud.langfuse.com":               true,
		"https://cloud.langfuse.com/langfuse":      true,
		"https://unresolvable.example":             true, // checked again when connecting
		"http://127.0.0.1:3000":                    true,
		"http://langfuse.internal":                 true,
		"https://langfuse.internal":                true,
		"http://cloud.langfuse.com":                false,
		"http://127.0.0.2":                         false,
		"https://169.254.169.254/latest/meta-data": false,
		"https://metadata.internal":                false,
		"https://intranet.example":                 false,
		"https://[fe80::1%25eth0]":                 false,
		"https://user@cloud.langfuse.com":          false,
		"https://cloud.langfuse.com#x":             false,
		"https://cloud.langfuse.com?":              false,
		"mailto:x@cloud.langfuse.com":              false,
		"//cloud.langfuse.com":                     false,
		"https://":                                 false,
		"https://cloud.langfuse.com:bad":           false,
		// Numeric spellings of IPv4 addresses (inet_aton's): refused when
		// the callback is added, not first at delivery.
		"https://2130706433":       false,
		"https://0x7f000001":       false,
		"https://0X7F000001":       false,
		"https://0177.0.0.1":       false,
		"https://0177.0.0.01":      false,
		"https://127.1":            false,
		"https://0x7f.1":           false,
		"https://169.254.43518":    false,
		"https://2852039166":       false, // 169.254.169.254
		"https://2130706433.":      false,
		"https://0x":               false,
		"https://8.8.8.8.":         false,
		"https://1password.com":    true,
		"https://x.0xcafe.example": true,
		"https://langfuse.com":     true,
	} {
		_, err := g.CheckURL(context.Background(), "p", raw)
		if (err == nil) != ok {
			t.Errorf("CheckURL(%q) = %v, want ok=%v", raw, err, ok)
		}
		if err != nil {
			if status, param := apiErr(err); status != http.StatusBadRequest || param != "p" {
				t.Errorf("CheckURL(%q): %v is not a 400 naming p", raw, err)
			}
		}
	}
}
