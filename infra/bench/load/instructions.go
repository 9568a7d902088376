package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The metrics check decides by instructions retired, not CPU time: two
// sluice processes differ by ±7 % in CPU per request from their own layout
// and placement alone (three strict runs: 0.975–1.104×), more than the 2 %
// the check must decide. pkg/gateway's BenchmarkMetricsOverhead serves the
// same calls from a metrics-off and a metrics-on sluice in one process,
// counted by cachegrind with the scheduler made repeatable (one P, no async
// preemption, no GC). Two iteration counts, differenced, cancel the set-up
// (which varies by millions of instructions between runs). What remains is
// work driven by the clock (the runtime's sysmon, tickers), in proportion
// to a run's wall time, which another load on the machine stretches: it
// only ever adds, so each arm is counted instrRepeats times and its least
// figure a call is kept.
const (
	instrItersLow  = 500
	instrItersHigh = 8000
	instrRepeats   = 2
	instrBenchmark = "BenchmarkMetricsOverhead"
)

// instrArms are BenchmarkMetricsOverhead's sub-benchmarks under each relay
// scenario: direct (client and upstream alone), metrics off, metrics on.
var instrArms = []string{"direct", "off", "on"}

// instrEnv makes a Go program's instruction count repeatable: one P, no
// asynchronous preemption (callgrind and cachegrind need it too), no GC.
var instrEnv = []string{"GODEBUG=asyncpreemptoff=1", "GOGC=off", "GOMAXPROCS=1"}

// instrFigures are one relay scenario's instruction counts.
type instrFigures struct {
	Method string `json:"method"`
	// Refs are cachegrind's "I refs" by arm, one pair (the low then the
	// high count) per repeat.
	Refs map[string][][2]int64 `json:"i_refs"`
	// Per request, client and upstream included (in one process): each
	// arm's least over the repeats.
	DirectPerReq float64 `json:"direct_per_request"`
	OffPerReq    float64 `json:"off_per_request"`
	OnPerReq     float64 `json:"on_per_request"`
	// Sluice's own: the arm minus direct.
	SluiceOff float64 `json:"sluice_off_per_request"`
	SluiceOn  float64 `json:"sluice_on_per_request"`
	Ratio     float64 `json:"ratio"`
	// RepeatRatios are each repeat's own ratio, the spread of the method.
	RepeatRatios []float64 `json:"repeat_ratios"`
}

// newInstrFigures derives the per-request figures from the raw counts.
func newInstrFigures(refs map[string][][2]int64, low, high int) (*instrFigures, error) {
	f := &instrFigures{Refs: refs}
	perCall := func(arm string) ([]float64, error) {
		rs := refs[arm]
		if len(rs) == 0 {
			return nil, fmt.Errorf("no count for %s", arm)
		}
		out := make([]float64, len(rs))
		for i, r := range rs {
			if r[1] <= r[0] {
				return nil, fmt.Errorf("%s: %d instructions at %d calls, %d at %d: not increasing", arm, r[0], low, r[1], high)
			}
			out[i] = float64(r[1]-r[0]) / float64(high-low)
		}
		return out, nil
	}
	per := map[string][]float64{}
	for _, arm := range instrArms {
		xs, err := perCall(arm)
		if err != nil {
			return nil, err
		}
		per[arm] = xs
	}
	f.Method = fmt.Sprintf("cachegrind instructions of %s at %d and %d calls, differenced, least of %d", instrBenchmark, low, high, len(refs["off"]))
	f.DirectPerReq, f.OffPerReq, f.OnPerReq = slices.Min(per["direct"]), slices.Min(per["off"]), slices.Min(per["on"])
	f.SluiceOff, f.SluiceOn = f.OffPerReq-f.DirectPerReq, f.OnPerReq-f.DirectPerReq
	if f.SluiceOff <= 0 {
		return nil, fmt.Errorf("sluice's own instructions per call not positive (off %.0f, direct %.0f)", f.OffPerReq, f.DirectPerReq)
	}
	f.Ratio = f.SluiceOn / f.SluiceOff
	for i := range min(len(per["direct"]), len(per["off"]), len(per["on"])) {
		if own := per["off"][i] - per["direct"][i]; own > 0 {
			f.RepeatRatios = append(f.RepeatRatios, (per["on"][i]-per["direct"][i])/own)
		}
	}
	return f, nil
}

var irefsLine = regexp.MustCompile(`I\s+refs:\s+([0-9,]+)`)

// parseIRefs reads cachegrind's total instruction count from its output.
func parseIRefs(out string) (int64, error) {
	m := irefsLine.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no \"I refs\" line in cachegrind's output: %s", firstLines(out, 5))
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse I refs %q: %w", m[1], err)
	}
	return n, nil
}

// instrCounter runs BenchmarkMetricsOverhead under cachegrind.
type instrCounter struct {
	valgrind string // the valgrind binary
	testBin  string // pkg/gateway's test binary
}

// newInstrCounter finds valgrind and builds pkg/gateway's test binary into
// binDir; an error says why instructions cannot be counted.
func newInstrCounter(ctx context.Context, root, binDir string) (*instrCounter, error) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		return nil, errors.New("valgrind not installed (make bench installs it with apt-get)")
	}
	bin, err := filepath.Abs(filepath.Join(binDir, "gateway.test"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./pkg/gateway")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build pkg/gateway's test binary: %w: %s", err, firstLines(string(out), 5))
	}
	return &instrCounter{valgrind: vg, testBin: bin}, nil
}

// count returns the instructions of one run of sub-benchmark scenario/arm
// at n calls.
func (c *instrCounter) count(ctx context.Context, scenario, arm string, n int) (int64, error) {
	cmd := exec.CommandContext(ctx, c.valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
		c.testBin, "-test.run", "^$", "-test.bench", fmt.Sprintf("^%s/%s/%s$", instrBenchmark, scenario, arm),
		"-test.benchtime", fmt.Sprintf("%dx", n))
	cmd.Dir = filepath.Dir(c.testBin)
	cmd.Env = append(os.Environ(), instrEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s/%s at %d calls: %w: %s", scenario, arm, n, err, firstLines(string(out), 8))
	}
	return parseIRefs(string(out))
}

// measure counts every arm of scenario at both iteration counts, repeats
// times, the arms interleaved.
func (c *instrCounter) measure(ctx context.Context, scenario string, repeats int, logf func(string, ...any)) (*instrFigures, error) {
	refs := map[string][][2]int64{}
	for rep := 0; rep < repeats; rep++ {
		for _, arm := range instrArms {
			var r [2]int64
			for i, n := range []int{instrItersLow, instrItersHigh} {
				got, err := c.count(ctx, scenario, arm, n)
				if err != nil {
					return nil, err
				}
				r[i] = got
			}
			refs[arm] = append(refs[arm], r)
			logf("  %-18s instructions %s/%s: %d at %d calls, %d at %d", "telemetry", scenario, arm, r[0], instrItersLow, r[1], instrItersHigh)
		}
	}
	return newInstrFigures(refs, instrItersLow, instrItersHigh)
}
