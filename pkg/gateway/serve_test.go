package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serveWith starts a gateway on a free port with env added to a fresh data
// dir and master key, and returns its address and master key.
func serveWith(t *testing.T, env map[string]string) (addr, master string) {
	t.Helper()
	master = "sk-test-master"
	all := map[string]string{"SLUICE_DATA_DIR": filepath.Join(t.TempDir(), "data"), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": master}
	for k, v := range env {
		all[k] = v
	}
	g, err := Open(context.Background(), func(k string) string { return all[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	url, _, stop := serve(t, g)
	t.Cleanup(stop)
	return strings.TrimPrefix(url, "http://"), master
}

// The reproduction: an unauthenticated POST whose body never comes
// gets its 401 at once, and the connection closes.
func TestRefusalDoesNotWaitForTheBody(t *testing.T) {
	addr, _ := serveWith(t, nil)
	x := dialRaw(t, addr, "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	resp, body := x.answer()
	if resp.StatusCode != 401 || *errorOf(t, body).Code != "invalid_api_key" {
		t.Errorf("unauthenticated POST without its body: %d %s", resp.StatusCode, body)
	}
	if !x.closed() {
		t.Error("the connection stayed open, waiting for the body")
	}
}

func TestStalledBodyOfAnAuthenticatedRequestTimesOut(t *testing.T) {
	addr, master := serveWith(t, map[string]string{"SLUICE_BODY_IDLE_TIMEOUT": "200ms"})
	x := dialRaw(t, addr, "POST /team/new HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+master+"\r\nContent-Length: 100\r\n\r\n{\"team_alias\":")
	resp, body := x.answer()
	if resp.StatusCode != http.StatusRequestTimeout || *errorOf(t, body).Code != "request_timeout" {
		t.Errorf("stalled body: %d %s", resp.StatusCode, body)
	}
	if !x.closed() {
		t.Error("the connection stayed open after its body timed out")
	}
}

// The reproduction: one client holds twice the cap of keep-alive
// sockets, each after one health check; a new client is still served within
// a second, because the oldest idle connections make room.
func TestIdleConnectionsDoNotLockOutNewClients(t *testing.T) {
	const limit = 8
	addr, _ := serveWith(t, map[string]string{"SLUICE_MAX_CONNECTIONS": fmt.Sprint(limit)})
	for range 2 * limit {
		x := dialRaw(t, addr, "GET /health/liveliness HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := x.answer(); resp.StatusCode != 200 {
			t.Fatalf("health check: %d", resp.StatusCode)
		}
	}
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Get("http://" + addr + "/health/liveliness")
	if err != nil {
		t.Fatalf("a new client behind %d idle sockets: %v", 2*limit, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || time.Since(start) > time.Second {
		t.Errorf("new client: %d after %s", resp.StatusCode, time.Since(start))
	}
}

// Connections that have said nothing yet are idle too: the oldest goes.
func TestSilentConnectionsMakeRoom(t *testing.T) {
	addr, _ := serveWith(t, map[string]string{"SLUICE_MAX_CONNECTIONS": "2"})
	first := dialRaw(t, addr, "")
	dialRaw(t, addr, "")
	time.Sleep(50 * time.Millisecond) // both accepted, in order
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/health/liveliness")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("third connection: %d", resp.StatusCode)
	}
	if !first.closed() {
		t.Error("the oldest silent connection was not closed")
	}
}

// When every connection is serving a request, a new one waits for a slot.
func TestConnectionCapHoldsWhileAllAreBusy(t *testing.T) {
	addr, master := serveWith(t, map[string]string{"SLUICE_MAX_CONNECTIONS": "2", "SLUICE_BODY_IDLE_TIMEOUT": "5s"})
	// Two authenticated requests whose bodies are slow to come are busy.
	busy := "POST /team/new HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + master + "\r\nContent-Length: 100\r\n\r\n{"
	first := dialRaw(t, addr, busy)
	dialRaw(t, addr, busy)
	time.Sleep(100 * time.Millisecond)
	answered := make(chan int, 1)
	go func() {
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get("http://" + addr + "/health/liveliness")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("a third connection was served (%d) while two were busy", code)
	case <-time.After(300 * time.Millisecond):
	}
	first.conn.Close()
	if code := <-answered; code != 200 {
		t.Errorf("once a slot freed: %d, want 200", code)
	}
}

// A 401 closes its connection: a client without a key cannot keep sockets.
func TestUnauthorizedClosesTheConnection(t *testing.T) {
	addr, _ := serveWith(t, nil)
	x := dialRaw(t, addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, _ := x.answer()
	if resp.StatusCode != 401 {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	if !x.closed() {
		t.Error("the connection stayed open after a 401")
	}
}

// Under pressure an idle keep-alive connection is closed after
// pressureIdle, not the server's IdleTimeout.
func TestIdleTimeoutShortensUnderPressure(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for pressureIdle")
	}
	addr, _ := serveWith(t, map[string]string{"SLUICE_MAX_CONNECTIONS": "4"})
	var xs []*rawExchange
	for range 3 {
		x := dialRaw(t, addr, "GET /health/liveliness HTTP/1.1\r\nHost: x\r\n\r\n")
		x.answer()
		xs = append(xs, x)
	}
	start := time.Now()
	if !xs[2].closed() {
		t.Fatal("the idle connection was not closed")
	}
	if d := time.Since(start); d > pressureIdle+2*time.Second {
		t.Errorf("idle connection closed after %s under pressure, want about %s", d, pressureIdle)
	}
}

// The local process speaks HTTP/2 without TLS to a client with prior
// knowledge (h2c), as the AWS SDK for JavaScript does to http:// URLs.
func TestServesH2C(t *testing.T) {
	addr, _ := serveWith(t, nil)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: &protocols}}
	resp, err := c.Get("http://" + addr + "/health/liveliness")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("h2c: %d over %s", resp.StatusCode, resp.Proto)
	}
	// And a 401 over HTTP/2 is an ordinary answer.
	resp, err = c.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.ProtoMajor != 2 {
		t.Errorf("h2c without a key: %d over %s", resp.StatusCode, resp.Proto)
	}
}

// A passthrough body streams to the provider as it arrives; when it stalls,
// the client gets the 408, not a 502 for the upstream call it broke.
func TestStalledPassthroughBodyTimesOut(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(cfg, []byte("passthrough:\n  anthropic: {api_base: "+up.URL+", api_key: sk-ant-provider}\n"), 0o600)
	addr, master := serveWith(t, map[string]string{"SLUICE_BODY_IDLE_TIMEOUT": "200ms", "SLUICE_CONFIG": cfg})
	x := dialRaw(t, addr, "POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "+master+"\r\nContent-Length: 100\r\n\r\n{\"model\":")
	resp, body := x.answer()
	if resp.StatusCode != http.StatusRequestTimeout || *errorOf(t, body).Code != "request_timeout" {
		t.Errorf("stalled passthrough body: %d %s", resp.StatusCode, body)
	}
}

// TestPprofHasItsOwnLoopbackAddress: with SLUICE_PPROF, the profiles are on
// their own listener, and the API's port knows nothing of them.
func TestPprofHasItsOwnLoopbackAddress(t *testing.T) {
	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir(), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": "sk-m", "SLUICE_PPROF": "127.0.0.1:0"}
	g, err := Open(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	api, out, stop := serve(t, g)
	defer stop()
	m := regexp.MustCompile(`pprof: (http://127\.0\.0\.1:\d+)/debug/pprof/`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no pprof address in %q", out.String())
	}
	if code := get(t, m[1]+"/debug/pprof/cmdline", ""); code != 200 {
		t.Errorf("pprof on its own address: %d", code)
	}
	for _, key := range []string{"", "sk-m"} {
		if code := get(t, api+"/debug/pprof/cmdline", key); code != 404 {
			t.Errorf("pprof on the API port (key %q): %d, want 404", key, code)
		}
	}
}
