package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/lane"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// Serve runs the local process: every route on one HTTP server at
// Settings.Addr, until ctx is done; then it drains in-flight requests (up to
// Settings.ShutdownTimeout) and returns nil. The start-up banner goes to out.
func (g *Gateway) Serve(ctx context.Context, out io.Writer) error {
	h, err := server.Handler(g.Services, server.Options{})
	if err != nil {
		return err
	}
	idle, maxConns := g.Settings.BodyIdleTimeout, g.Settings.MaxConnections
	if idle <= 0 {
		idle = config.DefaultBodyIdleTimeout
	}
	if maxConns <= 0 {
		maxConns = config.DefaultMaxConnections
	}
	h = guardBodies(h, idle, g.Settings.BodyMinRate, g.bodies)
	// The bodies held whole are bounded by the budget, but the garbage
	// collector lets the heap grow to twice what is live before it runs:
	// a full budget would cost twice its size. A soft memory limit of the
	// budget plus memoryHeadroom makes it collect sooner instead (unless
	// the operator set GOMEMLIMIT).
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		prev := debug.SetMemoryLimit(memoryBound(g.bodies.limit))
		defer debug.SetMemoryLimit(prev)
	}
	ln, err := net.Listen("tcp", g.Settings.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", g.Settings.Addr, err)
	}
	limited := limitConnections(ln, maxConns)
	ln = limited
	// HTTP/2 without TLS (h2c, prior knowledge) beside HTTP/1.1: SDKs such
	// as AWS's for JavaScript speak HTTP/2 to an http:// URL.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnState:         limited.ConnState,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       withLane, // bounds the connection's provider calls
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
	if addr := g.Settings.Pprof; addr != "" {
		stop, err := servePprof(addr, out)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	if addr := g.Settings.MetricsAddr; addr != "" && g.Services.Metrics != nil {
		stop, err := serveMetrics(addr, g.Services.Metrics.Handler(), out)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	// Last, so that once it says where sluice listens, every listener is up.
	g.banner(out, "http://"+ln.Addr().String())
	for _, w := range g.Config.Warnings {
		slog.Warn(w)
	}

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var workers sync.WaitGroup
	for _, run := range g.background() {
		workers.Go(func() { run(workCtx) })
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	slog.Info("shutting down: draining in-flight requests and workers", "timeout", g.Settings.ShutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Settings.ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	// The handlers did not wait for their log events' publishes: finish
	// them before the delivery worker stops.
	if derr := g.Services.Events.Drain(shutdownCtx); derr != nil {
		slog.Warn("shutdown: log events still publishing", "error", derr)
	}
	stopWork()
	workers.Wait()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// withLane gives a connection its lane (package lane), which the connection
// tells when the client hangs up. A connection that is not the limiter's
// (none is) gets none: nothing would tell it.
func withLane(ctx context.Context, c net.Conn) context.Context {
	lc, ok := c.(*limitedConn)
	if !ok {
		return ctx
	}
	ctx, lc.hangUp = lane.With(ctx)
	return ctx
}

// background lists the loops the local process runs beside the server: one
// per job of the jobs table (in the cloud each is a scheduled or
// queue-triggered function instead) and, where the backend has no TTL
// deletion of its own, the purge of expired records.
func (g *Gateway) background() []func(context.Context) {
	var loops []func(context.Context)
	for _, j := range server.Jobs() {
		loops = append(loops, func(ctx context.Context) {
			if err := RunJob(ctx, g.Services, j); err != nil {
				slog.ErrorContext(ctx, "job not run", "error", err)
			}
		})
	}
	if dead, ok := g.Backend.DeliveryDeadLetters.(lengther); ok {
		loops = append(loops, func(ctx context.Context) { watchDeadLetters(ctx, dead, deadLetterCheck) })
	}
	if purge := g.Backend.PurgeExpired; purge != nil {
		loops = append(loops, func(ctx context.Context) {
			repeat(ctx, purgeInterval, func(ctx context.Context) {
				if n, err := purge(ctx); err != nil && ctx.Err() == nil {
					slog.WarnContext(ctx, "purge expired records failed", "error", err)
				} else if n > 0 {
					slog.InfoContext(ctx, "purge expired records", "count", n)
				}
			})
		})
	}
	return loops
}

// memoryHeadroom is the most memory the local process is allowed beside
// the request bodies it holds (its own heap, connections' buffers, answers
// relayed, the garbage of bodies' grown buffers): half the budget, at most
// this. docs/operations.md states the resulting bound on RSS.
const memoryHeadroom = 128 << 20

// memoryBound is the soft memory limit of a process whose body budget is
// budget.
func memoryBound(budget int64) int64 { return budget + min(budget/2, memoryHeadroom) }

// purgeInterval is how often the local process reclaims expired records.
const purgeInterval = time.Hour

// deadLetterCheck is how often the local process looks at its delivery
// dead-letter queue.
const deadLetterCheck = time.Minute

// lengther is a queue that can count its messages (the local one).
type lengther interface{ Len() (int, error) }

// watchDeadLetters is the local process's alarm on the delivery dead-letter
// queue (the cloud's is DeliveryDeadLettersAlarm): an error is logged at
// start and whenever the log events waiting there grow in number, until
// they are re-driven (`sluice redrive`).
func watchDeadLetters(ctx context.Context, dead lengther, every time.Duration) {
	last := 0
	repeat(ctx, every, func(ctx context.Context) {
		n, err := dead.Len()
		switch {
		case err != nil:
			slog.WarnContext(ctx, "could not count the delivery dead letters", "error", err)
		case n > last:
			slog.ErrorContext(ctx, "log events wait in the delivery dead-letter queue: fix their destinations, then re-drive them (stop sluice, run `sluice redrive`)",
				"messages", n)
		}
		if err == nil {
			last = n
		}
	})
}

// banner tells a new user where sluice listens and how to authenticate. The
// generated master key is printed here, once, the only time a secret is shown.
func (g *Gateway) banner(out io.Writer, url string) {
	fmt.Fprintf(out, "sluice listening on %s (backend: %s, data: %s)\n", url, g.Settings.Backend, g.Settings.DataDir)
	switch {
	case g.GeneratedMasterKey != "":
		fmt.Fprintf(out, "\nGenerated master key (shown once; saved 0600 in %s):\n\n    %s\n\n", g.MasterKeySource, g.GeneratedMasterKey)
		fmt.Fprintf(out, "Try it:\n    curl -s %s/team/new -H 'Authorization: Bearer %s' -d '{\"team_alias\":\"demo\"}'\n\n", url, g.GeneratedMasterKey)
	default:
		fmt.Fprintf(out, "master key: from %s\n", g.MasterKeySource)
	}
}
