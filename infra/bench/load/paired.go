package main

import (
	"context"
	"fmt"
)

// pairedFigures are the figures of a scenario that measures one embeddings
// call made by two keys of the same sluice — without and with what the
// scenario prices (a team callback, a budget) — round by round, then in
// alternating CPU slices when the run takes them (WithoutUS, WithUS and
// Ratio are then the slices').
type pairedFigures struct {
	Rounds    []pairedRound `json:"rounds"`
	WithoutUS float64       `json:"cpu_per_request_without_us"`
	WithUS    float64       `json:"cpu_per_request_with_us"`
	Ratio     float64       `json:"ratio"`
	// PairedRatio is the median of the rounds' own ratios: each round
	// measures both keys back to back, so a change in the machine's
	// speed between rounds moves both sides of a round's ratio alike.
	PairedRatio  float64 `json:"paired_ratio"`
	WithoutP50MS float64 `json:"p50_without_ms"`
	WithP50MS    float64 `json:"p50_with_ms"`
	AddedP50MS   float64 `json:"added_p50_ms"`
	// Slices, when the run takes CPU slices, are the two keys' alternating
	// slices; their pooled ratio decides the check (Ratio), as the relay
	// scenarios' slices do: one closed round a side swung the ratio by
	// more than the code between two runs.
	Slices *pairedSlices `json:"cpu_slices,omitempty"`
}

type pairedSlices struct {
	Without cpuSlices `json:"without"`
	With    cpuSlices `json:"with"`
	// RoundsRatio is the rounds' medians' ratio, which Ratio was before.
	RoundsRatio float64 `json:"rounds_ratio"`
}

type pairedRound struct {
	WithoutUS     float64 `json:"cpu_per_request_without_us"`
	WithUS        float64 `json:"cpu_per_request_with_us"`
	WithoutUserUS float64 `json:"user_cpu_per_request_without_us"`
	WithUserUS    float64 `json:"user_cpu_per_request_with_us"`
	// The upstream's CPU per call: with a callback it is also the Langfuse
	// sink's, which shares the machine with sluice and the load.
	WithoutUpstreamUS float64 `json:"upstream_cpu_per_request_without_us"`
	WithUpstreamUS    float64 `json:"upstream_cpu_per_request_with_us"`
	WithoutRPS        float64 `json:"throughput_without_rps"`
	WithRPS           float64 `json:"throughput_with_rps"`
	WithoutP50        float64 `json:"p50_without_ms"`
	WithP50           float64 `json:"p50_with_ms"`
}

// measurePaired measures embeddings by plain then by with, b.cfg.rounds
// rounds, into fig; withMeasured sees each measurement of with (nil: none
// wanted).
func (b *bench) measurePaired(ctx context.Context, scenario string, embeddings httpScenario, plain, with target, fig *pairedFigures, withMeasured func(measurement)) error {
	var without, withUS, added, ratios, p50Without, p50With []float64
	for round := 1; round <= b.cfg.rounds && ctx.Err() == nil; round++ {
		var r pairedRound
		for _, t := range []target{plain, with} {
			m, err := b.measure(ctx, embeddings, t, round, embeddings.concurrency, embeddings.rate)
			if err != nil {
				return err
			}
			if t.key == with.key {
				r.WithUS, r.WithUserUS, r.WithRPS, r.WithP50 = m.Closed.CPUPerRequestUS, m.Closed.UserCPUPerRequestUS, m.Closed.Throughput, m.Open.Latency.P50
				r.WithUpstreamUS = m.Closed.UpstreamCPUPerReqUS
				if withMeasured != nil {
					withMeasured(m)
				}
			} else {
				r.WithoutUS, r.WithoutUserUS, r.WithoutRPS, r.WithoutP50 = m.Closed.CPUPerRequestUS, m.Closed.UserCPUPerRequestUS, m.Closed.Throughput, m.Open.Latency.P50
				r.WithoutUpstreamUS = m.Closed.UpstreamCPUPerReqUS
			}
		}
		fig.Rounds = append(fig.Rounds, r)
		without, withUS = append(without, r.WithoutUS), append(withUS, r.WithUS)
		if r.WithoutUS > 0 {
			ratios = append(ratios, r.WithUS/r.WithoutUS)
		}
		p50Without, p50With, added = append(p50Without, r.WithoutP50), append(p50With, r.WithP50), append(added, r.WithP50-r.WithoutP50)
		b.logf("  %-18s round %d without %.1f µs/req (user %.1f, %.0f req/s, upstream %.1f) p50 %.3f ms, with %.1f µs/req (user %.1f, %.0f req/s, upstream %.1f) p50 %.3f ms", scenario, round,
			r.WithoutUS, r.WithoutUserUS, r.WithoutRPS, r.WithoutUpstreamUS, r.WithoutP50, r.WithUS, r.WithUserUS, r.WithRPS, r.WithUpstreamUS, r.WithP50)
	}
	fig.WithoutUS, fig.WithUS, fig.PairedRatio = median(without), median(withUS), median(ratios)
	fig.WithoutP50MS, fig.WithP50MS, fig.AddedP50MS = median(p50Without), median(p50With), median(added)
	if fig.WithoutUS > 0 {
		fig.Ratio = fig.WithUS / fig.WithoutUS
	}
	if b.cfg.cpuSlices == 0 || ctx.Err() != nil {
		return nil
	}
	plain.name, with.name = "without", "with"
	pooled, err := b.alternateSlices(ctx, embeddings, []target{plain, with}, embeddings.concurrency)
	if err != nil {
		return err
	}
	fig.Slices = &pairedSlices{Without: pooled[0], With: pooled[1], RoundsRatio: fig.Ratio}
	fig.WithoutUS, fig.WithUS = pooled[0].CPUPerRequestUS, pooled[1].CPUPerRequestUS
	if fig.WithoutUS > 0 {
		fig.Ratio = fig.WithUS / fig.WithoutUS
	}
	return nil
}

// pairedChecks are a paired scenario's two verdicts: the CPU ratio at most
// cpuLimit, the added p50 at most p50Limit ms.
func pairedChecks(scenario string, fig *pairedFigures, name, p50Name string, cpuLimit, p50Limit float64) []check {
	st := statusPass
	if fig.Ratio > cpuLimit {
		st = statusFail
	}
	cpu := check{Scenario: scenario, Name: name, Status: st,
		Detail: fmt.Sprintf("%.2f× (%+.1f µs): with %.1f, without %.1f", fig.Ratio, fig.WithUS-fig.WithoutUS, fig.WithUS, fig.WithoutUS)}
	if sl := fig.Slices; sl != nil {
		cpu.Detail += fmt.Sprintf(" in %d alternating slices each; the rounds' medians: %.2f×", sl.With.Slices, sl.RoundsRatio)
	}
	st = statusPass
	if fig.AddedP50MS > p50Limit {
		st = statusFail
	}
	p50 := check{Scenario: scenario, Name: p50Name, Status: st,
		Detail: fmt.Sprintf("%+.3f ms: with %.3f, without %.3f", fig.AddedP50MS, fig.WithP50MS, fig.WithoutP50MS)}
	return []check{cpu, p50}
}
