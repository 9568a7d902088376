package batches

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// finalize ends a batch whose chunks are all done (completed), that was
// cancelled, or whose window has passed (expired). Each step is idempotent,
// so a finalize delivered twice, or run again after a crash, ends the batch
// once: the state changes are conditional writes; the files have ids chosen
// when the batch was created; the object listing the lines that never ran
// is rewritten with the same bytes.
//
// A cancel or the expiry first closes every chunk not done — waiting for a
// run in progress to stop and commit what its lines did (a run notices
// within Options.StatusEvery, or its lease runs out) — with a write
// conditional on the chunk's version, so a run that had lost its lease can
// no longer commit. Then the lines no run did go to the error file as
// batch_cancelled or batch_expired.
func (s *Service) finalize(ctx context.Context, id string) error {
	st, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if terminal(st.status) || !st.doc.Planned {
		return nil // an unplanned batch is finalized once its plan has run
	}
	st, err = s.change(ctx, id, func(st *state) (bool, error) {
		if terminal(st.status) || st.doc.Ending != "" {
			return false, nil
		}
		now := s.now()
		switch {
		case st.status == StatusCancelling:
			st.doc.Ending = StatusCancelled
		case st.status == StatusFinalizing:
			st.doc.Ending = StatusCompleted
		case st.status == StatusInProgress && st.counters[ctrChunks] >= int64(st.doc.Chunks):
			st.doc.Ending = StatusCompleted
			st.status = StatusFinalizing
			st.doc.Finalizing = now.UnixNano()
		case st.status == StatusInProgress && !now.Before(st.expiresAt()):
			st.doc.Ending = StatusExpired
		default:
			return false, nil // still running
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if terminal(st.status) || st.doc.Ending == "" {
		return nil
	}
	if st.doc.Ending != StatusCompleted {
		s.closing.Store(id, struct{}{})
	}
	if st.doc.Ending != StatusCompleted && !st.doc.Closed {
		if st, err = s.close(ctx, st); err != nil {
			return err
		}
	}
	cs, err := s.chunks(ctx, id)
	if err != nil {
		return err
	}
	var out, errs []files.Part
	for _, c := range cs {
		for _, p := range c.doc.Pieces {
			if p.Out != nil {
				out = append(out, *p.Out)
			}
			if p.Err != nil {
				errs = append(errs, *p.Err)
			}
		}
	}
	if st.doc.Closing != nil {
		errs = append(errs, *st.doc.Closing)
	}
	outID, err := s.createFile(ctx, st, st.doc.OutFile, "output", out)
	if err != nil {
		return err
	}
	errID, err := s.createFile(ctx, st, st.doc.ErrFile, "error", errs)
	if err != nil {
		return err
	}
	ended := false
	st, err = s.change(ctx, id, func(st *state) (bool, error) {
		if ended = !terminal(st.status); !ended {
			return false, nil
		}
		now := s.now().UnixNano()
		st.status = st.doc.Ending
		switch st.status {
		case StatusCompleted:
			st.doc.Completed = now
		case StatusCancelled:
			st.doc.Cancelled = now
		case StatusExpired:
			st.doc.Expired = now
		}
		st.doc.OutputFileID, st.doc.ErrorFileID = outID, errID
		return true, nil
	})
	if err != nil || !ended {
		return err
	}
	s.closing.Delete(id)
	slog.InfoContext(ctx, "batches: finalized", "batch", id, "status", st.status,
		"completed", st.counters[ctrCompleted], "failed", st.counters[ctrFailed], "never_run", st.doc.NeverRun)
	return nil
}

// createFile publishes parts as one of the batch's files (purpose
// batch_output) under the id the batch chose for it, and returns that id
// ("" when there are no parts). The id already taken means an earlier
// finalize created it.
func (s *Service) createFile(ctx context.Context, st *state, fileID, kind string, parts []files.Part) (string, error) {
	if len(parts) == 0 {
		return "", nil
	}
	if len(parts) > files.MaxParts {
		return "", fmt.Errorf("batches: the %s file of %s has %d objects, more than a file may have (%d)", kind, st.doc.ID, len(parts), files.MaxParts)
	}
	_, err := s.deps.Files.Create(ctx, files.NewFile{
		ID: fileID, Team: st.doc.Team, Purpose: files.PurposeBatchOutput, ContentType: "application/jsonl",
		Filename: st.doc.ID + "_" + kind + ".jsonl", Parts: parts,
		ExpiresAfter: time.Duration(st.doc.OutputExpiresAfter) * time.Second,
	})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return "", fmt.Errorf("batches: create the %s file of %s: %w", kind, st.doc.ID, err)
	}
	return fileID, nil
}

// close closes every chunk not done and lists the lines that never ran,
// once: the batch records the object that lists them (Closing).
func (s *Service) close(ctx context.Context, st *state) (*state, error) {
	id := st.doc.ID
	cs, err := s.chunks(ctx, id)
	if err != nil {
		return nil, err
	}
	deadline := s.runDeadline(ctx)
	for i, c := range cs {
		if c.status != chunkPending {
			continue
		}
		err := s.waitFor(ctx, deadline, func() (bool, time.Duration, error) {
			cur, err := s.loadChunk(ctx, id, c.doc.N)
			if err != nil {
				return false, 0, err
			}
			cs[i] = cur
			if cur.status != chunkPending {
				return true, 0, nil
			}
			if l := cur.doc.Lease; l != nil && s.live(l) {
				return false, time.Until(time.UnixMilli(l.Until)) + time.Second, nil
			}
			dead := cur.doc.Lease
			cur.doc.Lease, cur.status = nil, chunkClosed
			rec, err := cur.record(id)
			if err != nil {
				return false, 0, err
			}
			err = s.deps.Records.Transact(ctx, append([]store.Write{{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{Version: cur.version}}},
				unshow(&st.doc, dead)...))
			if errors.Is(err, store.ErrConditionFailed) {
				return false, 0, nil // a run committed meanwhile: look again
			}
			if err != nil {
				return false, 0, fmt.Errorf("batches: close chunk %d of %s: %w", cur.doc.N, id, err)
			}
			cur.version++
			if dead != nil {
				for _, kind := range []string{kindOut, kindErr} {
					_ = s.deps.Blobs.Delete(ctx, resultKey(id, cur.doc.N, dead.Epoch, kind))
				}
			}
			return true, 0, nil
		})
		if err != nil {
			return nil, err
		}
	}

	code := codeBatchExpired
	if st.doc.Ending == StatusCancelled {
		code = codeBatchCancelled
	}
	part, n, err := s.writeNeverRun(ctx, st, cs, code)
	var unavailable *LineError
	if errors.Is(err, errInputGone) {
		unavailable = &LineError{Code: codeInputUnavailable, Message: "The input file was deleted before the batch ended: the lines that never ran cannot be listed in the error file."}
	} else if err != nil {
		return nil, err
	}
	return s.change(ctx, id, func(st *state) (bool, error) {
		if st.doc.Closed {
			return false, nil
		}
		st.doc.Closed, st.doc.Closing, st.doc.NeverRun = true, part, n
		if unavailable != nil {
			st.doc.Errors = append(st.doc.Errors, *unavailable)
		}
		return true, nil
	})
}

// errInputGone is an input file that no longer exists.
var errInputGone = errors.New("batches: the input file is gone")

// writeNeverRun writes the lines of the closed chunks that no run did to
// the batch's never-run object and returns it (nil when there are none)
// and their count. Its bytes depend only on the batch and its input, so a
// finalize run again, or twice at once, writes the same object.
func (s *Service) writeNeverRun(ctx context.Context, st *state, cs []*chunk, code string) (*files.Part, int64, error) {
	id := st.doc.ID
	f, err := s.deps.Files.Recorded(ctx, st.doc.InputFileID)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, 0, errInputGone
		}
		return nil, 0, err
	}
	out := newStream(context.WithoutCancel(ctx), s.deps.Blobs, neverRunKey(id))
	var n int64
	var buf []byte
	for _, c := range cs {
		if c.status != chunkClosed {
			continue
		}
		done := c.done()
		i := 0
		v := batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, OnLine: func(l batchinput.Line) error {
			defer func() { i++ }()
			if done.has(i) {
				return nil
			}
			n++
			buf = neverRunLine(buf[:0], id, c.doc.First+i, l.CustomID, code)
			return out.write(buf)
		}})
		rc, err := s.deps.Files.Open(ctx, f, c.doc.Off, c.doc.End-c.doc.Off)
		if err == nil {
			_, err = io.Copy(v, rc)
			rc.Close()
			if err == nil {
				err = v.Close()
			}
		}
		if err != nil {
			out.abort(err)
			return nil, 0, fmt.Errorf("batches: list the lines of chunk %d of %s that never ran: %w", c.doc.N, id, err)
		}
	}
	part, err := out.close()
	return part, n, err
}
