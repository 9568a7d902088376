package files

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/sortkey"
)

// DefaultSweepInterval is how often the local process sweeps; the cloud's
// scheduled sweep runs hourly (the jobs table of pkg/server).
const DefaultSweepInterval = 10 * time.Minute

// sweepPage is how many expiry-index entries a sweep reads at a time.
const sweepPage = 100

// Delete removes a file p may see, bytes and records. The input of a
// running batch is refused (409 naming the batch).
//
// The file vanishes first, in one transaction: its record turns
// "deleting", leaves the listings and enters the expiry index as due now,
// and its bytes leave the team's storage usage. Then its objects and
// record are removed. If that second step fails, the client has still seen
// a clean delete, and the next sweep finishes it.
func (s *Service) Delete(ctx context.Context, p auth.Principal, id string) error {
	f, version, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if !p.CanAccessTeam(f.Team) {
		return notFound(id)
	}
	if s.opts.Batches != nil {
		batchID, err := s.opts.Batches.InUse(ctx, id)
		if err != nil {
			return fmt.Errorf("files: delete %s: check batches: %w", id, err)
		}
		if batchID != "" {
			return api.Conflict("File %s is the input of batch %s, which is still running; cancel the batch or wait for it to end, then delete the file.", id, batchID)
		}
	}
	main, _, err := fileRecords(f)
	if err != nil {
		return err
	}
	now := s.now()
	main.Status = statusDeleting
	main.GSI1 = store.IndexKey{}
	main.GSI2 = store.IndexKey{PK: expiresPK, SK: expirySK(now, id)}
	main.ExpiresAt = now.Add(recordGrace)
	writes := []store.Write{
		{Kind: store.WriteUpdate, Record: main, Cond: store.Cond{Version: version}},
		{Kind: store.WriteDelete, Record: store.Record{Key: fileAllKey(id)}},
	}
	if f.counted {
		writes = append(writes, releaseUsage(f.Team, f.Bytes))
	}
	err = s.records.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return notFound(id) // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("files: delete %s: %w", id, err)
	}
	if err := s.purgeFile(context.WithoutCancel(ctx), f, false, 0); err != nil {
		slog.WarnContext(ctx, "files: delete left work for the sweep", "file", id, "error", err)
	}
	return nil
}

// purgeFile removes a file's objects, then its records. release gives the
// file's bytes back to the team's storage usage with the records, provided
// the record is still at version (so two sweeps cannot both give them
// back); a delete gave them back already.
func (s *Service) purgeFile(ctx context.Context, f Stored, release bool, version int64) error {
	for _, p := range f.Parts {
		if err := s.blobs.Delete(ctx, p.Key); err != nil {
			return fmt.Errorf("files: purge %s: %w", f.ID, err)
		}
	}
	writes := []store.Write{
		{Kind: store.WriteDelete, Record: store.Record{Key: fileKey(f.ID)}},
		{Kind: store.WriteDelete, Record: store.Record{Key: fileAllKey(f.ID)}},
	}
	if release {
		writes[0].Cond = store.Cond{Version: version}
		writes = append(writes, releaseUsage(f.Team, f.Bytes))
	}
	err := s.records.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return nil // purged meanwhile
	}
	if err != nil {
		return fmt.Errorf("files: purge %s: %w", f.ID, err)
	}
	return nil
}

// SweepResult counts what a sweep removed.
type SweepResult struct {
	Files   int // expired or deleted files whose bytes and records are gone
	Uploads int // expired or cancelled uploads whose parts are gone
	Holds   int // storage holds of uploads a crash interrupted, undone
	Failed  int // entries that failed (the next sweep retries them)
}

// Sweep removes everything due by now in the expiry index: the bytes and
// records of expired files (and of deletes that were interrupted), the
// parts of uploads that expired or were cancelled, and what uploads a crash
// interrupted left (their storage holds). Reads already treat all of
// them as gone; the sweep reclaims the storage. The local process runs it
// every DefaultSweepInterval; in the cloud the scheduled files-sweep
// function calls it (both from the jobs table of pkg/server). It stops when
// ctx ends; the next run picks up where it stopped.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) {
	now := s.now()
	due := sortkey.Time(now)
	var res SweepResult
	var errs []error
	q := store.Query{Index: store.GSI2, PK: expiresPK, Limit: sweepPage}
	for {
		page, err := s.records.Query(ctx, q)
		if err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("files: sweep: %w", err))...)
		}
		for _, entry := range page.Records {
			if when, _, _ := strings.Cut(entry.GSI2.SK, "#"); when > due {
				return res, errors.Join(errs...)
			}
			// The index holds keys only (store.GSI2.KeysOnly): read the
			// record. One that is gone, or expired, needs nothing more.
			rec, err := s.records.Get(ctx, entry.Key)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			switch {
			case err != nil:
				err = fmt.Errorf("files: sweep: read %s: %w", entry.Key.PK, err)
			case strings.HasPrefix(rec.Key.PK, filePrefix):
				if err = s.sweepFile(ctx, rec, now); err == nil {
					res.Files++
				}
			case strings.HasPrefix(rec.Key.PK, uploadPrefix):
				if err = s.sweepUpload(ctx, rec, now); err == nil {
					res.Uploads++
				}
			case strings.HasPrefix(rec.Key.PK, holdPrefix):
				if err = s.sweepHold(ctx, rec); err == nil {
					res.Holds++
				}
			}
			if err != nil {
				res.Failed++
				if len(errs) < 10 {
					errs = append(errs, err)
				}
			}
		}
		if !page.More || len(page.Records) == 0 {
			return res, errors.Join(errs...)
		}
		q.After = page.Records[len(page.Records)-1].GSI2.SK
	}
}

func (s *Service) sweepFile(ctx context.Context, rec store.Record, now time.Time) error {
	f, err := decodeFile(rec)
	if err != nil {
		return err
	}
	if rec.Status == statusLive && !f.expired(now) {
		return nil
	}
	if rec.Status == statusLive && s.opts.Batches != nil {
		// A running batch still reads it: the next sweep after the batch
		// ends removes it.
		batchID, err := s.opts.Batches.InUse(ctx, f.ID)
		if err != nil {
			return fmt.Errorf("files: sweep %s: check batches: %w", f.ID, err)
		}
		if batchID != "" {
			return nil
		}
	}
	return s.purgeFile(ctx, f, rec.Status == statusLive && f.counted, rec.Version)
}
