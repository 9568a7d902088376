package gateway

import (
	"context"
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

func TestConnectionCap(t *testing.T) {
	addr, _ := serveWith(t, map[string]string{"SLUICE_MAX_CONNECTIONS": "2"})
	// Two connections that say nothing hold both slots.
	first := dialRaw(t, addr, "")
	dialRaw(t, addr, "")
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
		t.Fatalf("a third connection was served (%d) while two were open", code)
	case <-time.After(200 * time.Millisecond):
	}
	first.conn.Close()
	if code := <-answered; code != 200 {
		t.Errorf("once a slot freed: %d, want 200", code)
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
