package batches

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// maxPlanErrors is how many bad lines a failed batch names; the rest are
// counted in one more entry.
const maxPlanErrors = 100

// Plan error codes (errors.data[].code).
const (
	codeEndpointMismatch = "endpoint_mismatch"
	codeDuplicateID      = "duplicate_custom_id"
	codeModelNotFound    = "model_not_found"
	codeModelNotAllowed  = "model_not_allowed"
	codeInvalidLine      = "invalid_line"
	codeMoreErrors       = "more_errors"
	codeInputUnavailable = "input_file_unavailable"
	codeInvalidKey       = "invalid_api_key"
)

// plan validates batch id's input file as a whole and cuts it into chunks:
// it streams the file once (memory bounded by a line, whatever the file's
// size, plus 16 bytes per custom_id), checks what needs the whole file or
// the configuration — every url the batch's endpoint, every custom_id
// unique, every model one the gateway serves and the key may use — and
// either fails the batch naming the first bad lines, or records the chunks,
// moves it in progress and queues a message per chunk. A plan delivered
// again finds the batch planned and queues its work again.
func (s *Service) plan(ctx context.Context, id string) error {
	st, err := s.load(ctx, id)
	if err != nil {
		return err
	}
	if terminal(st.status) {
		return nil
	}
	if st.doc.Planned {
		return s.resume(ctx, st)
	}
	fail := func(errs []LineError) error { return s.failPlan(ctx, id, errs) }
	p, err := s.principal(ctx, st.doc)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 401 {
			return fail([]LineError{{Code: codeInvalidKey, Message: "The key that created the batch can no longer be used: " + ae.Message}})
		}
		return err
	}
	f, err := s.deps.Files.Recorded(ctx, st.doc.InputFileID)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			return fail([]LineError{{Code: codeInputUnavailable, Message: fmt.Sprintf("The input file %s no longer exists.", st.doc.InputFileID)}})
		}
		return err
	}
	rc, err := s.deps.Files.Open(ctx, f, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	pl := &planner{s: s, endpoint: st.doc.Endpoint, p: p, seen: map[[16]byte]int{}, lines1: st.doc.ChunkLines, bytes1: st.doc.ChunkBytes}
	v := batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, OnLine: pl.line})
	if _, err := io.Copy(v, rc); err != nil && v.Err() == nil {
		return fmt.Errorf("batches: plan %s: read input %s: %w", id, f.ID, err)
	}
	if err := v.Close(); err != nil {
		// The upload checked each line; different limits since can refuse.
		var le *batchinput.LineError
		line := (*int)(nil)
		if errors.As(err, &le) {
			line = &le.Line
		}
		pl.bad(line, codeInvalidLine, err.Error())
	}
	if pl.nbad > 0 {
		return fail(pl.errors())
	}
	pl.cut() // the last chunk

	if err := s.putChunks(ctx, id, pl.chunks); err != nil {
		return err
	}
	planned := false
	st, err = s.change(ctx, id, func(st *state) (bool, error) {
		if planned = !terminal(st.status) && !st.doc.Planned; !planned {
			return false, nil // another delivery of the plan got there first
		}
		st.doc.Planned, st.doc.Total, st.doc.Chunks = true, int64(pl.lines), len(pl.chunks)
		if st.status == StatusValidating {
			st.status = StatusInProgress
			st.doc.InProgress = s.now().UnixNano()
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if !planned {
		// The delivery that planned it queues its work (or, should it die
		// first, its message comes back and does).
		return nil
	}
	slog.InfoContext(ctx, "batches: planned", "batch", id, "lines", pl.lines, "chunks", len(pl.chunks), "status", st.status)
	return s.resume(ctx, st)
}

// resume queues what a planned batch needs next: its pending chunks while
// it runs, its finalize once they are done or it is closing.
func (s *Service) resume(ctx context.Context, st *state) error {
	if terminal(st.status) {
		return nil
	}
	if !st.runnable(s.now()) || st.counters[ctrChunks] >= int64(st.doc.Chunks) {
		return s.send(ctx, message{Kind: kindFinalize, Batch: st.doc.ID})
	}
	cs, err := s.chunks(ctx, st.doc.ID)
	if err != nil {
		return err
	}
	var msgs []message
	for _, c := range cs {
		if c.status == chunkPending {
			msgs = append(msgs, message{Kind: kindChunk, Batch: st.doc.ID, Chunk: c.doc.N, Off: c.doc.Off, End: c.doc.End})
		}
	}
	if len(msgs) == 0 {
		msgs = append(msgs, message{Kind: kindFinalize, Batch: st.doc.ID})
	}
	return s.send(ctx, msgs...)
}

// putChunks records a plan's chunks, up to a transaction's worth at a time.
// Each is written only if absent: a plan delivered twice (at once, or again
// after one died midway) cuts the same chunks — the cut's sizes are the
// batch's own, fixed when it was created — and the chunks an earlier plan
// wrote may be leased and running already.
func (s *Service) putChunks(ctx context.Context, id string, docs []chunkDoc) error {
	for len(docs) > 0 {
		n := min(len(docs), store.MaxTransactWrites)
		writes := make([]store.Write, n)
		for i, d := range docs[:n] {
			rec, err := (&chunk{doc: d, status: chunkPending}).record(id)
			if err != nil {
				return err
			}
			writes[i] = store.Write{Kind: store.WritePut, Record: rec, Cond: store.Cond{Absent: true}}
		}
		err := s.deps.Records.Transact(ctx, writes)
		if errors.Is(err, store.ErrConditionFailed) {
			// Some were written by another plan: write the others.
			for _, w := range writes {
				if err = s.deps.Records.Put(ctx, w.Record, w.Cond); errors.Is(err, store.ErrConditionFailed) {
					err = nil
				}
				if err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("batches: record the chunks of %s: %w", id, err)
		}
		docs = docs[n:]
	}
	return nil
}

// failPlan ends a batch whose plan refused it.
func (s *Service) failPlan(ctx context.Context, id string, errs []LineError) error {
	_, err := s.change(ctx, id, func(st *state) (bool, error) {
		if terminal(st.status) || st.doc.Planned {
			return false, nil
		}
		st.status = StatusFailed
		st.doc.Failed = s.now().UnixNano()
		st.doc.Errors = errs
		return true, nil
	})
	if err != nil {
		return err
	}
	slog.InfoContext(ctx, "batches: plan refused the batch", "batch", id, "errors", len(errs))
	return nil
}

// principal rebuilds the principal a batch's lines run as: the key that
// created it (a 401 when it has been deleted or has expired since), or the
// admin.
func (s *Service) principal(ctx context.Context, d batchDoc) (auth.Principal, error) {
	if d.Admin {
		return auth.Principal{Admin: true, TeamID: auth.AdminTeam}, nil
	}
	return s.deps.Keys.PrincipalOf(ctx, d.KeyToken)
}

// planner checks each line as the validator hands it over and cuts chunks.
type planner struct {
	s        *Service
	endpoint string
	p        auth.Principal
	seen     map[[16]byte]int // custom_id hash → its line
	lines    int
	nbad     int
	bad1     []LineError
	chunks   []chunkDoc
	cur      chunkDoc // the chunk being cut
	lines1   int      // a chunk's most lines
	bytes1   int64    // and the bytes after which it ends
}

func (pl *planner) line(l batchinput.Line) error {
	pl.lines++
	number := l.Number
	if l.URL != pl.endpoint {
		pl.bad(&number, codeEndpointMismatch, fmt.Sprintf("The line's url '%s' is not the batch's endpoint '%s'.", l.URL, pl.endpoint))
	}
	h := sha256.Sum256([]byte(l.CustomID))
	var key [16]byte
	copy(key[:], h[:])
	if first, dup := pl.seen[key]; dup {
		pl.bad(&number, codeDuplicateID, fmt.Sprintf("custom_id '%s' is also the custom_id of line %d; each line's must be unique.", clip(l.CustomID), first))
	} else {
		pl.seen[key] = l.Number
	}
	if model, ok := modelOf(l.Body); ok {
		switch {
		case !pl.s.deps.Models.Has(model):
			pl.bad(&number, codeModelNotFound, fmt.Sprintf("The model '%s' does not exist or is not configured on this gateway.", clip(model)))
		case !pl.p.AllowsModel(model):
			pl.bad(&number, codeModelNotAllowed, fmt.Sprintf("This key may not use model '%s'.", clip(model)))
		}
	}
	if pl.cur.Lines == 0 {
		pl.cur = chunkDoc{N: len(pl.chunks), Off: l.Offset, First: l.Number}
	}
	pl.cur.Lines++
	pl.cur.End = l.End
	if pl.cur.Lines >= pl.lines1 || pl.cur.End-pl.cur.Off >= pl.bytes1 {
		pl.cut()
	}
	return nil
}

// cut ends the chunk being cut, if it has lines.
func (pl *planner) cut() {
	if pl.cur.Lines > 0 {
		pl.chunks = append(pl.chunks, pl.cur)
		pl.cur = chunkDoc{}
	}
}

func (pl *planner) bad(line *int, code, msg string) {
	pl.nbad++
	if len(pl.bad1) < maxPlanErrors {
		pl.bad1 = append(pl.bad1, LineError{Code: code, Message: msg, Line: line})
	}
}

// errors are the bad lines named, and a count of the rest.
func (pl *planner) errors() []LineError {
	out := pl.bad1
	if rest := pl.nbad - len(pl.bad1); rest > 0 {
		out = append(out, LineError{Code: codeMoreErrors, Message: fmt.Sprintf("%d more lines have errors; the first %d are listed.", rest, maxPlanErrors)})
	}
	return out
}

// modelOf returns the body's model, if it names one as a string (the
// operation itself refuses a model of another type, as it would over HTTP).
func modelOf(body []byte) (string, bool) {
	var model string
	var ok bool
	_ = jsonscan.Members(body, func(name, value []byte) error {
		if string(name) == "model" {
			m, err := jsonscan.String(value)
			model, ok = m, err == nil
		}
		return nil
	})
	return model, ok
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
