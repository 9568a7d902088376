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
	pairedFigures
	EventsReceived int64 `json:"events_received"`
	Requests       int64 `json:"requests_with_callback"`
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
	rep.Checks = append(rep.Checks, pairedChecks(rep.Name, &fig.pairedFigures, name, p50Name, callbackCPULimit, callbackAddedP50Limit)...)
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
	err = b.measurePaired(ctx, "callback", embeddings, plain, with, &fig.pairedFigures, func(m measurement) {
		fig.Requests += m.Closed.OK + m.Open.OK
	})
	if err != nil {
		return nil, err
	}
	if sl := fig.Slices; sl != nil {
		fig.Requests += sl.With.OK
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
