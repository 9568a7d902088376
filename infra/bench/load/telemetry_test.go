package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// refsFor builds cachegrind totals for a sub-benchmark whose set-up costs
// setup instructions and each call perCall, at both iteration counts.
func refsFor(setup, perCall int64) [][2]int64 {
	return [][2]int64{{setup + perCall*instrItersLow, setup + perCall*instrItersHigh}}
}

// scenarioWithOverhead is a relay scenario whose client and upstream cost
// 150,000 instructions a call and sluice 200,000 with metrics off, metrics
// adding onPercent; its CPU slices say cpuRatio.
func scenarioWithOverhead(t *testing.T, onPercent, cpuRatio float64) telemetryScenario {
	t.Helper()
	const direct, sluice = 150_000, 200_000
	refs := map[string][][2]int64{
		"direct": refsFor(40_000_000, direct),
		"off":    refsFor(90_000_000, direct+sluice),
		"on":     refsFor(91_000_000, direct+sluice+int64(sluice*onPercent/100)),
	}
	in, err := newInstrFigures(refs, instrItersLow, instrItersHigh)
	if err != nil {
		t.Fatal(err)
	}
	return telemetryScenario{Name: "embeddings", OffUS: 100, MetricsUS: 100 * cpuRatio, MetricsRatio: cpuRatio,
		Instructions: in, Slices: map[string]*cpuSlices{"off": {Slices: 12}}}
}

func TestTelemetryCheckDecidesByInstructions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		onPercent float64 // what metrics add to sluice's own instructions
		cpuRatio  float64 // what the CPU slices happened to say
		want      string
	}{
		{"5 % fails though the slices say 0.98×", 5, 0.98, statusFail},
		{"2.5 % fails", 2.5, 1.00, statusFail},
		{"2 % passes", 2, 1.00, statusPass},
		{"0.5 % passes though the slices say 1.07×", 0.5, 1.07, statusPass},
		{"nothing passes", 0, 1.00, statusPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := telemetryCheck("telemetry", "embeddings: metrics", scenarioWithOverhead(t, tc.onPercent, tc.cpuRatio))
			if c.Status != tc.want {
				t.Errorf("status %s, want %s (%s)", c.Status, tc.want, c.Detail)
			}
			if !strings.Contains(c.Detail, "by instructions") || !strings.Contains(c.Detail, "cachegrind") {
				t.Errorf("detail does not name the method: %s", c.Detail)
			}
		})
	}
}

func TestTelemetryCheckWithoutInstructionsIsAnError(t *testing.T) {
	s := scenarioWithOverhead(t, 0, 1.00)
	s.Instructions, s.InstructionsError = nil, "valgrind not installed"
	c := telemetryCheck("telemetry", "embeddings: metrics", s)
	if c.Status != statusError || !strings.Contains(c.Detail, "valgrind not installed") {
		t.Errorf("got %s %q, want an error naming why", c.Status, c.Detail)
	}
}

func TestInstrFiguresCancelTheSetUp(t *testing.T) {
	refs := map[string][][2]int64{
		"direct": refsFor(1_000_000, 100_000),
		"off":    refsFor(7_000_000, 300_000),
		"on":     refsFor(9_000_000, 304_000),
	}
	f, err := newInstrFigures(refs, instrItersLow, instrItersHigh)
	if err != nil {
		t.Fatal(err)
	}
	if f.SluiceOff != 200_000 || f.SluiceOn != 204_000 || f.Ratio != 1.02 {
		t.Errorf("sluice off %.0f, on %.0f, ratio %.4f; want 200000, 204000, 1.02", f.SluiceOff, f.SluiceOn, f.Ratio)
	}
}

func TestInstrFiguresRefuseNonsense(t *testing.T) {
	for name, refs := range map[string]map[string][][2]int64{
		"an arm missing":      {"direct": refsFor(0, 1), "off": refsFor(0, 2)},
		"not increasing":      {"direct": {{5, 5}}, "off": refsFor(0, 2), "on": refsFor(0, 2)},
		"sluice costs naught": {"direct": refsFor(0, 2), "off": refsFor(0, 2), "on": refsFor(0, 3)},
	} {
		if _, err := newInstrFigures(refs, instrItersLow, instrItersHigh); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestInstrFiguresKeepEachArmsLeast: the clock's work only adds, so a
// repeat stretched by another load on the machine does not count.
func TestInstrFiguresKeepEachArmsLeast(t *testing.T) {
	refs := map[string][][2]int64{
		"direct": append(refsFor(1_000_000, 100_000), refsFor(1_000_000, 100_000)...),
		"off":    append(refsFor(7_000_000, 300_000), refsFor(7_000_000, 300_000)...),
		"on":     append(refsFor(9_000_000, 315_000), refsFor(9_000_000, 301_000)...),
	}
	f, err := newInstrFigures(refs, instrItersLow, instrItersHigh)
	if err != nil {
		t.Fatal(err)
	}
	if f.Ratio != 1.005 {
		t.Errorf("ratio %.4f, want 1.005 (the second repeat's)", f.Ratio)
	}
	if diff := cmp.Diff([]float64{1.075, 1.005}, f.RepeatRatios, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("repeat ratios (-want +got):\n%s", diff)
	}
}

func TestParseIRefs(t *testing.T) {
	out := "goos: linux\nBenchmarkMetricsOverhead/embeddings/on \t 1000\t 5 ns/op\nPASS\n" +
		"==22469== \n==22469== I   refs:      506,849,131\n"
	n, err := parseIRefs(out)
	if err != nil || n != 506_849_131 {
		t.Errorf("got %d, %v; want 506849131", n, err)
	}
	if _, err := parseIRefs("FAIL\n"); err == nil {
		t.Error("no I refs line: no error")
	}
}
