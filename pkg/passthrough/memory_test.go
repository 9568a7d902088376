package passthrough

import (
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// heapBytes is the live heap (runtime/metrics: cheap, no stop-the-world).
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestHundredMegabyteStreamRelaysWithFlatMemory relays a 100 MB event stream
// (1 KiB events, as a long generation would send) and samples the heap while
// it flows: the relay, the usage tee included, must hold a bounded amount
// whatever the answer's size.
func TestHundredMegabyteStreamRelaysWithFlatMemory(t *testing.T) {
	const total = 100 << 20
	event := "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"" + strings.Repeat("x", 1024-62) + "\"}}\n\n"
	block := []byte(strings.Repeat(event, 64))
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentSSE)
		w.Write([]byte(anthropicSSE[:strings.Index(anthropicSSE, "event: content_block_start")]))
		for sent := 0; sent < total; sent += len(block) {
			if _, err := w.Write(block); err != nil {
				return
			}
		}
		w.Write([]byte(anthropicSSE[strings.Index(anthropicSSE, "event: message_delta"):]))
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)

	runtime.GC()
	base := heapBytes()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v := heapBytes(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	start := time.Now()
	resp, err := h.srv.Client().Post(h.srv.URL+"/anthropic/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(stop)
	<-sampled
	if err != nil || n < total {
		t.Fatalf("relayed %d bytes: %v", n, err)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("relayed %d MB in %s; peak heap growth %.1f MB", n>>20, time.Since(start).Round(time.Millisecond), float64(growth)/(1<<20))
	// Go's GC lets the heap grow to twice its live size between cycles, and
	// three HTTP connections hold their buffers: a relay that kept the
	// answer would need 100 MB more.
	if growth > 24<<20 {
		t.Errorf("heap grew by %d MB while relaying a 100 MB stream", growth>>20)
	}
	if got := h.limits.recorded(); len(got) != 1 || got[0] != 45 {
		t.Errorf("usage at the end of the stream: %v, want [45]", got)
	}
}
