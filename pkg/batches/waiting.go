package batches

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// LinesWaiting is how many lines the running batches still have to run:
// for each in_progress batch of the ACTIVE index, its request_counts'
// total less its completed and failed lines (a batch still validating has
// no total yet, and a cancelled or expired one's lines will not run: they
// count 0). It reads the index and each active batch —
// what the sweep reads — so it is for a scrape or a sweep, not a request.
func (s *Service) LinesWaiting(ctx context.Context) (int64, error) {
	var waiting int64
	q := store.Query{Index: store.GSI2, PK: activePK, Limit: sweepPage}
	for {
		page, err := s.deps.Records.Query(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("batches: lines waiting: %w", err)
		}
		for _, entry := range page.Records {
			st, err := s.load(ctx, strings.TrimPrefix(entry.Key.PK, batchPrefix))
			if errors.Is(err, errNoBatch) {
				continue
			}
			if err != nil {
				return 0, err
			}
			if st.status != StatusInProgress || st.doc.Ending != "" {
				continue // not started, or closing: no line of it will run
			}
			c := st.object().RequestCounts
			waiting += max(c.Total-c.Completed-c.Failed, 0)
		}
		if !page.More || len(page.Records) == 0 {
			return waiting, nil
		}
		q.After = page.Records[len(page.Records)-1].GSI2.SK
	}
}
