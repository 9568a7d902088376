package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logging"
)

// heapBytes is the heap's live objects (runtime/metrics: no stop-the-world).
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// budgetGateway serves a gateway whose passthrough and model calls all
// read their bodies, with the body budget set to budget, and returns it, its
// address, a key without a model list and one limited to a model.
func budgetGateway(t *testing.T, budget int64) (g *Gateway, addr, free, restricted string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(cfg, []byte("passthrough:\n"+
		"  anthropic: {api_base: http://127.0.0.1:9, api_key: sk-ant-provider}\n"+
		"  bedrock: {api_base: http://127.0.0.1:9, aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret}\n"+
		"model_list:\n  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: http://127.0.0.1:9, api_key: sk-p}\n"), 0o600)
	const master = "sk-test-master"
	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir(), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": master,
		"SLUICE_CONFIG": cfg, "SLUICE_MAX_BUFFERED_BODY_BYTES": strconv.FormatInt(budget, 10)}
	g, err := Open(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	url, _, stop := serve(t, g)
	t.Cleanup(stop)
	open := post(t, url+"/team/new", master, `{"team_alias":"open","rpm_limit":100000}`)["team_id"].(string)
	limited := post(t, url+"/team/new", master, `{"team_alias":"limited","models":["small"],"rpm_limit":100000}`)["team_id"].(string)
	free = post(t, url+"/key/generate", master, `{"team_id":"`+open+`"}`)["key"].(string)
	restricted = post(t, url+"/key/generate", master, `{"team_id":"`+limited+`"}`)["key"].(string)
	return g, strings.TrimPrefix(url, "http://"), free, restricted
}

// waitForCharged waits until the budget holds want bytes, or fails the test.
func waitForCharged(t *testing.T, b *bodyBudget, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for b.used.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the budget holds %d bytes, want %d", b.used.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowSocket sends a request's head declaring a body of length bytes and
// one byte of it, and then nothing: the reproduction.
func slowSocket(t *testing.T, addr, method, path, key string, length int64) *rawExchange {
	return dialRaw(t, addr, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", method, path, key, length))
}

// probe sends a small whole model call and returns its status and
// Retry-After: 503 once the budget is spent.
func probe(t *testing.T, addr, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/embeddings", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestSlowBodiesHoldNoMemory is the reproduction, fifty times over:
// admitted keys declare the largest bodies each route takes (32 MiB to
// Bedrock and to Anthropic for a key limited to some models, 10 MiB to a
// model call) and send one byte. Each buffer holds what arrived (a first
// 32 KiB), not what was declared.
func TestSlowBodiesHoldNoMemory(t *testing.T) {
	const sockets = 50
	g, addr, free, restricted := budgetGateway(t, config.DefaultMaxBufferedBodies)
	runtime.GC()
	before := heapBytes()
	var declared int64
	for i := range sockets {
		switch i % 3 {
		case 0:
			slowSocket(t, addr, "POST", "/bedrock/model/x/invoke", free, 32<<20)
			declared += 32 << 20
		case 1:
			slowSocket(t, addr, "POST", "/anthropic/v1/messages", restricted, 32<<20)
			declared += 32 << 20
		case 2:
			slowSocket(t, addr, "POST", "/v1/embeddings", free, 10<<20)
			declared += 10 << 20
		}
	}
	waitForCharged(t, g.bodies, sockets*32<<10)
	runtime.GC()
	growth := int64(heapBytes()) - int64(before)
	t.Logf("%d sockets declaring %d MiB in all: heap grew %.1f MiB", sockets, declared>>20, float64(growth)/(1<<20))
	if growth > 16<<20 {
		t.Errorf("heap grew by %d MiB for %d sockets that sent a byte each", growth>>20, sockets)
	}
}

// TestBodyBudgetRefusesBeyondItsLimit: once the bodies held fill the budget,
// a call is refused at once with 503 and Retry-After, and the connection
// closes; when a held body's request ends, its share is given back.
func TestBodyBudgetRefusesBeyondItsLimit(t *testing.T) {
	g, addr, free, _ := budgetGateway(t, 64<<10)
	first := slowSocket(t, addr, "POST", "/bedrock/model/x/invoke", free, 1<<20)
	slowSocket(t, addr, "POST", "/v1/embeddings", free, 1<<20)
	waitForCharged(t, g.bodies, 64<<10)

	x := dialRaw(t, addr, "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+free+"\r\nContent-Length: 2\r\n\r\n{}")
	resp, body := x.answer()
	if resp.StatusCode != http.StatusServiceUnavailable || *errorOf(t, body).Code != "unavailable" || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("over the budget: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if !x.closed() {
		t.Error("the refused request's connection stayed open")
	}

	first.conn.Close()
	waitForCharged(t, g.bodies, 32<<10)
	if code, _ := probe(t, addr, free); code != http.StatusBadRequest {
		t.Errorf("with the budget given back: %d, want the call's own 400", code)
	}
}

// TestBodyLargerThanTheBudgetIs413: a body that alone needs more than the
// whole budget could never be held: 413, not a 503 to retry.
func TestBodyLargerThanTheBudgetIs413(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := api.ReadBody(w, r, 1<<20); err != nil {
			api.WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	budget := newBodyBudget(100 << 10)
	srv := guardedWith(t, h, budget)
	// 70 KiB of a declared 200 KiB: the buffer must grow past the budget.
	x := dialRaw(t, strings.TrimPrefix(srv, "http://"), fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 200<<10, strings.Repeat("x", 70<<10)))
	if resp, body := x.answer(); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body larger than the budget: %d %s", resp.StatusCode, body)
	}
	resp, err := http.Post(srv+"/", "application/json", strings.NewReader(strings.Repeat("x", 90<<10)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || budget.used.Load() != 0 {
		t.Errorf("a body within the budget: %d, %d bytes still charged after it", resp.StatusCode, budget.used.Load())
	}
}

func guardedWith(t *testing.T, h http.Handler, budget *bodyBudget) string {
	srv := httptest.NewServer(guardBodies(h, time.Minute, 0, budget))
	t.Cleanup(srv.Close)
	return srv.URL
}

// rssBytes is the process's resident set (Linux), or 0.
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestFullBudgetStaysUnderTheRSSBound fills the body budget with bodies
// held whole (8 MiB each, their last byte never sent), then has more
// clients refused: the process's RSS grows by less than the documented
// bound (memoryBound), and the refusals are one WARN line,
// never an ERROR per 503.
func TestFullBudgetStaysUnderTheRSSBound(t *testing.T) {
	if rssBytes() == 0 {
		t.Skip("no /proc/self/status: RSS is measured on Linux")
	}
	if testing.Short() {
		t.Skip("sends the budget's worth of bodies")
	}
	if raceEnabled {
		t.Skip("the race detector multiplies memory use: RSS is measured without it")
	}
	logs := &syncBuffer{}
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	slog.SetDefault(logging.New(logs, "json", "info"))

	const budget, body = 96 << 20, 8 << 20
	g, addr, free, _ := budgetGateway(t, budget)
	runtime.GC()
	debug.FreeOSMemory()
	before := rssBytes()
	peak := before
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, rssBytes())
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	payload := strings.Repeat("x", body-2)
	for range budget / body {
		x := slowSocket(t, addr, "POST", "/bedrock/model/x/invoke", free, body)
		if _, err := io.WriteString(x.conn, payload); err != nil {
			t.Fatal(err)
		}
	}
	waitForCharged(t, g.bodies, budget)
	for range 20 {
		if code, _ := probe(t, addr, free); code != http.StatusServiceUnavailable {
			t.Fatalf("over the budget: %d, want 503", code)
		}
	}
	close(stop)
	<-sampled
	growth := peak - before
	bound := memoryBound(budget)
	t.Logf("budget %d MiB held: RSS %d MiB → peak %d MiB (+%d MiB; bound +%d MiB)", budget>>20, before>>20, peak>>20, growth>>20, bound>>20)
	if growth > bound {
		t.Errorf("RSS grew by %d MiB, over the bound of %d MiB", growth>>20, bound>>20)
	}
	out := logs.String()
	if n := strings.Count(out, "request bodies refused"); n != 1 {
		t.Errorf("%d log lines about 20 refusals, want 1:\n%s", n, out)
	}
	if strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("a budget refusal was logged at ERROR:\n%s", out)
	}
}
