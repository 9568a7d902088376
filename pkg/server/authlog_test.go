package server_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logging"
)

// lockedBuffer is a log destination the server's goroutines and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the JSON records logged so far with the given message.
func (b *lockedBuffer) records(t *testing.T, message string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["message"] == message {
			out = append(out, rec)
		}
	}
	return out
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureLog sends the default logger to a buffer for the test.
func captureLog(t *testing.T) *lockedBuffer {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	buf := &lockedBuffer{}
	slog.SetDefault(logging.New(buf, "json", "info"))
	return buf
}

// TestFailedAuthenticationsAreLogged: at info, with the client's address and
// the first characters of the key's hash, never the key; at most ten a
// second, the next line counting those left out.
func TestFailedAuthenticationsAreLogged(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	gatewaytest.Run(t, gatewaytest.Options{Now: clock}, func(t *testing.T, g *gatewaytest.Gateway) {
		logs := captureLog(t)
		now.Add(int64(time.Minute)) // a fresh window for each backend
		var keys []string
		for i := range 15 {
			keys = append(keys, "sk-not-a-key-"+strings.Repeat("x", i))
			if resp := g.Do("GET", "/v1/models", keys[i], nil); resp.Status != 401 {
				t.Fatalf("bad key: %d", resp.Status)
			}
		}
		lines := logs.records(t, "authentication failed")
		if len(lines) != 10 {
			t.Fatalf("%d lines for 15 failures in one second, want 10", len(lines))
		}
		for i, rec := range lines {
			want := map[string]any{"level": "INFO", "client": "127.0.0.1", "method": "GET", "path": "/v1/models",
				"key_hash_prefix": auth.Token(keys[i])[:8]}
			for k, v := range want {
				if rec[k] != v {
					t.Errorf("line %d: %s = %v, want %v", i, k, rec[k], v)
				}
			}
		}
		if strings.Contains(logs.String(), "sk-not-a-key") {
			t.Error("a key was logged")
		}

		now.Add(int64(time.Second))
		if resp := g.Do("GET", "/v1/models", "", nil); resp.Status != 401 {
			t.Fatalf("no key: %d", resp.Status)
		}
		lines = logs.records(t, "authentication failed")
		last := lines[len(lines)-1]
		if len(lines) != 11 || last["suppressed"] != 5.0 || last["key_hash_prefix"] != nil {
			t.Errorf("after a quiet second: %d lines, last %v; want 11, suppressed 5, no key hash", len(lines), last)
		}
	})
}
