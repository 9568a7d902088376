// Command proxy is the baseline sluice is measured against: a bare
// httputil.ReverseProxy in front of one upstream, with nothing but a
// connection pool sized for load. It runs as its own process so that its CPU
// time is measured the same way as sluice's.
//
//	proxy -upstream http://127.0.0.1:8090
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// idleConnsPerHost keeps enough upstream connections alive for the
// concurrency the benchmark drives; the default of 2 would measure
// connection set-up instead of proxying.
const idleConnsPerHost = 1024

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port; the bound address is printed)")
	upstream := flag.String("upstream", "", "base URL of the upstream, e.g. http://127.0.0.1:8090")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this address of its own (the bench's -profile), e.g. 127.0.0.1:6061")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			logger.Error("proxy failed", "err", err)
			os.Exit(1)
		}
	}
	if err := run(*addr, *upstream, logger); err != nil {
		logger.Error("proxy failed", "err", err)
		os.Exit(1)
	}
}

func run(addr, upstream string, logger *slog.Logger) error {
	target, err := url.Parse(upstream)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return fmt.Errorf("-upstream %q: want an absolute URL", upstream)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           fullDuplex(newProxy(target, logger)),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fmt.Printf("proxy listening on http://%s\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdownCtx)
	}
	return nil
}

// fullDuplex lets the handler keep reading the request body after the
// response has started. Without it the HTTP/1 server discards the unread
// body at the first response write, and ReverseProxy, still forwarding that
// body upstream, fails about one POST in a few hundred under load
// (golang/go#40747: "read error during body copy: use of closed network
// connection", and the client sees an unexpected EOF).
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // unsupported only on HTTP/2, where it is not needed
		h.ServeHTTP(w, r)
	})
}

// newProxy returns the baseline: the standard library's reverse proxy, which
// already flushes event streams (and any response of unknown length) as they
// arrive, with its connection pool sized for the load and its copy buffers
// pooled.
func newProxy(target *url.URL, logger *slog.Logger) *httputil.ReverseProxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = idleConnsPerHost
	tr.MaxIdleConnsPerHost = idleConnsPerHost
	return &httputil.ReverseProxy{
		Rewrite:    func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:  tr,
		BufferPool: &bufferPool{},
		ErrorLog:   slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// servePprof serves the CPU profile on addr, a listener of its own, so that
// the bench can compare the proxy's profile with sluice's.
func servePprof(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
	return nil
}

// bufferPool reuses ReverseProxy's copy buffers. Without one, every request
// allocates a fresh 32 KiB buffer, and the proxy's tiny heap turns that into
// a garbage collection every hundred-odd requests: a baseline paying for
// that would flatter whatever is compared with it (the bench once reported
// sluice at 0.81–1.05× this proxy's CPU per request that way, where a pooled
// proxy puts it at 1.3–1.4×). A pool is the standard setting of a
// production ReverseProxy, and sluice pools its own buffers.
type bufferPool struct{ pool sync.Pool }

// copyBufferSize is ReverseProxy's own buffer size when it has no pool.
const copyBufferSize = 32 << 10

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, copyBufferSize)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }
