package batches

import (
	"context"
	"errors"
	"maps"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Progress while a chunk runs. A chunk's lines are counted in the batch's
// counters when its run commits, which for a chunk of 1,000 lines may be
// minutes away; so every Options.ProgressEvery a run that finished lines
// since it last said so publishes them: one transaction records in its
// lease what it has shown (shown) and adds the difference to the batch's
// live counters. The batch's live counters are therefore always the sum of
// the leases' shown progress, and whoever removes a lease — the run's
// commit, a release, the run that takes a dead lease over, the finalize
// that closes a chunk — subtracts its shown progress in the same
// transaction. Until the batch ends its counts are the committed counters
// plus the live ones; once it ends, the committed counters alone.

// Live counters of the batch record: the lines (and tokens) of running
// chunks, not yet committed.
var liveCounter = map[string]string{
	ctrCompleted: "live_completed",
	ctrFailed:    "live_failed",
	ctrInput:     "live_input_tokens",
	ctrOutput:    "live_output_tokens",
	ctrTotal:     "live_total_tokens",
	ctrCached:    "live_cached_tokens",
	ctrReasoning: "live_reasoning_tokens",
	ctrCost:      "live_cost_nusd",
	ctrSettled:   "live_reserve_settled_nusd",
}

// progress is what a run has done, by committed counter name.
type progress map[string]int64

// snapshot is what the run has done so far.
func (r *chunkRun) snapshot() progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return progress{
		ctrCompleted: r.completed, ctrFailed: r.failed,
		ctrInput: r.usage.PromptTokens, ctrOutput: r.usage.CompletionTokens, ctrTotal: r.usage.TotalTokens,
		ctrCached: r.usage.PromptTokensDetails.CachedTokens, ctrReasoning: r.usage.CompletionTokensDetails.ReasoningTokens,
		ctrCost: r.cost, ctrSettled: r.settled(),
	}
}

// settled is the share of the batch's reservation the run's lines give
// back: every line done, answered or failed.
func (r *chunkRun) settled() int64 {
	if res := r.batch.doc.Reserve; res != nil {
		return (r.completed + r.failed) * res.Share
	}
	return 0
}

// liveAdds adds to adds the live counters' change from shown to now: only
// the counters that change.
func liveAdds(adds map[string]int64, shown, now progress) {
	for ctr, live := range liveCounter {
		if d := now[ctr] - shown[ctr]; d != 0 {
			adds[live] += d
		}
	}
}

// unshow is the write that takes lease l's shown progress off batch d's
// live counters, to go with the write that removes l — and takes back the
// reservation share its lines gave back, since they will run again; none
// when it showed nothing.
func unshow(d *batchDoc, l *lease) []store.Write {
	if l == nil || len(l.Shown) == 0 {
		return nil
	}
	adds := map[string]int64{}
	liveAdds(adds, l.Shown, nil)
	if len(adds) == 0 {
		return nil
	}
	return append([]store.Write{{Kind: store.WriteAdd, Record: store.Record{Key: batchKey(d.ID), Counters: adds}, Cond: store.Cond{Exists: true}}},
		d.reserveAdds(l.Shown[ctrSettled])...)
}

// publish shows the lines the run finished since it last showed them, in
// one transaction that also renews the lease (conditional on the version
// the run last wrote: errLost when another run or a finalize took the
// chunk). Nothing is written when nothing finished.
func (r *chunkRun) publish(ctx context.Context) error {
	now := r.snapshot()
	adds := map[string]int64{}
	liveAdds(adds, r.c.doc.Lease.Shown, now)
	if len(adds) == 0 {
		return nil
	}
	id, was := r.batch.doc.ID, r.c.doc.Lease
	l := *was
	l.Shown, l.Until = now, r.s.now().Add(r.s.opts.Lease).UnixMilli()
	r.c.doc.Lease = &l
	rec, err := r.c.record(id)
	if err == nil {
		err = r.s.deps.Records.Transact(ctx, append([]store.Write{
			{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{Version: r.c.version}},
			{Kind: store.WriteAdd, Record: store.Record{Key: batchKey(id), Counters: adds}, Cond: store.Cond{Exists: true}},
		}, r.batch.doc.reserveAdds(was.Shown[ctrSettled]-now[ctrSettled])...))
	}
	if err != nil {
		// The lease as the record holds it at the run's version.
		r.c.doc.Lease = was
		if errors.Is(err, store.ErrConditionFailed) {
			return errLost
		}
		return err
	}
	r.c.version++
	return nil
}

// withLive returns the counters a batch's counts are read from: while it
// runs, the committed ones plus the live ones.
func (st *state) withLive() map[string]int64 {
	if terminal(st.status) {
		return st.counters
	}
	out := maps.Clone(st.counters)
	for ctr, live := range liveCounter {
		out[ctr] += st.counters[live]
	}
	return out
}
