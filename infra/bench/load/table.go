package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the whole run, as printed and as written with -json.
type report struct {
	Started        time.Time         `json:"started"`
	ElapsedSeconds float64           `json:"elapsed_seconds"`
	Machine        machine           `json:"machine"`
	Settings       map[string]string `json:"settings"`
	Sluice         string            `json:"sluice"`
	Scenarios      []*scenarioReport `json:"scenarios"`
	Lambda         *lambdaReport     `json:"lambda,omitempty"`
	Checks         []check           `json:"checks"`
}

// printer is implemented by the Extra of scenarios with their own figures.
type printer interface{ print(w io.Writer) }

func writeJSON(path string, r *report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// printReport writes the human-readable report.
func printReport(w io.Writer, r *report) {
	m := r.Machine
	fmt.Fprintf(w, "\nsluice benchmark — %s\n", r.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "machine: %d CPUs (%s), %s, Linux %s, %s\n", m.CPUs, m.CPUModel, m.Memory, m.Kernel, m.GoVersion)
	fmt.Fprintf(w, "sluice: %s\n", r.Sluice)
	for _, s := range r.Scenarios {
		printScenario(w, s)
	}
	if r.Lambda != nil {
		r.Lambda.print(w)
	}
	printChecks(w, r.Checks)
	fmt.Fprintf(w, "\ntotal time %.0f s\n", r.ElapsedSeconds)
}

func printScenario(w io.Writer, s *scenarioReport) {
	fmt.Fprintf(w, "\n== %s — %s\n", s.Name, s.About)
	if s.Settings != "" {
		fmt.Fprintf(w, "   %s; medians over rounds\n", s.Settings)
	}
	if len(s.Summary) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "target\tsat req/s\tCPU µs/req\tuser µs/req\tI/O calls/req\tCPU µs/req @rate\tupstream µs/req\tpeak RSS MB\tp50 ms\tp90 ms\tp99 ms\tmax ms\t+p50 ms\t+p99 ms\t"
		if s.Stream {
			head += "TTFB p50\tTTFB p99\t+TTFB p50\t"
		}
		fmt.Fprintln(tw, head+"errors\t")
		for _, name := range s.targetNames() {
			t := s.Summary[name]
			row := fmt.Sprintf("%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t",
				name, t.Throughput, t.CPUPerRequestUS, t.UserCPUUS, t.IOCalls, t.OpenCPUUS, t.UpstreamCPUUS, t.PeakRSSMB, t.P50, t.P90, t.P99, t.Max,
				added(name, t.AddedP50), added(name, t.AddedP99))
			if s.Stream {
				row += fmt.Sprintf("%.3f\t%.3f\t%s\t", t.TTFBP50, t.TTFBP99, added(name, t.AddedTTFBP50))
			}
			fmt.Fprintf(tw, "%s%d\t\n", row, t.Errors)
		}
		tw.Flush()
		fmt.Fprintln(w, "   (CPU, user and I/O calls are the process under test's in the closed loop — the upstream itself for direct; @rate is its CPU per request in the open loop; latency columns are the open loop's)")
		retried, noisy := 0, 0
		for _, m := range s.Measurements {
			retried += m.Retries
			if m.Noisy {
				noisy++
			}
		}
		if retried > 0 {
			fmt.Fprintf(w, "   %d measurements repeated because the machine stalled the load generator; %d of %d kept still noisy\n", retried, noisy, len(s.Measurements))
		}
	}
	for _, name := range sortedKeys(s.Skipped) {
		fmt.Fprintf(w, "   %s: skipped — %s\n", name, s.Skipped[name])
	}
	for _, name := range sortedKeys(s.Failed) {
		fmt.Fprintf(w, "   %s: ERROR — %s\n", name, s.Failed[name])
	}
	if p, ok := s.Extra.(printer); ok {
		p.print(w)
	}
	for _, name := range sortedKeys(s.Profiles) {
		fmt.Fprintf(w, "   CPU profile of %s: go tool pprof -top %s\n", name, s.Profiles[name])
	}
	for _, name := range sortedKeys(s.ProfileErrors) {
		fmt.Fprintf(w, "   CPU profile of %s: not taken — %s\n", name, s.ProfileErrors[name])
	}
	if len(s.Comparisons) > 0 {
		parts := make([]string, 0, len(s.Comparisons))
		for _, c := range s.Comparisons {
			parts = append(parts, strings.ReplaceAll(c.Metric, "_", " ")+" "+describe(c))
		}
		fmt.Fprintf(w, "   sluice vs bare proxy: %s\n", strings.Join(parts, "; "))
	}
}

func added(name string, v float64) string {
	if name == "direct" {
		return "—"
	}
	return fmt.Sprintf("%+.3f", v)
}

func printChecks(w io.Writer, checks []check) {
	fmt.Fprintf(w, "\n== targets from the issues\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tcheck\tstatus\tdetail")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Scenario, c.Name, strings.ToUpper(c.Status), c.Detail)
	}
	tw.Flush()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
