// Package ssetest is what tests of long event streams share: a provider
// that streams without holding its answer, and a client that reads the
// stream while checking that the heap in use stays flat.
package ssetest

import (
	"io"
	"math"
	"net/http"
	"runtime"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/sse"
)

// LongStream is a provider answering with a stream of head, n times delta,
// then tail: made as it is written, never held whole.
func LongStream(n int, contentType string, head, delta, tail []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(head)
		for range n {
			w.Write(delta)
		}
		w.Write(tail)
	}
}

// MaxGrowth is how much the heap in use may grow over a long stream:
// holding even the 100-odd bytes of each of 10,000 events would add more.
const MaxGrowth = 512 << 10

// ReadFlat reads the event stream body to its end, calling each with every
// event, and returns how many were text events (isText). It samples the
// heap in use at every 1,000th text event and fails t when its least at the
// last 1,000 of n text events (the stream still open) is more than
// MaxGrowth above its least over the first 4,000. (The least of a few
// samples: what the gateway's other goroutines hold comes and goes.)
func ReadFlat(t testing.TB, body io.Reader, n int, isText func(sse.Event) bool, each func(sse.Event)) (texts int) {
	t.Helper()
	rd := sse.NewReader(body, sse.Limits{})
	var (
		events      int
		early, late int64 = math.MaxInt64, math.MaxInt64
	)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", events, err)
		}
		events++
		if isText(ev) {
			switch texts++; {
			case texts%1000 != 0:
			case texts <= 4000:
				early = min(early, liveHeap())
			case texts >= n-1000:
				late = min(late, liveHeap())
			}
		}
		each(ev)
	}
	if texts == n {
		if grown := late - early; grown > MaxGrowth {
			t.Errorf("the heap grew by %d KiB over the stream", grown>>10)
		} else {
			t.Logf("the heap grew by %d KiB over the stream", grown>>10)
		}
	}
	return texts
}

// liveHeap is the heap in use after a collection (two: the second frees
// what the first left in the pools' victim caches).
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
