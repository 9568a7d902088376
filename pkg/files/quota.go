package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Storage quotas (a team's max_storage_bytes). A team with a quota has a
// usage counter, USAGE#<team> / STORAGE, that holds the bytes of its files
// and uploads; room is taken with a conditional add that cannot take the
// counter past the quota (store.Cond.AtMost), so concurrent uploads cannot
// overshoot it, and always before the bytes are stored:
//
//   - an Uploads API upload takes its declared bytes when it is created, and
//     the file it completes into keeps them;
//   - an ordinary upload takes room while it streams, one read-ahead block
//     (reserveStep) at a time, each block's exact size before the block goes
//     to the blob store; what it has taken is held in a hold record
//     (HOLD#<file id>, in the expiry index), deleted in the transaction that
//     records the file. A hold that is still there when it falls due is what
//     a crash left: the sweep deletes its object and gives its bytes back.
//
// Files and uploads that counted remember it ("counted"), and give their
// bytes back in the transaction that ends them: a delete, the sweep of an
// expired file, the cancel or expiry of an upload. Files made with Create,
// and those of teams without a quota, do not count.
const (
	usagePrefix = "USAGE#"
	usageSK     = "STORAGE"
	holdPrefix  = "HOLD#"
	holdSK      = "HOLD"
	// counterBytes names the byte counters: the usage counter's, a hold's
	// and an upload's.
	counterBytes = "bytes"
	// holdTTL is how long an ordinary upload may stream before its hold is
	// taken for a crash's and swept.
	holdTTL = 24 * time.Hour
	// reserveStep is the largest block an upload reads ahead before taking
	// room for it: one conditional add per block, and a block in memory per
	// upload (the blob stores buffer as much).
	reserveStep = 4 << 20
	// quotaCode is the error code of a refusal for the quota.
	quotaCode = "storage_quota_exceeded"
	// A hold's statuses: holding (stored as no status) until the sweep
	// gives its bytes back.
	holding      = ""
	holdReleased = "released"
)

func usageKey(team string) store.Key { return store.Key{PK: usagePrefix + team, SK: usageSK} }
func holdKey(file string) store.Key  { return store.Key{PK: holdPrefix + file, SK: holdSK} }

// quotaOf returns the storage quota of p's team, 0 for none.
func quotaOf(p auth.Principal) int64 {
	if p.Team == nil || p.Team.MaxStorageBytes == nil || *p.Team.MaxStorageBytes <= 0 {
		return 0
	}
	return *p.Team.MaxStorageBytes
}

// takeUsage is the write that adds n bytes to team's usage if it stays
// within quota.
func takeUsage(team string, n, quota int64) store.Write {
	return store.Write{Kind: store.WriteAdd,
		Record: store.Record{Key: usageKey(team), Counters: map[string]int64{counterBytes: n}},
		Cond:   store.Cond{AtMost: map[string]int64{counterBytes: quota - n}}}
}

// releaseUsage is the write that gives n bytes of team's usage back.
func releaseUsage(team string, n int64) store.Write {
	return store.Write{Kind: store.WriteAdd,
		Record: store.Record{Key: usageKey(team), Counters: map[string]int64{counterBytes: -n}}}
}

// Usage returns the bytes team's files and uploads count against its
// storage quota (0 for a team without one).
func (s *Service) Usage(ctx context.Context, team string) (int64, error) {
	rec, err := s.records.Get(ctx, usageKey(team))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("files: storage usage of %s: %w", team, err)
	}
	return rec.Counters[counterBytes], nil
}

// quotaError is the 413 for bytes that do not fit team's quota, saying how
// much is in use if that can be read.
func (s *Service) quotaError(ctx context.Context, team string, quota int64) error {
	inUse := ""
	if used, err := s.Usage(ctx, team); err == nil {
		inUse = fmt.Sprintf(", and %d are in use", used)
	}
	e := api.TooLarge("Team %s may store at most %d bytes of files and uploads (its max_storage_bytes)%s: "+
		"this would take it past the quota. Delete files, or wait for them to expire, and try again.", team, quota, inUse)
	e.Code = quotaCode
	return e
}

// budget takes room for bytes before they are stored.
type budget interface {
	// take takes n more bytes, or fails with the error to give the client.
	take(ctx context.Context, n int64) error
	// release gives back everything taken; it cleans up after a failed
	// request, so it logs rather than returns its own failures.
	release(ctx context.Context)
}

// reservingReader reads ahead a block at a time and takes room for exactly
// the block's bytes before handing any of them on, so nothing reaches the
// blob store before its room is taken, and nothing is taken that is not
// stored. The first block is small, so a small file costs a small buffer;
// a stream that fills it goes on in blocks of reserveStep.
type reservingReader struct {
	ctx    context.Context
	src    io.Reader
	budget budget
	buf    []byte
	most   int   // the largest block
	r, w   int   // buf[r:w] is taken and not yet handed on
	err    error // the source's error, once buf[r:w] is handed on
}

// firstBlock is the size of a stream's first block.
const firstBlock = 64 << 10

// newReservingReader reserves for src through b; limit bounds the stream
// (and so the blocks worth reading ahead).
func newReservingReader(ctx context.Context, src io.Reader, b budget, limit int64) *reservingReader {
	most := int(max(1, min(reserveStep, limit)))
	return &reservingReader{ctx: ctx, src: src, budget: b, buf: make([]byte, min(firstBlock, most)), most: most}
}

func (q *reservingReader) Read(p []byte) (int, error) {
	if q.r == q.w {
		if q.err != nil {
			return 0, q.err
		}
		if q.w == len(q.buf) && len(q.buf) < q.most {
			q.buf = make([]byte, q.most)
		}
		n, err := io.ReadFull(q.src, q.buf)
		switch {
		case err == io.ErrUnexpectedEOF:
			err = io.EOF
		case err != nil && err != io.EOF:
			// The stream fails (too large, malformed, gone): nothing from
			// it will be stored, so take nothing for it.
			q.err = err
			return 0, err
		}
		if n > 0 {
			if terr := q.budget.take(q.ctx, int64(n)); terr != nil {
				q.err = terr
				return 0, terr
			}
		}
		q.r, q.w, q.err = 0, n, err
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, q.buf[q.r:q.w])
	q.r += n
	return n, nil
}

// hold is the room an ordinary upload has taken in its team's quota.
type hold struct {
	s     *Service
	team  string
	quota int64
	file  string // the file id the upload will have
	blob  string // its object
	taken int64
}

// holdDoc is a hold record's body: what the sweep needs to undo it.
type holdDoc struct {
	Team string `json:"team"`
	Blob string `json:"blob"`
}

func (h *hold) take(ctx context.Context, n int64) error {
	var w store.Write
	if h.taken == 0 {
		body, err := json.Marshal(holdDoc{Team: h.team, Blob: h.blob})
		if err != nil {
			return fmt.Errorf("files: encode hold: %w", err)
		}
		due := h.s.now().Add(holdTTL)
		w = store.Write{Kind: store.WritePut, Cond: store.Cond{Absent: true}, Record: store.Record{
			Key: holdKey(h.file), GSI2: store.IndexKey{PK: expiresPK, SK: expirySK(due, h.file)},
			Counters: map[string]int64{counterBytes: n}, Body: body, ExpiresAt: due.Add(recordGrace),
		}}
	} else {
		w = store.Write{Kind: store.WriteAdd, Cond: stillHolding(),
			Record: store.Record{Key: holdKey(h.file), Counters: map[string]int64{counterBytes: n}}}
	}
	err := h.s.records.Transact(ctx, []store.Write{w, takeUsage(h.team, n, h.quota)})
	if errors.Is(err, store.ErrConditionFailed) && h.taken > 0 && !h.stillHeld(ctx) {
		return fmt.Errorf("files: upload %s: its storage hold is gone (uploads may stream for %v): %w", h.file, holdTTL, err)
	}
	if errors.Is(err, store.ErrConditionFailed) {
		return h.s.quotaError(ctx, h.team, h.quota)
	}
	if err != nil {
		return fmt.Errorf("files: take storage for %s: %w", h.file, err)
	}
	h.taken += n
	return nil
}

// stillHeld reports whether the hold is still holding (or cannot be read:
// then the quota is the likelier refusal).
func (h *hold) stillHeld(ctx context.Context) bool {
	rec, err := h.s.records.Get(ctx, holdKey(h.file))
	return !errors.Is(err, store.ErrNotFound) && (err != nil || rec.Status == holding)
}

func (h *hold) release(ctx context.Context) {
	if h.taken == 0 {
		return
	}
	err := h.s.records.Transact(ctx, []store.Write{
		{Kind: store.WriteDelete, Record: store.Record{Key: holdKey(h.file)}, Cond: stillHolding()},
		releaseUsage(h.team, h.taken),
	})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) { // failed: the sweep gave it back already
		slog.WarnContext(ctx, "files: could not give back an upload's storage; the sweep will", "file", h.file, "error", err)
	}
	h.taken = 0
}

// commit is the write that ends the hold as the file is recorded: the file
// keeps the bytes.
func (h *hold) commit() store.Write {
	return store.Write{Kind: store.WriteDelete, Record: store.Record{Key: holdKey(h.file)}, Cond: stillHolding()}
}

// stillHolding is the condition of every write of an upload to its hold:
// the sweep has not taken it for a crash's.
func stillHolding() store.Cond { return store.Cond{StatusIn: []string{holding}} }

// sweepHold undoes a hold a crash left, in three steps that a failure at
// any point leaves for the next sweep to resume: the hold turns "released"
// and gives its bytes back (unless the upload took more meanwhile, or
// committed: then it is no longer this hold), its object goes, and then its
// record. An upload that outlives its hold fails to commit, as the hold is
// no longer holding.
func (s *Service) sweepHold(ctx context.Context, rec store.Record) error {
	var d holdDoc
	if err := json.Unmarshal(rec.Body, &d); err != nil {
		return fmt.Errorf("files: decode hold %s: %w", rec.Key.PK, err)
	}
	if rec.Status == holding {
		n := rec.Counters[counterBytes]
		released := rec
		released.Status = holdReleased
		err := s.records.Transact(ctx, []store.Write{
			{Kind: store.WriteUpdate, Record: released, Cond: store.Cond{StatusIn: []string{holding}, AtMost: map[string]int64{counterBytes: n}}},
			releaseUsage(d.Team, n),
		})
		if errors.Is(err, store.ErrConditionFailed) {
			return nil // it moved on meanwhile; if it is still due, the next sweep looks again
		}
		if err != nil {
			return fmt.Errorf("files: sweep hold %s: %w", rec.Key.PK, err)
		}
	}
	if err := s.blobs.Delete(ctx, d.Blob); err != nil {
		return fmt.Errorf("files: sweep hold %s: %w", rec.Key.PK, err)
	}
	if err := s.records.Delete(ctx, rec.Key, store.Cond{}); err != nil {
		return fmt.Errorf("files: sweep hold %s: %w", rec.Key.PK, err)
	}
	return nil
}

// partBudget takes room for a part in its upload's declared bytes: the
// upload's byte counter may not pass them.
type partBudget struct {
	s     *Service
	u     uploadDoc
	taken int64
}

func (b *partBudget) take(ctx context.Context, n int64) error {
	_, err := b.s.records.Add(ctx, uploadKey(b.u.ID), map[string]int64{counterBytes: n},
		store.Cond{StatusIn: []string{uploadPending}, AtMost: map[string]int64{counterBytes: b.u.Bytes - n}})
	if errors.Is(err, store.ErrConditionFailed) {
		return b.s.partRefusal(ctx, b.u.ID, fieldData, "This part would take upload %s past the %d bytes it was created for.", b.u.ID, b.u.Bytes)
	}
	if err != nil {
		return fmt.Errorf("files: take room in upload %s: %w", b.u.ID, err)
	}
	b.taken += n
	return nil
}

func (b *partBudget) release(ctx context.Context) {
	if b.taken == 0 {
		return
	}
	// Exists: an upload swept meanwhile is not to be brought back as a bare
	// counter.
	_, err := b.s.records.Add(ctx, uploadKey(b.u.ID), map[string]int64{counterBytes: -b.taken}, store.Cond{Exists: true})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		slog.WarnContext(ctx, "files: could not give back a failed part's room in its upload", "upload", b.u.ID, "error", err)
	}
	b.taken = 0
}
