package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The targets (issue 16): a team callback costs at most 10% more CPU per
// embeddings request at saturation than the same call without one, and
// adds at most 0.2 ms to the p50 latency (open loop, same run).
const (
	callbackCPULimit      = 1.10
	callbackAddedP50Limit = 0.2 // ms
)

// callbackFigures is the callback scenario's Extra.
type callbackFigures struct {
	Rounds    []callbackRound `json:"rounds"`
	WithoutUS float64         `json:"cpu_per_request_without_us"`
	WithUS    float64         `json:"cpu_per_request_with_us"`
	Ratio     float64         `json:"ratio"`
	// PairedRatio is the median of the rounds' own ratios: each round
	// measures both teams back to back, so a change in the machine's
	// speed between rounds moves both sides of a round's ratio alike.
	PairedRatio    float64 `json:"paired_ratio"`
	WithoutP50MS   float64 `json:"p50_without_ms"`
	WithP50MS      float64 `json:"p50_with_ms"`
	AddedP50MS     float64 `json:"added_p50_ms"`
	EventsReceived int64   `json:"events_received"`
	Requests       int64   `json:"requests_with_callback"`
}

type callbackRound struct {
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

func (f *callbackFigures) print(w io.Writer) {
	if len(f.Rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "   embeddings CPU/request: %.1f µs without a callback, %.1f µs with one (%.2f×; median of the rounds' ratios %.2f×); p50 %.3f ms without, %.3f ms with (%+.3f ms); %d events reached the sink for %d calls\n",
		f.WithoutUS, f.WithUS, f.Ratio, f.PairedRatio, f.WithoutP50MS, f.WithP50MS, f.AddedP50MS, f.EventsReceived, f.Requests)
}

// runCallback compares sluice's CPU per embeddings call for a team without
// callbacks and a team with a Langfuse callback pointed at the upstream's sink.
func (b *bench) runCallback(ctx context.Context, embeddings httpScenario) *scenarioReport {
	rep := newScenarioReport("callback", "embeddings for a team with a Langfuse callback (sink: the upstream) vs a team without")
	name := fmt.Sprintf("team callback ≤ %.2f× CPU/request of the same call without", callbackCPULimit)
	p50Name := fmt.Sprintf("team callback adds ≤ %.1f ms to the p50", callbackAddedP50Limit)
	fig := &callbackFigures{}
	rep.Extra = fig
	if b.sluice == nil {
		rep.Skipped["sluice"] = b.sluiceSkip
		rep.Checks = append(rep.Checks, notMeasured(rep, name), notMeasured(rep, p50Name))
		return rep
	}
	teams, err := b.callbackRun(ctx, embeddings, fig)
	if err != nil {
		rep.exclude("sluice", err)
		rep.Checks = append(rep.Checks, notMeasured(rep, name), notMeasured(rep, p50Name))
		return rep
	}
	if b.cfg.profile && ctx.Err() == nil {
		// Two profiles of the same process, one per team: their difference is the callback's cost.
		sc := embeddings
		sc.name = "callback"
		rep.Profiles, rep.ProfileErrors = b.profileScenario(ctx, sc, teams, embeddings.concurrency)
	}
	st := statusPass
	if fig.Ratio > callbackCPULimit {
		st = statusFail
	}
	rep.Checks = append(rep.Checks, check{Scenario: rep.Name, Name: name, Status: st,
		Detail: fmt.Sprintf("%.2f× (%+.1f µs): with %.1f, without %.1f", fig.Ratio, fig.WithUS-fig.WithoutUS, fig.WithUS, fig.WithoutUS)})
	st = statusPass
	if fig.AddedP50MS > callbackAddedP50Limit {
		st = statusFail
	}
	rep.Checks = append(rep.Checks, check{Scenario: rep.Name, Name: p50Name, Status: st,
		Detail: fmt.Sprintf("%+.3f ms: with %.3f, without %.3f", fig.AddedP50MS, fig.WithP50MS, fig.WithoutP50MS)})
	return rep
}

// It returns the two teams as targets (the one without a callback first).
func (b *bench) callbackRun(ctx context.Context, embeddings httpScenario, fig *callbackFigures) ([]target, error) {
	s := b.sluice
	plain := target{name: "without", base: s.base, proc: s.child.proc, sluice: true, key: s.key, pprof: s.pprof}
	if err := b.probe(ctx, embeddings, plain); err != nil {
		return nil, err
	}
	teamID, key, err := s.newTeamKey(ctx, b.client, "bench-callback")
	if err != nil {
		return nil, err
	}
	cb := mustJSON(map[string]any{
		"callback_name": "langfuse",
		"callback_type": "success",
		"callback_vars": map[string]string{
			"langfuse_public_key": "pk-lf-bench",
			"langfuse_secret_key": "sk-lf-bench",
			"langfuse_host":       b.upstreamURL,
		},
	})
	status, body, err := doJSON(ctx, b.client, http.MethodPost, s.base+"/team/"+teamID+"/callback", masterKey, cb)
	if err != nil {
		return nil, fmt.Errorf("POST /team/{id}/callback: %w", err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return nil, skipf("POST /team/{id}/callback answers %d: team callbacks have not landed in sluice yet", status)
	}
	if status/100 != 2 {
		return nil, fmt.Errorf("POST /team/{id}/callback answers %d: %s", status, clip(body))
	}
	with := plain
	with.name, with.key = "with", key

	before, err := b.upstreamStats(ctx)
	if err != nil {
		return nil, err
	}
	conc := embeddings.concurrency
	var without, withCB, added, ratios []float64
	var p50Without, p50With []float64
	for round := 1; round <= b.cfg.rounds && ctx.Err() == nil; round++ {
		var r callbackRound
		for _, t := range []target{plain, with} {
			m, err := b.measure(ctx, embeddings, t, round, conc, embeddings.rate)
			if err != nil {
				return nil, err
			}
			if t.key == key {
				r.WithUS, r.WithUserUS, r.WithRPS, r.WithP50 = m.Closed.CPUPerRequestUS, m.Closed.UserCPUPerRequestUS, m.Closed.Throughput, m.Open.Latency.P50
				r.WithUpstreamUS = m.Closed.UpstreamCPUPerReqUS
				fig.Requests += m.Closed.OK + m.Open.OK
			} else {
				r.WithoutUS, r.WithoutUserUS, r.WithoutRPS, r.WithoutP50 = m.Closed.CPUPerRequestUS, m.Closed.UserCPUPerRequestUS, m.Closed.Throughput, m.Open.Latency.P50
				r.WithoutUpstreamUS = m.Closed.UpstreamCPUPerReqUS
			}
		}
		fig.Rounds = append(fig.Rounds, r)
		without, withCB = append(without, r.WithoutUS), append(withCB, r.WithUS)
		if r.WithoutUS > 0 {
			ratios = append(ratios, r.WithUS/r.WithoutUS)
		}
		p50Without, p50With, added = append(p50Without, r.WithoutP50), append(p50With, r.WithP50), append(added, r.WithP50-r.WithoutP50)
		b.logf("  %-18s round %d without %.1f µs/req (user %.1f, %.0f req/s, upstream %.1f) p50 %.3f ms, with %.1f µs/req (user %.1f, %.0f req/s, upstream %.1f) p50 %.3f ms", "callback", round,
			r.WithoutUS, r.WithoutUserUS, r.WithoutRPS, r.WithoutUpstreamUS, r.WithoutP50, r.WithUS, r.WithUserUS, r.WithRPS, r.WithUpstreamUS, r.WithP50)
	}
	fig.WithoutUS, fig.WithUS, fig.PairedRatio = median(without), median(withCB), median(ratios)
	fig.WithoutP50MS, fig.WithP50MS, fig.AddedP50MS = median(p50Without), median(p50With), median(added)
	if fig.WithoutUS > 0 {
		fig.Ratio = fig.WithUS / fig.WithoutUS
	}
	// Delivery may trail the calls a little; then the sink must have seen them.
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); {
		after, err := b.upstreamStats(ctx)
		if err != nil {
			return nil, err
		}
		fig.EventsReceived = after.LoggingEvents - before.LoggingEvents
		if fig.EventsReceived > 0 {
			return []target{plain, with}, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil, fmt.Errorf("callback configured, but no logging event reached the sink for %d calls", fig.Requests)
}
