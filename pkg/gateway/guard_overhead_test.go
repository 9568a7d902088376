package gateway

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkGuardedServer is a keep-alive request with a small body through
// the local server's guards (the body guard, the connection cap and its
// read deadlines, the server's timeouts as Serve sets them) to a handler
// that reads the body and answers. It makes no model call and leaves no
// work behind, so under valgrind its instructions a request are exact
// (BenchmarkOverhead's include background work that grows with wall time).
func BenchmarkGuardedServer(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	limited := limitConnections(ln, 64)
	answer := []byte(`{"ok":true}`)
	h := guardBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(answer)
	}), time.Minute, 1<<10, nil)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnState: limited.ConnState}
	go srv.Serve(limited)
	b.Cleanup(func() { srv.Close() })
	tr := &http.Transport{DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	url, body := "http://"+ln.Addr().String()+"/", strings.Repeat("x", 512)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(len(answer)) || resp.StatusCode != http.StatusOK {
			b.Fatalf("answer %d, %d bytes, %v", resp.StatusCode, n, err)
		}
	}
}
