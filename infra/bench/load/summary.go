package main

import (
	"fmt"
	"slices"
	"strings"
)

// Targets from the issues, as numbers.
const (
	latencyRatioPass = 1.3 // added p50/p99 vs the bare proxy's: pass at or under
	latencyRatioWarn = 1.5 // ... tolerated (warn) up to
	latencySlackMS   = 0.2 // ... or pass when within this many ms of it
	ttfbSlackMS      = 0.5 // streaming TTFB added: at most the bare proxy's + this
)

// Check statuses.
const (
	statusPass    = "pass"
	statusWarn    = "warn"
	statusFail    = "fail"
	statusSkipped = "skipped"
	statusError   = "error"
	// statusInfo is a figure the issues ask to report, with no target.
	statusInfo = "info"
	// statusNoisy replaces a latency FAIL or WARN when the machine stalled
	// the load generator during the measurements it rests on.
	statusNoisy = "noisy"
)

// scenarioReport is everything one scenario produced.
type scenarioReport struct {
	Name         string                    `json:"name"`
	About        string                    `json:"about"`
	Settings     string                    `json:"settings,omitempty"`
	Stream       bool                      `json:"stream,omitempty"`
	Skipped      map[string]string         `json:"skipped,omitempty"`
	Failed       map[string]string         `json:"failed,omitempty"`
	Measurements []measurement             `json:"measurements,omitempty"`
	Summary      map[string]*targetSummary `json:"summary,omitempty"`
	Comparisons  []comparison              `json:"comparisons,omitempty"`
	// PairedCPURatio is the median of the rounds' own sluice/proxy CPU
	// ratios: the two are measured back to back in a round, so a change in
	// the machine's speed between rounds moves both sides of a round's
	// ratio alike. Reported beside the ratio of the medians, which the
	// check uses.
	PairedCPURatio float64 `json:"paired_cpu_ratio,omitempty"`
	// Slices are the proxy's and sluice's CPU in closed-loop slices that
	// alternate between them (-cpu-slices): when measured, their pooled
	// ratio decides the CPU check, the figures above being reported beside.
	Slices map[string]*cpuSlices `json:"cpu_slices,omitempty"`
	Extra  any                   `json:"extra,omitempty"`
	// Profiles are CPU profiles by target (-profile), taken in a closed
	// loop of their own after the rounds.
	Profiles      map[string]string `json:"profiles,omitempty"`
	ProfileErrors map[string]string `json:"profile_errors,omitempty"`
	Checks        []check           `json:"checks,omitempty"`

	cpuLimit      float64
	reportOnly    bool
	closedLatency bool    // latency from the closed loop (its fixed concurrency)
	ttfbSlack     float64 // streaming TTFB target: the proxy's + this (ms)
	// events is the provider events of one streamed answer, when the
	// report gives the CPU per event.
	events int
}

func newScenarioReport(name, about string) *scenarioReport {
	return &scenarioReport{Name: name, About: about, Skipped: map[string]string{}, Failed: map[string]string{}, ttfbSlack: ttfbSlackMS}
}

// latency is the latency a measurement's checks rest on: the open loop's,
// or the closed loop's for a scenario that checks it.
func (r *scenarioReport) latency(m measurement) LatencySummary {
	if r.closedLatency {
		return m.Closed.Latency
	}
	return m.Open.Latency
}

// targetSummary holds a target's medians over rounds. Added figures are
// medians of the per-round difference to direct in the same round.
type targetSummary struct {
	Rounds          int     `json:"rounds"`
	Throughput      float64 `json:"throughput_rps"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
	UserCPUUS       float64 `json:"user_cpu_per_request_us"`
	OpenCPUUS       float64 `json:"open_cpu_per_request_us"`
	IOCalls         float64 `json:"io_calls_per_request"`
	UpstreamCPUUS   float64 `json:"upstream_cpu_per_request_us"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	P50             float64 `json:"p50_ms"`
	P90             float64 `json:"p90_ms"`
	P99             float64 `json:"p99_ms"`
	Max             float64 `json:"max_ms"`
	TTFBP50         float64 `json:"ttfb_p50_ms"`
	TTFBP99         float64 `json:"ttfb_p99_ms"`
	AddedP50        float64 `json:"added_p50_ms"`
	AddedP99        float64 `json:"added_p99_ms"`
	AddedTTFBP50    float64 `json:"added_ttfb_p50_ms"`
	Errors          int64   `json:"errors"`
}

// comparison is sluice against the bare proxy on one figure.
type comparison struct {
	Metric string   `json:"metric"`
	Unit   string   `json:"unit"`
	Sluice float64  `json:"sluice"`
	Proxy  float64  `json:"proxy"`
	Ratio  *float64 `json:"ratio"` // nil when the proxy's figure is not positive
	Diff   float64  `json:"diff"`
}

// check is one target from the issues and how this run did against it.
type check struct {
	Scenario string `json:"scenario"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
}

// median of xs (the mean of the middle two for an even count); 0 if empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio returns a/b, or nil when b is not positive or a is negative (an
// added latency below zero is noise, and so is a ratio of it).
func ratio(a, b float64) *float64 {
	if b <= 0 || a < 0 {
		return nil
	}
	r := a / b
	return &r
}

func newComparison(metric, unit string, sluice, proxy float64) comparison {
	return comparison{Metric: metric, Unit: unit, Sluice: sluice, Proxy: proxy, Ratio: ratio(sluice, proxy), Diff: sluice - proxy}
}

// cpuSlices pools one target's CPU slices.
type cpuSlices struct {
	Slices          int     `json:"slices"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	OK              int64   `json:"ok"`
	CPUPerRequestUS float64 `json:"cpu_per_request_us"`
}

// summarize computes the medians, the sluice-vs-proxy comparisons and the
// checks of an HTTP scenario from its measurements.
func (r *scenarioReport) summarize() {
	r.Summary = map[string]*targetSummary{}
	direct := map[int]measurement{}
	for _, m := range r.Measurements {
		if m.Target == "direct" {
			direct[m.Round] = m
		}
	}
	for _, name := range r.targetNames() {
		var thr, cpu, user, openCPU, io, up, rss, p50, p90, p99, mx, t50, t99, a50, a99, at50 []float64
		s := &targetSummary{}
		for _, m := range r.Measurements {
			if m.Target != name {
				continue
			}
			s.Rounds++
			thr = append(thr, m.Closed.Throughput)
			cpu = append(cpu, m.Closed.CPUPerRequestUS)
			user = append(user, m.Closed.UserCPUPerRequestUS)
			openCPU = append(openCPU, m.Open.CPUPerRequestUS)
			io = append(io, m.Closed.IOCallsPerRequest)
			up = append(up, m.Closed.UpstreamCPUPerReqUS)
			rss = append(rss, m.Closed.PeakRSSMB)
			lat := r.latency(m)
			p50 = append(p50, lat.P50)
			p90 = append(p90, lat.P90)
			p99 = append(p99, lat.P99)
			mx = append(mx, lat.Max)
			t50 = append(t50, m.Open.TTFB.P50)
			t99 = append(t99, m.Open.TTFB.P99)
			s.Errors += sumErrors(m.Closed.Errors) + sumErrors(m.Open.Errors)
			if d, ok := direct[m.Round]; ok {
				a50 = append(a50, lat.P50-r.latency(d).P50)
				a99 = append(a99, lat.P99-r.latency(d).P99)
				at50 = append(at50, m.Open.TTFB.P50-d.Open.TTFB.P50)
			}
		}
		s.Throughput, s.CPUPerRequestUS, s.UpstreamCPUUS, s.PeakRSSMB = median(thr), median(cpu), median(up), median(rss)
		s.UserCPUUS, s.OpenCPUUS, s.IOCalls = median(user), median(openCPU), median(io)
		s.P50, s.P90, s.P99, s.Max = median(p50), median(p90), median(p99), median(mx)
		s.TTFBP50, s.TTFBP99 = median(t50), median(t99)
		s.AddedP50, s.AddedP99, s.AddedTTFBP50 = median(a50), median(a99), median(at50)
		r.Summary[name] = s
	}
	r.compare()
}

// compare fills Comparisons and Checks: sluice against the bare proxy.
func (r *scenarioReport) compare() {
	sl, px := r.Summary["sluice"], r.Summary["proxy"]
	var names []string
	switch {
	case r.reportOnly:
	case r.Stream:
		names = append(names, fmt.Sprintf("added TTFB p50 ≤ bare proxy's + %.1f ms", r.ttfbSlack))
	default:
		names = append(names,
			fmt.Sprintf("added p50 ≤ %.1f–%.1f× bare proxy's (or within %.1f ms)", latencyRatioPass, latencyRatioWarn, latencySlackMS),
			fmt.Sprintf("added p99 ≤ %.1f–%.1f× bare proxy's (or within %.1f ms)", latencyRatioPass, latencyRatioWarn, latencySlackMS))
	}
	if r.cpuLimit > 0 {
		names = append(names, fmt.Sprintf("CPU/request ≤ %.1f× bare proxy's at saturation", r.cpuLimit))
	}
	if sl == nil || px == nil {
		status, why := statusSkipped, "sluice not measured"
		if reason, ok := r.Skipped["sluice"]; ok {
			why = "sluice: " + reason
		}
		if reason, ok := r.Failed["sluice"]; ok {
			status, why = statusError, "sluice: "+reason
		}
		if reason, ok := r.Failed["proxy"]; ok {
			status, why = statusError, "bare proxy: "+reason
		}
		for _, n := range names {
			r.Checks = append(r.Checks, check{Scenario: r.Name, Name: n, Status: status, Detail: why})
		}
		return
	}
	noisy := 0
	for _, m := range r.Measurements {
		if m.Noisy {
			noisy++
		}
	}
	// latencyCheck builds a latency check, downgrading a FAIL or WARN to
	// NOISY when it rests on measurements taken while the machine stalled.
	latencyCheck := func(name, status string, c comparison) check {
		detail := describe(c)
		if noisy > 0 && (status == statusFail || status == statusWarn) {
			detail = fmt.Sprintf("%s would be %s, but %d of %d measurements were taken while the machine stalled the load generator; rerun",
				detail, strings.ToUpper(status), noisy, len(r.Measurements))
			status = statusNoisy
		}
		return check{Scenario: r.Name, Name: name, Status: status, Detail: detail}
	}
	cpu := newComparison("cpu_per_request", "µs", sl.CPUPerRequestUS, px.CPUPerRequestUS)
	r.Comparisons = append(r.Comparisons, cpu, newComparison("cpu_per_request_at_fixed_rate", "µs", sl.OpenCPUUS, px.OpenCPUUS))
	i := 0
	if r.Stream {
		c := newComparison("added_ttfb_p50", "ms", sl.AddedTTFBP50, px.AddedTTFBP50)
		r.Comparisons = append(r.Comparisons, c, newComparison("added_p50", "ms", sl.AddedP50, px.AddedP50))
		if !r.reportOnly {
			r.Checks = append(r.Checks, latencyCheck(names[0], ttfbStatus(c.Sluice, c.Proxy, r.ttfbSlack), c))
			i = 1
		}
	} else {
		for j, c := range []comparison{
			newComparison("added_p50", "ms", sl.AddedP50, px.AddedP50),
			newComparison("added_p99", "ms", sl.AddedP99, px.AddedP99),
		} {
			r.Comparisons = append(r.Comparisons, c)
			if !r.reportOnly {
				r.Checks = append(r.Checks, latencyCheck(names[j], latencyStatus(c.Sluice, c.Proxy), c))
				i = j + 1
			}
		}
	}
	if r.events > 0 {
		ev := newComparison("cpu_per_event", "µs", sl.CPUPerRequestUS/float64(r.events), px.CPUPerRequestUS/float64(r.events))
		r.Comparisons = append(r.Comparisons, ev)
		r.Checks = append(r.Checks, check{Scenario: r.Name, Name: fmt.Sprintf("CPU per provider event (reported; %d events a stream)", r.events),
			Status: statusInfo, Detail: describe(ev)})
	}
	r.PairedCPURatio = r.pairedCPURatio()
	if r.cpuLimit > 0 {
		decide, detail := cpu, describe(cpu)
		if ss, ps := r.Slices["sluice"], r.Slices["proxy"]; ss != nil && ps != nil && ss.OK > 0 && ps.OK > 0 {
			sliced := newComparison("cpu_per_request_sliced", "µs", ss.CPUPerRequestUS, ps.CPUPerRequestUS)
			r.Comparisons = append(r.Comparisons, sliced)
			decide = sliced
			detail = fmt.Sprintf("%s in %d alternating slices each; the rounds' medians: %s", describe(sliced), ss.Slices, describe(cpu))
		}
		st := statusFail
		if decide.Ratio != nil && *decide.Ratio <= r.cpuLimit {
			st = statusPass
		}
		if r.PairedCPURatio > 0 {
			detail += fmt.Sprintf("; the rounds' own ratios: median %.2f×", r.PairedCPURatio)
		}
		r.Checks = append(r.Checks, check{Scenario: r.Name, Name: names[i], Status: st, Detail: detail})
	}
}

// pairedCPURatio is the median of sluice's CPU per request over the
// proxy's, round by round; 0 without a round that measured both.
func (r *scenarioReport) pairedCPURatio() float64 {
	proxy := map[int]float64{}
	for _, m := range r.Measurements {
		if m.Target == "proxy" && m.Closed.CPUPerRequestUS > 0 {
			proxy[m.Round] = m.Closed.CPUPerRequestUS
		}
	}
	var ratios []float64
	for _, m := range r.Measurements {
		if p, ok := proxy[m.Round]; ok && m.Target == "sluice" {
			ratios = append(ratios, m.Closed.CPUPerRequestUS/p)
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	return median(ratios)
}

// latencyStatus judges sluice's added latency against the bare proxy's.
// An added latency below zero is noise (nothing can be faster than going
// direct), so both are taken as at least zero.
func latencyStatus(sluice, proxy float64) string {
	sluice, proxy = max(sluice, 0), max(proxy, 0)
	if sluice-proxy <= latencySlackMS {
		return statusPass
	}
	if proxy <= 0 {
		return statusFail
	}
	switch r := sluice / proxy; {
	case r <= latencyRatioPass:
		return statusPass
	case r <= latencyRatioWarn:
		return statusWarn
	}
	return statusFail
}

// ttfbStatus judges sluice's added time to first byte of a stream: at most
// the proxy's + slack ms.
func ttfbStatus(sluice, proxy, slack float64) string {
	sluice, proxy = max(sluice, 0), max(proxy, 0)
	if sluice <= proxy+slack {
		return statusPass
	}
	return statusFail
}

// describe renders "1.42× (+35.0 µs): sluice 120.0, proxy 85.0".
func describe(c comparison) string {
	r := "n/a"
	if c.Ratio != nil {
		r = fmt.Sprintf("%.2f×", *c.Ratio)
	}
	prec := 1
	if c.Unit == "ms" {
		prec = 3
	}
	return fmt.Sprintf("%s (%+.*f %s): sluice %.*f, proxy %.*f", r, prec, c.Diff, c.Unit, prec, c.Sluice, prec, c.Proxy)
}
