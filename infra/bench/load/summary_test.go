package main

import (
	"flag"
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, -1, 7, 7, 100}, 7},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("median reordered its input")
			}
		}
	}
}

func TestLatencyStatus(t *testing.T) {
	for _, tc := range []struct {
		sluice, proxy float64
		want          string
	}{
		{0.30, 0.25, statusPass}, // within 0.2 ms
		{1.20, 1.00, statusPass}, // 1.2×
		{1.45, 1.00, statusWarn}, // 1.45×
		{2.00, 1.00, statusFail}, // 2×, 1 ms more
		{0.50, -0.1, statusFail}, // proxy added nothing measurable (noise, taken as 0); 0.5 ms more
		{0.15, -2.2, statusPass}, // within 0.2 ms of zero
		{-0.1, -2.2, statusPass}, // both noise
	} {
		if got := latencyStatus(tc.sluice, tc.proxy); got != tc.want {
			t.Errorf("latencyStatus(%v, %v) = %s, want %s", tc.sluice, tc.proxy, got, tc.want)
		}
	}
	if ttfbStatus(1.4, 1.0, 0.5) != statusPass || ttfbStatus(1.6, 1.0, 0.5) != statusFail || ttfbStatus(0.4, -3, 0.5) != statusPass {
		t.Error("ttfbStatus: 0.5 ms slack not applied")
	}
	if ttfbStatus(1.25, 1.0, 0.3) != statusPass || ttfbStatus(1.35, 1.0, 0.3) != statusFail {
		t.Error("ttfbStatus: a scenario's 0.3 ms slack not applied")
	}
}

// meas builds a measurement with the figures the summary reads.
func meas(round int, target string, cpu, p50, p99 float64) measurement {
	m := measurement{Round: round, Target: target}
	m.Closed.CPUPerRequestUS = cpu
	m.Closed.Throughput = 1000
	m.Open.Latency.P50, m.Open.Latency.P99 = p50, p99
	return m
}

func TestSummarizeMediansAndRatios(t *testing.T) {
	r := newScenarioReport("embeddings", "test")
	r.cpuLimit = 2
	// Three rounds; round 2 is noisy for everyone. Added latency is taken
	// per round against direct, then the median.
	for _, m := range []measurement{
		meas(1, "direct", 50, 1.0, 2.0), meas(1, "proxy", 100, 1.2, 2.5), meas(1, "sluice", 150, 1.4, 3.0),
		meas(2, "direct", 60, 3.0, 9.0), meas(2, "proxy", 130, 3.5, 10.0), meas(2, "sluice", 400, 4.5, 12.0),
		meas(3, "direct", 55, 1.1, 2.1), meas(3, "proxy", 110, 1.3, 2.6), meas(3, "sluice", 170, 1.6, 3.2),
	} {
		r.Measurements = append(r.Measurements, m)
	}
	r.summarize()

	px, sl := r.Summary["proxy"], r.Summary["sluice"]
	if px.Rounds != 3 || px.CPUPerRequestUS != 110 || sl.CPUPerRequestUS != 170 {
		t.Fatalf("cpu medians: proxy %+v sluice %+v", px, sl)
	}
	approx := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	approx("proxy added p50", px.AddedP50, 0.2)  // rounds: 0.2, 0.5, 0.2
	approx("sluice added p50", sl.AddedP50, 0.5) // rounds: 0.4, 1.5, 0.5
	approx("sluice added p99", sl.AddedP99, 1.1) // rounds: 1.0, 3.0, 1.1

	byMetric := map[string]comparison{}
	for _, c := range r.Comparisons {
		byMetric[c.Metric] = c
	}
	cpu := byMetric["cpu_per_request"]
	if cpu.Ratio == nil || math.Abs(*cpu.Ratio-170.0/110) > 1e-9 || cpu.Diff != 60 {
		t.Fatalf("cpu comparison %+v", cpu)
	}
	// The rounds' own ratios: 1.50, 3.08, 1.55 → 1.55.
	approx("paired CPU ratio", r.PairedCPURatio, 170.0/110)
	statuses := map[string]string{}
	for _, c := range r.Checks {
		statuses[strings.Fields(c.Name)[0]+" "+strings.Fields(c.Name)[1]] = c.Status
	}
	// p50: 0.5 vs 0.2 → 2.5×, 0.3 ms over → fail; CPU 1.55× ≤ 2× → pass.
	if statuses["added p50"] != statusFail || statuses["CPU/request ≤"] != statusPass {
		t.Fatalf("checks %+v", r.Checks)
	}
}

func TestSummarizeWithoutSluiceSkipsChecks(t *testing.T) {
	r := newScenarioReport("passthrough", "test")
	r.cpuLimit = 1.3
	r.Skipped["sluice"] = "functions/local does not exist yet"
	r.Measurements = []measurement{meas(1, "direct", 50, 1, 2), meas(1, "proxy", 90, 1.1, 2.2)}
	r.summarize()
	if len(r.Comparisons) != 0 || len(r.Checks) != 3 {
		t.Fatalf("comparisons %v checks %v", r.Comparisons, r.Checks)
	}
	for _, c := range r.Checks {
		if c.Status != statusSkipped || !strings.Contains(c.Detail, "does not exist yet") {
			t.Errorf("check %+v", c)
		}
	}
	if got := r.Summary["proxy"].AddedP50; math.Abs(got-0.1) > 1e-9 {
		t.Errorf("proxy added p50 %v", got)
	}
}

func TestRatioAndDescribe(t *testing.T) {
	if ratio(1, 0) != nil || ratio(1, -2) != nil || ratio(-1, 2) != nil {
		t.Error("ratio over a non-positive base, or of a negative figure, must be nil")
	}
	c := newComparison("cpu_per_request", "µs", 120, 80)
	if got := describe(c); got != "1.50× (+40.0 µs): sluice 120.0, proxy 80.0" {
		t.Errorf("describe = %q", got)
	}
	c = newComparison("added_p50", "ms", 0.05, -0.01)
	if got := describe(c); !strings.HasPrefix(got, "n/a (+0.060 ms)") {
		t.Errorf("describe = %q", got)
	}
}

func TestNoisyMeasurementsDowngradeLatencyFailures(t *testing.T) {
	r := newScenarioReport("embeddings", "test")
	r.cpuLimit = 2
	for _, m := range []measurement{
		meas(1, "direct", 50, 1.0, 2.0), meas(1, "proxy", 100, 1.2, 2.5), meas(1, "sluice", 300, 3.0, 9.0),
	} {
		r.Measurements = append(r.Measurements, m)
	}
	r.Measurements[2].Noisy = true
	r.summarize()
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "CPU") {
			// CPU per request is read per process: a stalled load
			// generator does not change it, so 3× stays a failure.
			if c.Status != statusFail {
				t.Errorf("CPU check %+v, want fail", c)
			}
			continue
		}
		if c.Status != statusNoisy || !strings.Contains(c.Detail, "would be FAIL") {
			t.Errorf("check %+v, want noisy", c)
		}
	}
}

// -quick shortens the points and rounds, but a flag given explicitly wins.
func TestQuickKeepsExplicitFlags(t *testing.T) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	rounds := fs.Int("rounds", 5, "")
	warmup := fs.Duration("warmup", 2*time.Second, "")
	duration := fs.Duration("duration", 10*time.Second, "")
	open := fs.Duration("open-duration", 10*time.Second, "")
	if err := fs.Parse([]string{"-duration", "5s"}); err != nil {
		t.Fatal(err)
	}
	if err := applyQuick(fs); err != nil {
		t.Fatal(err)
	}
	if *rounds != 2 || *warmup != 500*time.Millisecond || *duration != 5*time.Second || *open != 3*time.Second {
		t.Errorf("rounds %d, warmup %s, duration %s, open-duration %s; want 2, 500ms, 5s (given), 3s", *rounds, *warmup, *duration, *open)
	}
}

// TestClosedLatencyScenario: a scenario that checks the closed loop's
// latency (chat-c1, chat-c64) reads its figures from there, not the open
// loop's.
func TestClosedLatencyScenario(t *testing.T) {
	r := newScenarioReport("chat-c1", "")
	r.closedLatency = true
	for round := 1; round <= 3; round++ {
		for _, tc := range []struct {
			target   string
			p50, p99 float64
		}{{"direct", 1.0, 2.0}, {"proxy", 1.3, 2.6}, {"sluice", 1.35, 2.7}} {
			m := meas(round, tc.target, 100, 50, 90) // open-loop figures far off
			m.Closed.Latency.P50, m.Closed.Latency.P99 = tc.p50, tc.p99
			r.Measurements = append(r.Measurements, m)
		}
	}
	r.summarize()
	s := r.Summary["sluice"]
	if math.Abs(s.AddedP50-0.35) > 1e-9 || math.Abs(s.AddedP99-0.7) > 1e-9 || s.P50 != 1.35 {
		t.Errorf("summary %+v", s)
	}
	for _, c := range r.Checks {
		if c.Status != statusPass {
			t.Errorf("check %+v", c)
		}
	}
}

func TestSummarizeCPUPerEvent(t *testing.T) {
	r := newScenarioReport("chat-anthropic-stream", "test")
	r.Stream, r.events = true, 206
	for _, m := range []measurement{meas(1, "direct", 100, 200, 210), meas(1, "proxy", 412, 200.2, 210.2), meas(1, "sluice", 1030, 200.3, 210.4)} {
		r.Measurements = append(r.Measurements, m)
	}
	r.summarize()
	var got *comparison
	for i := range r.Comparisons {
		if r.Comparisons[i].Metric == "cpu_per_event" {
			got = &r.Comparisons[i]
		}
	}
	if got == nil || got.Sluice != 5 || got.Proxy != 2 || got.Ratio == nil || *got.Ratio != 2.5 {
		t.Fatalf("cpu_per_event %+v", got)
	}
	found := false
	for _, c := range r.Checks {
		found = found || (c.Status == statusInfo && strings.Contains(c.Name, "206 events") && strings.Contains(c.Detail, "sluice 5.0"))
	}
	if !found {
		t.Errorf("checks %+v", r.Checks)
	}
}

// cpuCheck returns the scenario's CPU check.
func cpuCheck(t *testing.T, r *scenarioReport) check {
	t.Helper()
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "CPU/request") {
			return c
		}
	}
	t.Fatalf("no CPU check in %+v", r.Checks)
	return check{}
}

// TestCPUSlicesDecideTheCheck: with slices measured, their pooled ratio
// decides, however the rounds' medians read (sluice caught in a slow state
// by every round here).
func TestCPUSlicesDecideTheCheck(t *testing.T) {
	r := newScenarioReport("embeddings", "test")
	r.cpuLimit = 1.2
	r.Measurements = []measurement{meas(1, "proxy", 70, 1, 2), meas(1, "sluice", 100, 1, 2), meas(2, "proxy", 72, 1, 2), meas(2, "sluice", 98, 1, 2)}
	r.Slices = map[string]*cpuSlices{
		"proxy":  {Slices: 12, CPUSeconds: 1.6, OK: 20000, CPUPerRequestUS: 80},
		"sluice": {Slices: 12, CPUSeconds: 1.58, OK: 18000, CPUPerRequestUS: 88},
	}
	r.summarize()
	c := cpuCheck(t, r)
	if c.Status != statusPass || !strings.Contains(c.Detail, "1.10×") || !strings.Contains(c.Detail, "in 12 alternating slices") {
		t.Fatalf("check %+v: want PASS on the slices' 1.10×", c)
	}
}

// TestCPUSlicesCanFail: slices over the limit fail the check even when the
// rounds' medians would pass.
func TestCPUSlicesCanFail(t *testing.T) {
	r := newScenarioReport("embeddings", "test")
	r.cpuLimit = 1.2
	r.Measurements = []measurement{meas(1, "proxy", 90, 1, 2), meas(1, "sluice", 95, 1, 2)}
	r.Slices = map[string]*cpuSlices{
		"proxy":  {Slices: 4, OK: 1000, CPUPerRequestUS: 70},
		"sluice": {Slices: 4, OK: 1000, CPUPerRequestUS: 91},
	}
	r.summarize()
	if c := cpuCheck(t, r); c.Status != statusFail {
		t.Fatalf("check %+v: want FAIL on the slices' 1.30×", c)
	}
}
