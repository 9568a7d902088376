package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// The targets (issue 29): a key with a budget adds at most 0.05 ms to the
// p50 and 5 % CPU per request over the same call by a key without.
const (
	budgetCPULimit      = 1.05
	budgetAddedP50Limit = 0.05 // ms
)

// budgetFigures is the budget scenario's Extra.
type budgetFigures struct{ pairedFigures }

func (f *budgetFigures) print(w io.Writer) {
	if len(f.Rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "   embeddings CPU/request: %.1f µs for a key without a budget, %.1f µs with one (%.2f×; median of the rounds' ratios %.2f×); p50 %.3f ms without, %.3f ms with (%+.3f ms)\n",
		f.WithoutUS, f.WithUS, f.Ratio, f.PairedRatio, f.WithoutP50MS, f.WithP50MS, f.AddedP50MS)
}

// runBudget compares sluice's CPU and p50 per embeddings call for a key
// without a budget and a key with one (large enough never to refuse), in
// the same process, round by round. The store writes of the spend counter
// are not visible from here: pkg/spend's TestCounterWritesPerKeyUnderLoad
// measures them.
func (b *bench) runBudget(ctx context.Context, embeddings httpScenario) *scenarioReport {
	rep := newScenarioReport("budget", "embeddings by a key with a budget vs a key without")
	name := fmt.Sprintf("a budget ≤ %.2f× CPU/request of the same call without", budgetCPULimit)
	p50Name := fmt.Sprintf("a budget adds ≤ %.2f ms to the p50", budgetAddedP50Limit)
	fig := &budgetFigures{}
	rep.Extra = fig
	if b.sluice == nil {
		rep.Skipped["sluice"] = b.sluiceSkip
		rep.Checks = append(rep.Checks, notMeasured(rep, name), notMeasured(rep, p50Name))
		return rep
	}
	if err := b.budgetRun(ctx, embeddings, fig); err != nil {
		rep.exclude("sluice", err)
		rep.Checks = append(rep.Checks, notMeasured(rep, name), notMeasured(rep, p50Name))
		return rep
	}
	rep.Checks = append(rep.Checks, pairedChecks(rep.Name, &fig.pairedFigures, name, p50Name, budgetCPULimit, budgetAddedP50Limit)...)
	return rep
}

func (b *bench) budgetRun(ctx context.Context, embeddings httpScenario, fig *budgetFigures) error {
	s := b.sluice
	plain := target{name: "without", base: s.base, proc: s.child.proc, sluice: true, key: s.key, pprof: s.pprof}
	if err := b.probe(ctx, embeddings, plain); err != nil {
		return err
	}
	_, key, err := s.newTeamKey(ctx, b.client, "bench-budget")
	if err != nil {
		return err
	}
	status, body, err := doJSON(ctx, b.client, http.MethodPost, s.base+"/key/update", masterKey,
		mustJSON(map[string]any{"key": key, "max_budget": 1e9, "budget_duration": "30d"}))
	if err != nil {
		return fmt.Errorf("POST /key/update: %w", err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return skipf("POST /key/update answers %d: budgets have not landed in sluice yet", status)
	}
	if status/100 != 2 {
		return fmt.Errorf("POST /key/update answers %d: %s", status, clip(body))
	}
	with := plain
	with.name, with.key = "with", key
	return b.measurePaired(ctx, "budget", embeddings, plain, with, &fig.pairedFigures, nil)
}
