package main

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The baseline must relay a stream as it arrives, or every streaming
// comparison with it would be meaningless.
func TestProxyRelaysStreamsUnbuffered(t *testing.T) {
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first " + string(body) + "\n\n"))
		w.(http.Flusher).Flush()
		<-release
		w.Write([]byte("data: [DONE]\n\n"))
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)
	proxy := httptest.NewServer(fullDuplex(newProxy(target, slog.New(slog.DiscardHandler))))
	defer proxy.Close()

	resp, err := http.Post(proxy.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "data: first {\"stream\":true}\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not arrive before the upstream finished: the proxy buffers streams")
	}
	close(release)
}

// The baseline pools its copy buffers: relaying an answer must not cost a
// fresh 32 KiB buffer per request (see bufferPool).
func TestProxyPoolsCopyBuffers(t *testing.T) {
	answer := strings.Repeat("x", 64<<10)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, answer)
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)
	proxy := httptest.NewServer(newProxy(target, slog.New(slog.DiscardHandler)))
	defer proxy.Close()
	get := func() {
		resp, err := http.Get(proxy.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if n, _ := io.Copy(io.Discard, resp.Body); n != int64(len(answer)) {
			t.Fatalf("relayed %d bytes, want %d", n, len(answer))
		}
	}
	get() // connections and pools warm
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		get()
	}
	runtime.ReadMemStats(&after)
	if perReq := (after.TotalAlloc - before.TotalAlloc) / n; perReq >= copyBufferSize {
		t.Errorf("%d bytes allocated per request (client, proxy and upstream together): the proxy allocates a copy buffer per request", perReq)
	}
}
