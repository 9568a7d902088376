package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// bench holds the processes and settings of one run.
type bench struct {
	cfg         *config
	ticks       int64
	client      *http.Client
	upstreamURL string
	upstream    *child
	proxyURL    string
	proxy       *child
	proxyPprof  string // the proxy's pprof listener (host:port), with -profile
	sluice      *sluiceProc
	sluiceSkip  string      // why there is no sluice column, when there is none
	exited      *sluiceProc // a sluice that ended mid-run, kept for clean-up
	// slowUpstream answers after titanFanoutLatency (titan-fanout only).
	slowUpstreamURL string
	slowUpstream    *child
	slowSkip        string
	progress        io.Writer
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, format+"\n", args...)
}

// targets returns the targets in interleaving order.
func (b *bench) targets() []target {
	ts := []target{
		{name: "direct", base: b.upstreamURL, proc: b.upstream.proc, key: "sk-client-direct"},
		{name: "proxy", base: b.proxyURL, proc: b.proxy.proc, key: "sk-client-proxy", pprof: b.proxyPprof},
	}
	if b.sluice != nil {
		ts = append(ts, target{name: "sluice", base: b.sluice.base, proc: b.sluice.child.proc, sluice: true, key: b.sluice.key, pprof: b.sluice.pprof})
	}
	return ts
}

// measurement is one target's figures in one round of a scenario.
type measurement struct {
	Round  int           `json:"round"`
	Target string        `json:"target"`
	Closed closedFigures `json:"closed"`
	Open   openFigures   `json:"open"`
	// Retries counts re-measurements because the load generator fell
	// behind; Noisy says the kept one fell behind too.
	Retries int  `json:"retries,omitempty"`
	Noisy   bool `json:"noisy,omitempty"`
}

// closedFigures come from the closed loop: saturation throughput and the
// CPU and memory of the process under test.
type closedFigures struct {
	Concurrency         int               `json:"concurrency"`
	Seconds             float64           `json:"seconds"`
	Requests            int64             `json:"requests"`
	OK                  int64             `json:"ok"`
	Throughput          float64           `json:"throughput_rps"`
	CPUSeconds          float64           `json:"cpu_seconds"`
	CPUPerRequestUS     float64           `json:"cpu_per_request_us"`
	UserCPUPerRequestUS float64           `json:"user_cpu_per_request_us"`
	IOCallsPerRequest   float64           `json:"io_calls_per_request"`
	UpstreamCPUPerReqUS float64           `json:"upstream_cpu_per_request_us"`
	PeakRSSMB           float64           `json:"peak_rss_mb"`
	Latency             LatencySummary    `json:"latency"`
	Errors              map[string]int64  `json:"errors,omitempty"`
	ErrorSamples        map[string]string `json:"error_samples,omitempty"`
}

// openFigures come from the open loop at a fixed rate: latency from the
// scheduled send time, and time to first byte.
type openFigures struct {
	Rate     float64        `json:"rate_rps"`
	Sent     int64          `json:"sent"`
	OK       int64          `json:"ok"`
	Latency  LatencySummary `json:"latency"`
	TTFB     LatencySummary `json:"ttfb"`
	LagP99MS float64        `json:"send_lag_p99_ms"`
	// CPUPerRequestUS is the process under test's CPU per request at this
	// fixed rate, wake-ups included (each request finds it idle).
	CPUPerRequestUS float64           `json:"cpu_per_request_us"`
	Errors          map[string]int64  `json:"errors,omitempty"`
	ErrorSamples    map[string]string `json:"error_samples,omitempty"`
}

// runHTTPScenario measures sc on every target, interleaved, for the
// configured number of rounds.
func (b *bench) runHTTPScenario(ctx context.Context, sc httpScenario) *scenarioReport {
	rep := newScenarioReport(sc.name, sc.about)
	rep.Stream = sc.stream
	rep.cpuLimit = sc.cpuLimit
	rep.reportOnly = sc.reportOnly
	rep.closedLatency = sc.closedLatency
	rep.ttfbSlack = ttfbSlackMS
	if sc.ttfbSlackMS > 0 {
		rep.ttfbSlack = sc.ttfbSlackMS
	}
	if sc.framingEvents > 0 {
		rep.events = b.cfg.streamChunks + sc.framingEvents
	}
	conc, rate := sc.concurrency, sc.rate
	if b.cfg.concurrency > 0 {
		conc = b.cfg.concurrency
	}
	if b.cfg.rate > 0 {
		rate = b.cfg.rate
	}
	rep.Settings = fmt.Sprintf("closed loop: %d in flight for %s; open loop: %.0f req/s for %s; %d rounds",
		conc, b.cfg.duration, rate, b.cfg.openDuration, b.cfg.rounds)
	if sc.closedLatency {
		rep.Settings += "; latency columns are the closed loop's"
	}

	var targets []target
	for _, t := range b.targets() {
		if err := b.probe(ctx, sc, t); err != nil {
			rep.exclude(t.name, err)
			continue
		}
		targets = append(targets, t)
	}
	if b.sluice == nil {
		rep.Skipped["sluice"] = b.sluiceSkip
	}
	for round := 1; round <= b.cfg.rounds && ctx.Err() == nil; round++ {
		for _, t := range targets {
			if _, failed := rep.Failed[t.name]; failed {
				continue
			}
			m, err := b.measureSteady(ctx, sc, t, round, conc, rate)
			if err != nil {
				rep.Failed[t.name] = err.Error()
				continue
			}
			rep.Measurements = append(rep.Measurements, m)
			b.logf("  %-18s round %d %-6s %8.0f req/s  %7.1f µs CPU/req (user %.1f, open %.1f, io %.1f)  p50 %.3f ms  p99 %.3f ms  errors %d",
				sc.name, round, t.name, m.Closed.Throughput, m.Closed.CPUPerRequestUS, m.Closed.UserCPUPerRequestUS, m.Open.CPUPerRequestUS, m.Closed.IOCallsPerRequest, m.Open.Latency.P50, m.Open.Latency.P99,
				sumErrors(m.Closed.Errors)+sumErrors(m.Open.Errors))
		}
	}
	if sc.cpuLimit > 0 && b.cfg.cpuSlices > 0 && ctx.Err() == nil {
		if err := b.measureSlices(ctx, sc, targets, conc, rep); err != nil {
			b.logf("  %-18s CPU slices: %v", sc.name, err)
		}
	}
	if b.cfg.profile && ctx.Err() == nil {
		rep.Profiles, rep.ProfileErrors = b.profileScenario(ctx, sc, targets, conc)
	}
	rep.summarize()
	return rep
}

// probe sends one request and checks the answer. On sluice, a missing route
// or model is a skip; an answer that did not reach the upstream is an error.
func (b *bench) probe(ctx context.Context, sc httpScenario, t target) error {
	before, err := b.upstreamStats(ctx)
	if err != nil {
		return err
	}
	spec := sc.spec(t)
	what := spec.Method + " " + strings.TrimPrefix(spec.URL, t.base)
	req, err := spec.newRequest(ctx)
	if err != nil {
		return fmt.Errorf("build probe %s: %w", what, err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("probe %s: read answer: %w", what, err)
	}
	if t.sluice {
		switch {
		case strings.Contains(string(body), "model_not_found"):
			return skipf("%s answers %d model_not_found: the model is not configured (%s)", what, resp.StatusCode, clip(body))
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
			return skipf("%s answers %d: not landed in sluice yet", what, resp.StatusCode)
		}
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answers %d: %s", what, resp.StatusCode, clip(body))
	}
	if err := sc.check(t, resp.Header, body); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if sc.upstreamRoute != "" {
		after, err := b.upstreamStats(ctx)
		if err != nil {
			return err
		}
		if after.Routes[sc.upstreamRoute] <= before.Routes[sc.upstreamRoute] {
			return fmt.Errorf("%s answered %d without calling the upstream (%s count unchanged)", what, resp.StatusCode, sc.upstreamRoute)
		}
	}
	return nil
}

// measureSteady measures again, up to the configured retries, when the
// open loop could not keep its schedule: then the machine (shared, noisy)
// stalled the load generator, and the figures describe the stall, not the
// target. The last attempt is kept and marked noisy if it too fell behind.
func (b *bench) measureSteady(ctx context.Context, sc httpScenario, t target, round, conc int, rate float64) (measurement, error) {
	limit := ms(b.cfg.maxLag)
	for attempt := 0; ; attempt++ {
		m, err := b.measure(ctx, sc, t, round, conc, rate)
		if err != nil {
			return m, err
		}
		m.Retries = attempt
		m.Noisy = m.Open.LagP99MS > limit
		if !m.Noisy || attempt >= b.cfg.retries || ctx.Err() != nil {
			return m, nil
		}
		b.logf("  %-18s round %d %-6s noisy: open-loop send lag p99 %.1f ms > %.1f ms, measuring again", sc.name, round, t.name, m.Open.LagP99MS, limit)
	}
}

// measure runs the warm-up, the closed loop (with CPU and memory of the
// process under test) and the open loop for one target.
func (b *bench) measure(ctx context.Context, sc httpScenario, t target, round, conc int, rate float64) (measurement, error) {
	do := httpCall(b.client, sc.spec(t))
	runClosed(ctx, conc, b.cfg.warmup, b.cfg.maxRequests, do)

	if err := t.proc.resetPeak(); err != nil {
		return measurement{}, err
	}
	before, err := t.proc.sample()
	if err != nil {
		return measurement{}, err
	}
	upBefore, err := b.upstream.proc.sample()
	if err != nil {
		return measurement{}, err
	}
	closed := runClosed(ctx, conc, b.cfg.duration, b.cfg.maxRequests, do)
	after, err := t.proc.sample()
	if err != nil {
		return measurement{}, err
	}
	upAfter, err := b.upstream.proc.sample()
	if err != nil {
		return measurement{}, err
	}
	if ctx.Err() != nil {
		return measurement{}, ctx.Err()
	}
	if closed.OK == 0 {
		return measurement{}, fmt.Errorf("round %d: no request succeeded (errors %v)", round, closed.Errors)
	}
	cpu := after.CPU - before.CPU
	m := measurement{Round: round, Target: t.name}
	m.Closed = closedFigures{
		Concurrency:         conc,
		Seconds:             closed.Elapsed.Seconds(),
		Requests:            closed.Sent,
		OK:                  closed.OK,
		Throughput:          closed.Throughput(),
		CPUSeconds:          cpu.Seconds(),
		CPUPerRequestUS:     perRequestUS(cpu, closed.OK),
		UserCPUPerRequestUS: perRequestUS(after.User-before.User, closed.OK),
		IOCallsPerRequest:   float64(after.IOCalls-before.IOCalls) / float64(closed.OK),
		UpstreamCPUPerReqUS: perRequestUS(upAfter.CPU-upBefore.CPU, closed.OK),
		PeakRSSMB:           mb(after.HWM),
		Latency:             closed.Latency.Summary(),
		Errors:              closed.Errors,
		ErrorSamples:        closed.Samples,
	}
	before, err = t.proc.sample()
	if err != nil {
		return measurement{}, err
	}
	open := runOpen(ctx, rate, b.cfg.openDuration, b.cfg.maxRequests, b.cfg.maxInFlight, do)
	after, err = t.proc.sample()
	if err != nil {
		return measurement{}, err
	}
	m.Open = openFigures{
		Rate:            rate,
		Sent:            open.Sent,
		OK:              open.OK,
		Latency:         open.Latency.Summary(),
		TTFB:            open.TTFB.Summary(),
		LagP99MS:        ms(open.Lag.Quantile(0.99)),
		CPUPerRequestUS: perRequestUS(after.CPU-before.CPU, open.OK),
		Errors:          open.Errors,
		ErrorSamples:    open.Samples,
	}
	return m, nil
}

// measureSlices measures the proxy's and sluice's CPU per request in short
// closed loops that alternate between them (the order reversed every other
// slice), so that both see the same states of the machine: its speed
// changes for tens of seconds at a time, longer than a round's distance
// between the proxy's loop and sluice's. Each target's slices are pooled
// into rep.Slices.
func (b *bench) measureSlices(ctx context.Context, sc httpScenario, targets []target, conc int, rep *scenarioReport) error {
	var pair []target
	for _, name := range []string{"proxy", "sluice"} {
		for _, t := range targets {
			if _, failed := rep.Failed[t.name]; t.name == name && !failed {
				pair = append(pair, t)
			}
		}
	}
	if len(pair) != 2 {
		return nil
	}
	pooled, err := b.alternateSlices(ctx, sc, pair, conc)
	if err != nil {
		return err
	}
	rep.Slices = map[string]*cpuSlices{}
	for k, t := range pair {
		rep.Slices[t.name] = &pooled[k]
	}
	return nil
}

// alternateSlices runs b.cfg.cpuSlices short closed loops of sc on each
// target in turn, the order rotating every slice, and pools each target's
// CPU per request: a change of the machine's speed, which lasts tens of
// seconds, hits every target alike. The targets may share a process (two
// keys of one sluice): their slices never overlap.
func (b *bench) alternateSlices(ctx context.Context, sc httpScenario, targets []target, conc int) ([]cpuSlices, error) {
	do := make([]call, len(targets))
	pooled := make([]cpuSlices, len(targets))
	cpu := make([]time.Duration, len(targets))
	for k, t := range targets {
		do[k] = httpCall(b.client, sc.spec(t))
		runClosed(ctx, conc, b.cfg.warmup/4, b.cfg.maxRequests, do[k])
	}
	for i := 0; i < b.cfg.cpuSlices && ctx.Err() == nil; i++ {
		for j := range targets {
			k := (i + j) % len(targets)
			before, err := targets[k].proc.sample()
			if err != nil {
				return nil, err
			}
			res := runClosed(ctx, conc, b.cfg.cpuSlice, b.cfg.maxRequests, do[k])
			after, err := targets[k].proc.sample()
			if err != nil {
				return nil, err
			}
			pooled[k].Slices++
			pooled[k].OK += res.OK
			cpu[k] += after.CPU - before.CPU
		}
	}
	for k, t := range targets {
		p := &pooled[k]
		p.CPUSeconds, p.CPUPerRequestUS = cpu[k].Seconds(), perRequestUS(cpu[k], p.OK)
		b.logf("  %-18s CPU slices %-7s %d × %s: %.1f µs CPU/req over %d requests", sc.name, t.name, p.Slices, b.cfg.cpuSlice, p.CPUPerRequestUS, p.OK)
	}
	return pooled, nil
}

func perRequestUS(cpu time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(cpu) / float64(time.Microsecond) / float64(n)
}

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func sumErrors(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// exclude records why a target takes no part in a scenario.
func (r *scenarioReport) exclude(name string, err error) {
	if se := (*skipError)(nil); errors.As(err, &se) {
		r.Skipped[name] = se.reason
		return
	}
	r.Failed[name] = err.Error()
}

// targetNames lists the targets that have measurements, in run order.
func (r *scenarioReport) targetNames() []string {
	var names []string
	for _, m := range r.Measurements {
		if !slices.Contains(names, m.Target) {
			names = append(names, m.Target)
		}
	}
	return names
}
