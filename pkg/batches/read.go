package batches

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// List limits, as OpenAI sets them.
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// Get returns batch id as p may see it: another team's batch and a missing
// one are both a 404.
func (s *Service) Get(ctx context.Context, p auth.Principal, id string) (Batch, error) {
	st, err := s.visible(ctx, p, id)
	if err != nil {
		return Batch{}, err
	}
	if st.doc.Native != nil {
		st = s.getNative(ctx, st)
	}
	return st.object(), nil
}

// visible loads batch id if p may see it.
func (s *Service) visible(ctx context.Context, p auth.Principal, id string) (*state, error) {
	st, err := s.load(ctx, id)
	if errors.Is(err, errNoBatch) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	if !p.CanAccessTeam(st.doc.Team) {
		return nil, notFound(id)
	}
	return st, nil
}

// List returns up to limit of the batches p may see, newest first, after
// the batch named after (exclusive), and whether more follow. A team key
// sees its team's batches; the master key sees every team's.
func (s *Service) List(ctx context.Context, p auth.Principal, limit int, after string) ([]Batch, bool, error) {
	q := store.Query{Index: store.GSI1, PK: ownerPK(p.TeamID), Desc: true}
	if p.Admin {
		q.PK = allBatchesPK
	}
	if after != "" {
		st, err := s.visible(ctx, p, after)
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			return nil, false, api.InvalidValue("after", "Invalid after: there is no batch %s to page after.", after)
		}
		if err != nil {
			return nil, false, err
		}
		rec, err := st.record()
		if err != nil {
			return nil, false, err
		}
		q.After = rec.GSI1.SK
	}
	q.Limit = limit + 1
	page, err := s.deps.Records.Query(ctx, q)
	if err != nil {
		return nil, false, fmt.Errorf("batches: list %s: %w", q.PK, err)
	}
	more := len(page.Records) > limit
	recs := page.Records[:min(len(page.Records), limit)]
	out := make([]Batch, 0, len(recs))
	for _, rec := range recs {
		if p.Admin {
			// The admin listing's items carry no batch: read each.
			st, err := s.load(ctx, strings.TrimPrefix(rec.Key.PK, batchPrefix))
			if errors.Is(err, errNoBatch) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			out = append(out, st.object())
			continue
		}
		st, err := decodeState(rec)
		if err != nil {
			return nil, false, err
		}
		out = append(out, st.object())
	}
	return out, more, nil
}

// Cancel asks batch id to stop: a validating or running batch turns
// cancelling at once, its lines in flight finish and no new line starts;
// the finalize that follows writes what finished, puts the lines that never
// ran in the error file (batch_cancelled) and turns it cancelled. Cancelling
// a batch already cancelling answers it as it is (a retried cancel); one
// that has ended — cancelled included — or is finalizing is a 409, as
// OpenAI answers ("Cannot cancel a batch with status 'cancelled'.").
func (s *Service) Cancel(ctx context.Context, p auth.Principal, id string) (Batch, error) {
	if st, err := s.visible(ctx, p, id); err != nil || st.doc.Native != nil {
		if err != nil {
			return Batch{}, err
		}
		return s.cancelNative(ctx, st)
	}
	st, err := s.change(ctx, id, func(st *state) (bool, error) {
		switch st.status {
		case StatusValidating, StatusInProgress:
			if st.doc.Ending != "" {
				// Expiring already: the finalize under way decides.
				return false, api.Conflict("Batch %s is expiring and cannot be cancelled.", id)
			}
			st.status = StatusCancelling
			st.doc.Cancelling = s.now().UnixNano()
			return true, nil
		case StatusCancelling:
			return false, nil
		}
		return false, cannotCancel(st.status)
	})
	if err != nil {
		return Batch{}, err
	}
	if st.status == StatusCancelling {
		s.closing.Store(id, struct{}{})
		// Sent on every cancel (a retry resends it): a finalize that finds
		// nothing to do does nothing.
		if err := s.send(ctx, message{Kind: kindFinalize, Batch: id}); err != nil {
			slog.WarnContext(ctx, "batches: finalize not queued; the sweep will queue it", "batch", id, "error", err)
		}
	}
	return st.object(), nil
}

// InUse returns the id of a batch still running on file fileID, or ""
// (Inputs.InUse).
func (s *Service) InUse(ctx context.Context, fileID string) (string, error) {
	return Inputs{Records: s.deps.Records}.InUse(ctx, fileID)
}

// Inputs answers which running batch reads a file from the records alone
// (files.BatchInputs): the files service, built before the batch engine
// that reads through it, takes it at construction.
type Inputs struct{ Records store.Records }

// InUse returns the id of a batch still running on file fileID, or "": the
// files service refuses to delete such a file, and its sweep keeps its
// bytes.
func (i Inputs) InUse(ctx context.Context, fileID string) (string, error) {
	page, err := i.Records.Query(ctx, store.Query{PK: inputPrefix + fileID, SKPrefix: batchPrefix, Limit: 1})
	if err != nil {
		return "", fmt.Errorf("batches: batches of %s: %w", fileID, err)
	}
	if len(page.Records) == 0 {
		return "", nil
	}
	return strings.TrimPrefix(page.Records[0].Key.SK, batchPrefix), nil
}

// cannotCancel is OpenAI's refusal to cancel a batch in status.
func cannotCancel(status string) error {
	return api.Conflict("Cannot cancel a batch with status '%s'.", status)
}
