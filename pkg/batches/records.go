package batches

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/sortkey"
)

// Records layout (ARCHITECTURE §4):
//
//	batch        BATCH#<id> / BATCH       gsi1 OWNER#<team>#BATCH / <created>#<id>; gsi2 ACTIVE / <expires>#<id> until it ends
//	admin list   BATCH#<id> / ALL         gsi1 ALL#BATCH / <created>#<id>
//	chunk        BATCH#<id> / CHUNK#<n>   (n: 6 digits)
//	input in use INPUT#<file id> / BATCH#<id>   while the batch runs (files.BatchInputs)
//	idempotency  IDEMPOTENCY#<team>#<sha256 of the key> / BATCH   for 24 hours
//
// No record per line: a chunk record says which of its lines are done (a
// bitmap per piece), and the batch record counts lines and tokens in
// counters that each chunk's commit adds to.
const (
	batchPrefix       = "BATCH#"
	batchSK           = "BATCH"
	allSK             = "ALL"
	chunkPrefix       = "CHUNK#"
	ownerPrefix       = "OWNER#"
	ownerSuffix       = "#BATCH"
	allBatchesPK      = "ALL#BATCH"
	activePK          = "ACTIVE"
	inputPrefix       = "INPUT#"
	idempotencyPrefix = "IDEMPOTENCY#"
)

// Chunk statuses: a chunk is pending until its lines are all done (done),
// or a cancel or the expiry closed it with lines that never ran (closed).
const (
	chunkPending = "pending"
	chunkDone    = "done"
	chunkClosed  = "closed"
)

// Counters of the batch record, added to by each chunk's commit.
const (
	ctrCompleted = "completed"
	ctrFailed    = "failed"
	ctrInput     = "input_tokens"
	ctrOutput    = "output_tokens"
	ctrTotal     = "total_tokens"
	ctrCached    = "cached_tokens"
	ctrReasoning = "reasoning_tokens"
	ctrChunks    = "chunks_done"
	// ctrCost is what the committed lines' calls cost (nano-USD, as
	// priced); ctrSettled is the share of the batch's reservation they
	// gave back (reserve.go).
	ctrCost    = "cost_nusd"
	ctrSettled = "reserve_settled_nusd"
)

func batchKey(id string) store.Key    { return store.Key{PK: batchPrefix + id, SK: batchSK} }
func batchAllKey(id string) store.Key { return store.Key{PK: batchPrefix + id, SK: allSK} }
func chunkKey(id string, n int) store.Key {
	return store.Key{PK: batchPrefix + id, SK: fmt.Sprintf("%s%06d", chunkPrefix, n)}
}
func inputKey(fileID, batchID string) store.Key {
	return store.Key{PK: inputPrefix + fileID, SK: batchPrefix + batchID}
}
func ownerPK(team string) string { return ownerPrefix + team + ownerSuffix }

// batchDoc is a batch record's body. Times are Unix nanoseconds, 0 for
// not yet.
type batchDoc struct {
	ID          string `json:"id"`
	Team        string `json:"team"`
	KeyToken    string `json:"key_token,omitempty"` // the creating key's hash; "" for the master key
	Admin       bool   `json:"admin,omitempty"`
	Endpoint    string `json:"endpoint"`
	InputFileID string `json:"input_file_id"`
	Window      string `json:"window"`
	Created     int64  `json:"created_ns"`
	Expires     int64  `json:"expires_ns"`
	InProgress  int64  `json:"in_progress_ns,omitempty"`
	Finalizing  int64  `json:"finalizing_ns,omitempty"`
	Completed   int64  `json:"completed_ns,omitempty"`
	Failed      int64  `json:"failed_ns,omitempty"`
	Expired     int64  `json:"expired_ns,omitempty"`
	Cancelling  int64  `json:"cancelling_ns,omitempty"`
	Cancelled   int64  `json:"cancelled_ns,omitempty"`

	Metadata map[string]string `json:"metadata,omitempty"`
	// OutputExpiresAfter is the output and error files' lifetime in
	// seconds, 0 for none.
	OutputExpiresAfter int64       `json:"output_expires_after,omitempty"`
	Errors             []LineError `json:"errors,omitempty"`

	// OutFile and ErrFile are the ids the output and error files get,
	// chosen at creation so that a finalize run again creates the same
	// files, never a second pair. OutputFileID and ErrorFileID are set once
	// those files exist.
	OutFile      string `json:"out_file"`
	ErrFile      string `json:"err_file"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`

	// ChunkLines and ChunkBytes are the sizes the plan cuts chunks at,
	// fixed at creation so that every plan of the batch cuts the same.
	ChunkLines int   `json:"chunk_lines"`
	ChunkBytes int64 `json:"chunk_bytes"`
	// Planned is set with the chunks: Total lines in Chunks chunks.
	Planned bool  `json:"planned,omitempty"`
	Total   int64 `json:"total,omitempty"`
	Chunks  int   `json:"chunks,omitempty"`
	// Ending is why a batch stops before its lines are all done
	// (StatusCancelled, StatusExpired), set by the finalize that closes it.
	Ending string `json:"ending,omitempty"`
	// Closed is set once a cancel or the expiry has closed the chunks and
	// listed the NeverRun lines that never ran in the object Closing (nil
	// when there were none).
	Closed   bool        `json:"closed,omitempty"`
	Closing  *files.Part `json:"closing,omitempty"`
	NeverRun int64       `json:"never_run,omitempty"`

	// Native is the provider's batch of a native batch (native.go); nil
	// for a batch the engine runs.
	Native *nativeDoc `json:"native,omitempty"`
	// Reserve is what the batch holds of its budgets (reserve.go); nil
	// when it reserved nothing.
	Reserve *reserveDoc `json:"reserve,omitempty"`
}

// state is a batch record as read: its body, status, counters and version.
type state struct {
	doc      batchDoc
	status   string
	counters map[string]int64
	version  int64
}

// expiresAt is the batch's expiry.
func (st *state) expiresAt() time.Time { return time.Unix(0, st.doc.Expires) }

// runnable reports whether the batch's lines may start now: it is in
// progress, not closing, and not past its expiry.
func (st *state) runnable(now time.Time) bool {
	return st.status == StatusInProgress && st.doc.Ending == "" && now.Before(st.expiresAt())
}

// record renders the batch record.
func (st *state) record() (store.Record, error) {
	body, err := json.Marshal(st.doc)
	if err != nil {
		return store.Record{}, fmt.Errorf("batches: encode %s: %w", st.doc.ID, err)
	}
	d := st.doc
	rec := store.Record{
		Key:    batchKey(d.ID),
		GSI1:   store.IndexKey{PK: ownerPK(d.Team), SK: sortkey.Time(time.Unix(0, d.Created)) + "#" + d.ID},
		Status: st.status,
		Body:   body,
	}
	switch {
	case terminal(st.status):
	case d.Native != nil:
		rec.GSI2 = store.IndexKey{PK: activeNativePK, SK: sortkey.Time(time.Unix(0, d.Created)) + "#" + d.ID}
	default:
		rec.GSI2 = store.IndexKey{PK: activePK, SK: sortkey.Time(time.Unix(0, d.Expires)) + "#" + d.ID}
	}
	return rec, nil
}

func decodeState(rec store.Record) (*state, error) {
	st := &state{status: rec.Status, counters: rec.Counters, version: rec.Version}
	if err := json.Unmarshal(rec.Body, &st.doc); err != nil {
		return nil, fmt.Errorf("batches: decode %s: %w", rec.Key.PK, err)
	}
	if st.counters == nil {
		st.counters = map[string]int64{}
	}
	return st, nil
}

// errNoBatch is a batch that does not exist.
var errNoBatch = errors.New("batches: no such batch")

// load reads batch id.
func (s *Service) load(ctx context.Context, id string) (*state, error) {
	if !ids.Valid(ids.Batch, id) {
		return nil, errNoBatch
	}
	rec, err := s.deps.Records.Get(ctx, batchKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoBatch
	}
	if err != nil {
		return nil, fmt.Errorf("batches: get %s: %w", id, err)
	}
	return decodeState(rec)
}

// change applies f to batch id and writes it back, if f says so, on the
// version it read: a write in between (a cancel, another worker) makes it
// read again and reapply f. f returns false to leave the batch as it is.
// The write that ends the batch also frees its input file (in the same
// transaction). It returns the batch as last read or written.
func (s *Service) change(ctx context.Context, id string, f func(st *state) (bool, error)) (*state, error) {
	for {
		st, err := s.load(ctx, id)
		if err != nil {
			return nil, err
		}
		was := st.status
		write, err := f(st)
		if err != nil || !write {
			return st, err
		}
		rec, err := st.record()
		if err != nil {
			return nil, err
		}
		writes := []store.Write{{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{Version: st.version}}}
		var release []store.Write
		if terminal(st.status) && !terminal(was) {
			writes = append(writes, store.Write{Kind: store.WriteDelete, Record: store.Record{Key: inputKey(st.doc.InputFileID, id)}})
			// The batch's end releases what its lines left of its
			// reservation: the same write, so exactly once.
			release = st.release()
			writes = append(writes, release...)
			if rec, err = st.record(); err != nil {
				return nil, err
			}
			writes[0].Record = rec
		}
		err = s.deps.Records.Transact(ctx, writes)
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("batches: update %s: %w", id, err)
		}
		st.version++
		if len(release) > 0 {
			s.released(st)
		}
		return st, nil
	}
}

// object renders the Batch object.
func (st *state) object() Batch {
	d := st.doc
	ctr := st.withLive()
	b := Batch{
		ID: d.ID, Object: "batch", Endpoint: d.Endpoint, InputFileID: d.InputFileID,
		CompletionWindow: d.Window, Status: st.status, CreatedAt: seconds(d.Created),
		ExpiresAt: optSeconds(d.Expires), InProgressAt: optSeconds(d.InProgress),
		FinalizingAt: optSeconds(d.Finalizing), CompletedAt: optSeconds(d.Completed),
		FailedAt: optSeconds(d.Failed), ExpiredAt: optSeconds(d.Expired),
		CancellingAt: optSeconds(d.Cancelling), CancelledAt: optSeconds(d.Cancelled),
		OutputFileID: optString(d.OutputFileID), ErrorFileID: optString(d.ErrorFileID),
		Metadata: d.Metadata,
		RequestCounts: RequestCounts{
			Total: d.Total, Completed: ctr[ctrCompleted], Failed: ctr[ctrFailed],
		},
		Usage: Usage{
			InputTokens:         ctr[ctrInput],
			InputTokensDetails:  InputTokensDetails{CachedTokens: ctr[ctrCached]},
			OutputTokens:        ctr[ctrOutput],
			OutputTokensDetails: OutputTokensDetails{ReasoningTokens: ctr[ctrReasoning]},
			TotalTokens:         ctr[ctrTotal],
		},
		ResponseCost: spend.USD(ctr[ctrCost]),
	}
	if r := d.Reserve; r != nil && !r.Released {
		left := spend.USD(max(r.NUSD-ctr[ctrSettled], 0))
		b.ReservedCost = &left
	}
	if len(d.Errors) > 0 {
		b.Errors = &Errors{Object: "list", Data: d.Errors}
	}
	if d.Native != nil {
		b.RequestCounts, b.Usage = d.Native.Counts, d.Native.Usage
		b.ResponseCost = spend.USD(d.Native.Cost)
	}
	return b
}

func seconds(ns int64) int64 { return time.Unix(0, ns).Unix() }

func optSeconds(ns int64) *int64 {
	if ns == 0 {
		return nil
	}
	s := seconds(ns)
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// chunkDoc is a chunk record's body: a byte range of the input file, the
// runs that saved lines of it (pieces), and the lease of the run going on.
type chunkDoc struct {
	N      int     `json:"n"`
	Off    int64   `json:"off"`
	End    int64   `json:"end"`
	First  int     `json:"first"` // the file's line number of its first line
	Lines  int     `json:"lines"` // request lines in it
	Pieces []piece `json:"pieces,omitempty"`
	// Epoch counts the leases taken; a run's objects are named by its
	// epoch, so a run that died can be cleaned up after by the next.
	Epoch int64  `json:"epoch"`
	Lease *lease `json:"lease,omitempty"`
}

// piece is what one run of a chunk saved: its result objects (absent when
// it wrote no line of that kind) and which of the chunk's lines it did.
type piece struct {
	Epoch int64       `json:"epoch"`
	Out   *files.Part `json:"out,omitempty"`
	Err   *files.Part `json:"err,omitempty"`
	Done  bitmap      `json:"done"`
}

// lease is a run's claim on a chunk: until Until (Unix milliseconds), no
// other run starts its lines.
type lease struct {
	Epoch    int64  `json:"epoch"`
	Instance string `json:"instance"` // the process that holds it
	Until    int64  `json:"until_ms"`
	// Shown is the progress the run has added to the batch's live
	// counters (progress.go).
	Shown progress `json:"shown,omitempty"`
}

// chunk is a chunk record as read.
type chunk struct {
	doc     chunkDoc
	status  string
	version int64
}

// done is the union of the lines its pieces did.
func (c *chunk) done() bitmap {
	b := newBitmap(c.doc.Lines)
	for _, p := range c.doc.Pieces {
		b.or(p.Done)
	}
	return b
}

// committed reports whether the run of epoch saved a piece of c.
func (c *chunk) committed(epoch int64) bool {
	for _, p := range c.doc.Pieces {
		if p.Epoch == epoch {
			return true
		}
	}
	return false
}

func (c *chunk) record(batchID string) (store.Record, error) {
	body, err := json.Marshal(c.doc)
	if err != nil {
		return store.Record{}, fmt.Errorf("batches: encode chunk %d of %s: %w", c.doc.N, batchID, err)
	}
	return store.Record{Key: chunkKey(batchID, c.doc.N), Status: c.status, Body: body}, nil
}

func decodeChunk(rec store.Record) (*chunk, error) {
	c := &chunk{status: rec.Status, version: rec.Version}
	if err := json.Unmarshal(rec.Body, &c.doc); err != nil {
		return nil, fmt.Errorf("batches: decode %s/%s: %w", rec.Key.PK, rec.Key.SK, err)
	}
	return c, nil
}

// errNoChunk is a chunk that does not exist.
var errNoChunk = errors.New("batches: no such chunk")

func (s *Service) loadChunk(ctx context.Context, batchID string, n int) (*chunk, error) {
	rec, err := s.deps.Records.Get(ctx, chunkKey(batchID, n))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoChunk
	}
	if err != nil {
		return nil, fmt.Errorf("batches: get chunk %d of %s: %w", n, batchID, err)
	}
	return decodeChunk(rec)
}

// chunks reads every chunk of a batch, in order.
func (s *Service) chunks(ctx context.Context, batchID string) ([]*chunk, error) {
	var out []*chunk
	q := store.Query{PK: batchPrefix + batchID, SKPrefix: chunkPrefix, Limit: 100}
	for {
		page, err := s.deps.Records.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("batches: chunks of %s: %w", batchID, err)
		}
		for _, rec := range page.Records {
			c, err := decodeChunk(rec)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if !page.More || len(page.Records) == 0 {
			return out, nil
		}
		q.After = page.Records[len(page.Records)-1].Key.SK
	}
}

// Objects of a batch: its chunks' results, one per run (epoch) and kind,
// and the lines that never ran. All under batches/, a file prefix of the
// deployment (pkg/deploy.FilePrefixes): the output and error files own them
// once they exist.
func resultKey(batchID string, n int, epoch int64, kind string) string {
	return fmt.Sprintf("batches/%s/%06d-%d.%s.jsonl", batchID, n, epoch, kind)
}

func neverRunKey(batchID string) string { return "batches/" + batchID + "/never-run.jsonl" }

// Result kinds.
const (
	kindOut = "out"
	kindErr = "err"
)

// wakeup tells whoever waits in this process that a chunk record changed
// (a commit, a lease given back), so a wait ends at once instead of at its
// next poll.
type wakeup struct {
	mu sync.Mutex
	ch chan struct{}
}

func newWakeup() wakeup { return wakeup{ch: make(chan struct{})} }

func (w *wakeup) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *wakeup) notify() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// notFound is the 404 of a batch id p may not see.
func notFound(id string) error {
	return api.NotFound("No such batch: %s", id)
}
