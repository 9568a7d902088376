// Command upstream is a load target that speaks the provider APIs sluice sits
// in front of: OpenAI (embeddings, moderations, chat and text completions), Anthropic
// Messages, Gemini and Vertex AI, and the Bedrock runtime (including AWS event
// streams), plus a Langfuse-style ingestion sink for logging callbacks.
//
// It accepts any credential, counts what it serves (GET /_bench/stats), with
// -record-served keeps each request's serve time (GET /_bench/served), and
// precomputes its answers so that it stays cheap: it shares the machine with
// the process being measured.
//
//	upstream -addr 127.0.0.1:8090 -latency 20ms -jitter 5ms -error-rate 0.01
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var opts options
	flag.StringVar(&opts.addr, "addr", "127.0.0.1:0", "listen address (port 0 picks a free port; the bound address is printed)")
	flag.DurationVar(&opts.latency, "latency", 0, "delay before answering (before the first byte of a stream)")
	flag.DurationVar(&opts.jitter, "jitter", 0, "extra random delay, uniform in [0, jitter)")
	flag.Float64Var(&opts.errorRate, "error-rate", 0, "fraction of model calls answered 429 or 500 with Retry-After")
	flag.IntVar(&opts.streamChunks, "stream-chunks", 200, "content chunks (tokens) per streamed answer; also the length of non-streamed answers")
	flag.DurationVar(&opts.streamInterval, "stream-interval", 0, "pause between streamed chunks")
	flag.IntVar(&opts.dims, "dims", 1536, "embedding dimensions when the request does not ask for others")
	flag.BoolVar(&opts.recordServed, "record-served", false, "keep each request's serve time for GET /_bench/served (infra/sizing; off for load runs)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(opts, logger); err != nil {
		logger.Error("upstream failed", "err", err)
		os.Exit(1)
	}
}

func run(opts options, logger *slog.Logger) error {
	if err := opts.validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.addr, err)
	}
	srv := newServer(opts)
	httpSrv := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// The first line on stdout is the contract with whoever started us.
	fmt.Printf("upstream listening on http://%s\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()

	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := httpSrv.Shutdown(shutdownCtx); err != nil {
			logger.Warn("shutdown", "err", err)
		}
	}
	logger.Info("upstream stopped", "served", srv.stats.snapshot().Total)
	return nil
}
