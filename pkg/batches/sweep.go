package batches

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// SweepResult counts what a sweep queued.
type SweepResult struct {
	Expired int // batches past their window, sent to finalize
	Resent  int // batches whose next message was sent again
}

// sweepPage is how many index entries a sweep reads at a time.
const sweepPage = 100

// Sweep walks the batches that have not ended (the ACTIVE index) and queues
// what each needs and may have lost: the finalize of a batch past its
// expiry (its unfinished lines then go to the error file as batch_expired),
// and, for a batch stuck longer than Options.StaleAfter, its plan (still
// validating: the message that created it may not have been sent) or its
// finalize (all chunks done, or closing). It is the batch-sweeper job:
// every DefaultSweepInterval locally, every 5 minutes in the cloud. It
// stops when ctx ends; the next run goes on.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	now := s.now()
	q := store.Query{Index: store.GSI2, PK: activePK, Limit: sweepPage}
	for {
		page, err := s.deps.Records.Query(ctx, q)
		if err != nil {
			return res, fmt.Errorf("batches: sweep: %w", err)
		}
		var msgs []message
		for _, entry := range page.Records {
			// The index holds keys only: read the batch.
			st, err := s.load(ctx, strings.TrimPrefix(entry.Key.PK, batchPrefix))
			if errors.Is(err, errNoBatch) {
				continue
			}
			if err != nil {
				return res, err
			}
			if m, expired, ok := s.due(st, now); ok {
				msgs = append(msgs, m)
				if expired {
					res.Expired++
				} else {
					res.Resent++
				}
			}
		}
		if len(msgs) > 0 {
			if err := s.send(ctx, msgs...); err != nil {
				return res, err
			}
		}
		if !page.More || len(page.Records) == 0 {
			return res, nil
		}
		q.After = page.Records[len(page.Records)-1].GSI2.SK
	}
}

// due says which message a batch needs from the sweep, if any.
func (s *Service) due(st *state, now time.Time) (m message, expired, ok bool) {
	if terminal(st.status) {
		return message{}, false, false
	}
	finalize := message{Kind: kindFinalize, Batch: st.doc.ID}
	stale := now.Sub(time.Unix(0, st.doc.Created)) > s.opts.StaleAfter
	switch {
	case st.status == StatusValidating || !st.doc.Planned:
		// The plan finalizes an expired batch itself.
		return message{Kind: kindPlan, Batch: st.doc.ID}, false, stale || !now.Before(st.expiresAt())
	case st.status == StatusInProgress && st.doc.Ending == "" && !now.Before(st.expiresAt()):
		return finalize, true, true
	case st.status == StatusInProgress && st.doc.Ending == "" && st.counters[ctrChunks] < int64(st.doc.Chunks):
		return message{}, false, false // running
	}
	// All chunks done, finalizing, cancelling or closing: the finalize
	// message may have been lost.
	return finalize, false, stale
}
