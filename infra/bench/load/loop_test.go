package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestScheduleAt(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		rate float64
		i    int64
		want time.Duration
	}{
		{1000, 0, 0},
		{1000, 1, time.Millisecond},
		{1000, 2500, 2500 * time.Millisecond},
		{3, 1, 333333333 * time.Nanosecond},
		{0.5, 3, 6 * time.Second},
	} {
		if got := scheduleAt(start, tc.rate, tc.i).Sub(start); got != tc.want {
			t.Errorf("scheduleAt(rate %v, i %d) = +%v, want +%v", tc.rate, tc.i, got, tc.want)
		}
	}
}

// A server that can serve one request at a time, taking 20 ms each, offered
// 100 requests per second: the open loop must charge the queueing to the
// requests (latency from the schedule), where a closed loop would only see
// the 20 ms service time.
func TestOpenLoopHasNoCoordinatedOmission(t *testing.T) {
	var mu sync.Mutex
	slow := func(ctx context.Context) outcome {
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return outcome{status: 200, firstByte: time.Now()}
	}
	res := runOpen(context.Background(), 100, 100*time.Millisecond, 1000, 64, slow)
	if res.Sent != 10 || res.OK != 10 {
		t.Fatalf("sent %d ok %d, want 10", res.Sent, res.OK)
	}
	// Request i is due at 10i ms and finishes near 20(i+1) ms: the last
	// waits about 110 ms.
	if got := res.Latency.Max(); got < 90*time.Millisecond {
		t.Fatalf("max latency %v: the queueing behind a stalled server was not charged", got)
	}
	if got := res.Latency.Quantile(0); got < 18*time.Millisecond {
		t.Fatalf("min latency %v, want ≥ the 20 ms service time", got)
	}

	closed := runClosed(context.Background(), 1, time.Second, 10, slow)
	if closed.OK != 10 || closed.Latency.Max() > 60*time.Millisecond {
		t.Fatalf("closed loop: ok %d max %v", closed.OK, closed.Latency.Max())
	}
}

func TestOpenLoopKeepsRate(t *testing.T) {
	fast := func(context.Context) outcome { return outcome{status: 200} }
	start := time.Now()
	res := runOpen(context.Background(), 500, 200*time.Millisecond, 1<<20, 16, fast)
	if res.Sent != 100 {
		t.Fatalf("sent %d, want 100", res.Sent)
	}
	if el := time.Since(start); el < 190*time.Millisecond || el > 2*time.Second {
		t.Fatalf("100 requests at 500/s took %v", el)
	}
}

func TestLoopsCountErrorsAndStop(t *testing.T) {
	n := 0
	var mu sync.Mutex
	mixed := func(context.Context) outcome {
		mu.Lock()
		defer mu.Unlock()
		n++
		switch n % 3 {
		case 0:
			return outcome{status: 429}
		case 1:
			return outcome{err: context.DeadlineExceeded}
		}
		return outcome{status: 200}
	}
	res := runClosed(context.Background(), 4, time.Minute, 30, mixed)
	if res.Sent != 30 || res.OK != 10 || res.Errors["429"] != 10 || res.Errors["timeout"] != 10 {
		t.Fatalf("sent %d ok %d errors %v", res.Sent, res.OK, res.Errors)
	}
	if res.ErrorCount() != 20 {
		t.Fatalf("error count %d", res.ErrorCount())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := runOpen(ctx, 1000, time.Minute, 1<<20, 4, mixed); res.Sent != 0 {
		t.Fatalf("cancelled open loop sent %d", res.Sent)
	}
}

func TestHTTPCallMeasuresFirstByte(t *testing.T) {
	// The gap between the chunks is long beside a loaded machine's
	// connection setup, so the first byte is told from the last.
	const gap = 200 * time.Millisecond
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		time.Sleep(gap)
		w.Write([]byte("data: [DONE]\n\n"))
	}))
	defer ts.Close()
	spec := requestSpec{Method: "POST", URL: ts.URL, Header: http.Header{"Authorization": {"Bearer k"}}, Body: []byte(`{}`)}
	start := time.Now()
	out := httpCall(newClient(), spec)(context.Background())
	end := time.Now()
	if out.err != nil || out.status != 200 || out.bytes != 27 {
		t.Fatalf("outcome %+v", out)
	}
	if ttfb, total := out.firstByte.Sub(start), end.Sub(start); ttfb > total-gap/2 {
		t.Fatalf("first byte at %v of %v: not measured at the first chunk", ttfb, total)
	}
	out = httpCall(newClient(), requestSpec{Method: "GET", URL: ts.URL})(context.Background())
	if out.status != http.StatusUnauthorized {
		t.Fatalf("status %d", out.status)
	}
	out = httpCall(newClient(), requestSpec{Method: "GET", URL: "http://127.0.0.1:1/"})(context.Background())
	if out.err == nil || errors.Is(out.err, context.DeadlineExceeded) {
		t.Fatalf("refused connection: %v", out.err)
	}
}
