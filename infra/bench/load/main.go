// Command load is sluice's benchmark harness. It starts the bench upstream,
// a bare reverse proxy in front of it, and sluice (when it builds), then runs
// each scenario against all three, interleaved round by round, and reports
// medians of throughput, CPU per request, peak RSS and latency, with sluice's
// figures as ratios to the bare proxy's and the targets from the issues.
//
//	load -scenarios noop,embeddings -rounds 3 -json .bench/results.json
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	var cfg config
	var scenarios string
	var list bool
	flag.StringVar(&scenarios, "scenarios", "all", "comma-separated scenarios, or all: "+strings.Join(allScenarios(), ","))
	flag.BoolVar(&list, "list", false, "list the scenarios and exit")
	flag.StringVar(&cfg.root, "root", ".", "repository root (where functions/ and infra/ are)")
	flag.StringVar(&cfg.pgo, "pgo", "auto", "go build's -pgo for sluice: auto (functions/local/default.pgo, as make run and the Lambda builds use), off (to measure what the profile gains), or a profile's path")
	flag.StringVar(&cfg.outDir, "out", ".bench", "directory for binaries, logs, data and results")
	flag.StringVar(&cfg.binDir, "bin", "", "directory for the upstream and proxy binaries, rebuilt at start (default <out>/bin)")
	flag.StringVar(&cfg.jsonPath, "json", "", "also write the report as JSON to this file")
	flag.StringVar(&cfg.textPath, "txt", "", "also write the printed report to this file")
	flag.IntVar(&cfg.rounds, "rounds", 5, "interleaved rounds (direct, proxy, sluice, direct, ...)")
	flag.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "closed-loop warm-up before each measurement")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "closed-loop (saturation) measurement per target per round")
	flag.DurationVar(&cfg.openDuration, "open-duration", 10*time.Second, "open-loop (fixed rate) measurement per target per round")
	quick := flag.Bool("quick", false, "for iterating, not for figures: "+quickSettings()+", unless those flags are given")
	flag.IntVar(&cfg.concurrency, "concurrency", 0, "closed-loop requests in flight (0: the scenario's default)")
	flag.Float64Var(&cfg.rate, "rate", 0, "open-loop requests per second (0: the scenario's default)")
	flag.Int64Var(&cfg.maxRequests, "max-requests", 1_000_000, "upper bound on requests per loop")
	flag.IntVar(&cfg.maxInFlight, "max-in-flight", 512, "open loop: most requests outstanding at once")
	flag.DurationVar(&cfg.maxLag, "max-lag", 10*time.Millisecond, "a measurement whose open loop sent its p99 request later than this is noisy (the machine stalled the load generator) and is measured again")
	flag.IntVar(&cfg.retries, "retries", 1, "how many times a noisy measurement is measured again")
	flag.IntVar(&cfg.cpuSlices, "cpu-slices", 12, "scenarios with a CPU target: after the rounds, this many slices of closed loop per target, alternating proxy and sluice, whose pooled CPU per request decides the check (0: the rounds' medians decide)")
	flag.DurationVar(&cfg.cpuSlice, "cpu-slice", 2*time.Second, "the length of one CPU slice")
	flag.DurationVar(&cfg.deadline, "deadline", 2*time.Hour, "the whole run stops after this long")
	flag.BoolVar(&cfg.sluice, "sluice", true, "build and measure sluice (./functions/local) when it exists")
	flag.StringVar(&cfg.telemetry, "telemetry", "metrics", "what sluice records: off (SLUICE_METRICS=false), metrics (the default), or traces (metrics and OpenTelemetry traces exported over OTLP/HTTP to a collector stand-in in this process); run a scenario once with each to compare CPU per request")
	flag.BoolVar(&cfg.profile, "profile", false, "after the rounds of each HTTP scenario, one more closed loop per target (not counted) with a CPU profile of the proxy and of sluice, written to <out>/profiles/<scenario>-<target>.pprof, and its allocations to <scenario>-<target>.allocs.pprof")
	flag.BoolVar(&cfg.sizes, "sizes", true, "build each functions/*/ bootstrap for linux/arm64 and report its size")
	flag.IntVar(&cfg.startupRuns, "startup-runs", 5, "with -sizes: cold starts per function for the Lambda start-up figures (0: none)")
	flag.IntVar(&cfg.uploadMB, "upload-mb", 200, "upload scenario: file size in MiB")
	flag.StringVar(&cfg.uploadPurpose, "upload-purpose", "user_data", "upload scenario: the file's purpose")
	flag.IntVar(&cfg.batchLines, "batch-lines", 50000, "batch scenario: lines in the input file")
	flag.DurationVar(&cfg.batchTimeout, "batch-timeout", 5*time.Minute, "batch scenario: longest wait for the batch to finish")
	flag.IntVar(&cfg.batchConcurrency, "batch-concurrency", 200, "batch scenario: lines sluice runs at once (SLUICE_BATCH_CONCURRENCY), and the ideal (direct) run's concurrency")
	flag.IntVar(&cfg.streamChunks, "stream-chunks", 200, "upstream: chunks per streamed answer")
	flag.DurationVar(&cfg.streamInterval, "stream-interval", time.Millisecond, "upstream: pause between streamed chunks")
	flag.DurationVar(&cfg.upstreamLatency, "upstream-latency", 0, "upstream: delay before answering")
	flag.Parse()
	var err error
	if *quick {
		err = applyQuick(flag.CommandLine)
	}

	if list {
		fmt.Println(strings.Join(allScenarios(), "\n"))
		return
	}
	if err == nil {
		cfg.scenarios, err = parseScenarios(scenarios)
	}
	if err == nil {
		err = cfg.validate()
	}
	if err == nil {
		err = run(&cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(cfg *config) error {
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.deadline)
	defer cancel()

	for _, d := range []string{cfg.outDir, cfg.binDir, cfg.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := ensureTools(ctx, cfg); err != nil {
		return err
	}
	b := &bench{cfg: cfg, ticks: clockTicks(ctx), client: newClient(), progress: os.Stderr}
	defer b.stopAll()

	if err := b.startUpstreamAndProxy(ctx); err != nil {
		return err
	}
	if slices.Contains(cfg.scenarios, "titan-fanout") {
		b.startSlowUpstream(ctx)
	}
	b.startSluice(ctx)
	b.logf("bench: pids: upstream %d, proxy %d, sluice %d (for profilers: these are this run's own)", b.upstream.proc.pid, b.proxy.proc.pid, b.sluicePid())

	rep := &report{Started: started, Machine: describeMachine(ctx, b.ticks), Settings: cfg.settings(), Sluice: "measured (" + b.sluiceBase() + ", built with -pgo=" + cfg.pgo + ")"}
	if b.sluice == nil {
		rep.Sluice = "not measured — " + b.sluiceSkip
	}
	b.runScenarios(ctx, rep)
	if cfg.sizes && ctx.Err() == nil {
		b.logf("bench: building bootstraps for linux/arm64")
		rep.Lambda = buildBootstraps(ctx, cfg.root, cfg.outDir)
		if cfg.startupRuns > 0 && ctx.Err() == nil {
			b.logf("bench: measuring Lambda cold starts (%d per function)", cfg.startupRuns)
			rep.Lambda.Startup = measureStartup(ctx, cfg.root, cfg.outDir, b.upstreamURL, cfg.startupRuns)
		}
	}
	rep.ElapsedSeconds = time.Since(started).Seconds()
	if err := b.writeReports(rep); err != nil {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("stopped at the %s deadline; the report covers what finished", cfg.deadline)
	}
	return ctx.Err()
}

// startUpstreamAndProxy starts the fake upstream and the bare proxy in
// front of it (with its pprof listener when profiling).
func (b *bench) startUpstreamAndProxy(ctx context.Context) error {
	cfg := b.cfg
	b.logf("bench: starting the upstream and the bare proxy")
	var err error
	b.upstream, b.upstreamURL, err = startChild(ctx, "upstream", cfg.logDir, filepath.Join(cfg.binDir, "upstream"), []string{
		"-addr", "127.0.0.1:0",
		"-stream-chunks", strconv.Itoa(cfg.streamChunks),
		"-stream-interval", cfg.streamInterval.String(),
		"-latency", cfg.upstreamLatency.String(),
	}, nil, b.ticks, true)
	if err != nil {
		return err
	}
	proxyArgs := []string{"-addr", "127.0.0.1:0", "-upstream", b.upstreamURL}
	if cfg.profile {
		if b.proxyPprof, err = pprofAddr(); err != nil {
			return err
		}
		proxyArgs = append(proxyArgs, "-pprof", b.proxyPprof)
	}
	b.proxy, b.proxyURL, err = startChild(ctx, "proxy", cfg.logDir, filepath.Join(cfg.binDir, "proxy"), proxyArgs, nil, b.ticks, true)
	if err != nil {
		return err
	}
	return nil
}

// runScenarios runs cfg's scenarios in order while ctx lasts, adding each
// one's report and checks to rep.
func (b *bench) runScenarios(ctx context.Context, rep *report) {
	cfg := b.cfg
	scenarios := map[string]httpScenario{}
	for _, sc := range httpScenarios() {
		scenarios[sc.name] = sc
	}
	for _, name := range cfg.scenarios {
		if ctx.Err() != nil {
			break
		}
		b.checkSluiceAlive()
		b.logf("bench: scenario %s", name)
		var s *scenarioReport
		switch name {
		case "upload":
			s = b.runUpload(ctx)
		case "batch":
			s = b.runBatch(ctx)
		case "callback":
			s = b.runCallback(ctx, scenarios["embeddings"])
		case "budget":
			s = b.runBudget(ctx, scenarios["embeddings"])
		case "telemetry":
			s = b.runTelemetry(ctx, scenarios)
		case "titan-fanout":
			s = b.runTitanFanout(ctx)
		default:
			s = b.runHTTPScenario(ctx, scenarios[name])
		}
		rep.Scenarios = append(rep.Scenarios, s)
	}
	reportTranslated(rep.Scenarios)
	for _, s := range rep.Scenarios {
		rep.Checks = append(rep.Checks, s.Checks...)
	}
}

// writeReports prints the report, and writes it as text and JSON where
// cfg asks.
func (b *bench) writeReports(rep *report) error {
	cfg := b.cfg
	printReport(os.Stdout, rep)
	if cfg.textPath != "" {
		var buf bytes.Buffer
		printReport(&buf, rep)
		if err := os.WriteFile(cfg.textPath, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if cfg.jsonPath != "" {
		if err := writeJSON(cfg.jsonPath, rep); err != nil {
			return err
		}
		b.logf("bench: JSON report in %s", cfg.jsonPath)
	}
	return nil
}

// startSluice starts sluice or records why it is not measured.
func (b *bench) startSluice(ctx context.Context) {
	if !b.cfg.sluice {
		b.sluiceSkip = "disabled with -sluice=false"
		return
	}
	b.logf("bench: building and starting sluice (./functions/local)")
	s, err := startSluice(ctx, b.cfg, b.client, b.upstreamURL, b.slowUpstreamURL, b.ticks)
	if err != nil {
		if se := (*skipError)(nil); errors.As(err, &se) {
			b.sluiceSkip = se.reason
		} else {
			b.sluiceSkip = "could not start: " + err.Error()
		}
		b.logf("bench: sluice not measured: %s", b.sluiceSkip)
		return
	}
	b.sluice = s
}

// startSlowUpstream starts a second upstream whose every model call waits
// titanFanoutLatency (the latency flag is per process), for titan-fanout.
func (b *bench) startSlowUpstream(ctx context.Context) {
	var err error
	b.slowUpstream, b.slowUpstreamURL, err = startChild(ctx, "upstream-slow", b.cfg.logDir, filepath.Join(b.cfg.binDir, "upstream"),
		[]string{"-addr", "127.0.0.1:0", "-latency", titanFanoutLatency.String()}, nil, b.ticks, true)
	if err != nil {
		b.slowSkip = err.Error()
		b.logf("bench: slow upstream: %v", err)
	}
}

// checkSluiceAlive turns a sluice that exited mid-run (a crash, or a signal
// from outside the harness) into one reason on every later scenario, instead
// of a connection error on each.
func (b *bench) checkSluiceAlive() {
	if b.sluice == nil || !b.sluice.child.exited() {
		return
	}
	b.sluiceSkip = fmt.Sprintf("sluice exited during the run (%v); last log lines: %s", b.sluice.child.waitErr, b.sluice.child.tail(2))
	b.logf("bench: %s", b.sluiceSkip)
	b.exited, b.sluice = b.sluice, nil
}

func (b *bench) sluicePid() int {
	if b.sluice == nil {
		return 0
	}
	return b.sluice.child.proc.pid
}

func (b *bench) sluiceBase() string {
	if b.sluice == nil {
		return ""
	}
	return b.sluice.base
}

func (b *bench) stopAll() {
	b.sluice.stop()
	b.exited.stop()
	b.proxy.stop()
	b.upstream.stop()
	b.slowUpstream.stop()
}

// ensureTools (re)builds the upstream and the proxy, so a run never
// measures stale binaries; with a warm build cache this takes a moment.
func ensureTools(ctx context.Context, cfg *config) error {
	bin, err := filepath.Abs(cfg.binDir)
	if err != nil {
		return fmt.Errorf("bin dir: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./infra/bench/upstream", "./infra/bench/proxy")
	cmd.Dir = cfg.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the upstream and proxy: %w: %s", err, firstLines(string(out), 5))
	}
	return nil
}
