package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves GET /metrics on addr (SLUICE_METRICS_ADDR), a
// listener of its own without auth, for a Prometheus that holds no key:
// the operator chooses who reaches the address. The API's /metrics needs
// the master key. The returned function stops it.
func serveMetrics(addr string, h http.Handler, out io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(out, "metrics: http://%s/metrics (no auth)\n", ln.Addr())
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}
