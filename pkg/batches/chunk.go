package batches

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// errLost is a lease another run took, or a chunk a finalize closed, while
// this run was not looking.
var errLost = errors.New("batches: the chunk's lease was lost")

// commitAttempts bounds the retries of a commit that lost to concurrent
// writers (other chunks adding to the batch at the same moment).
const commitAttempts = 5

// runChunk handles a chunk message: unless the chunk is done or closed, or
// its batch no longer runs, it takes the chunk's lease — waiting while
// another run holds it, so a message delivered twice never calls a provider
// twice for a line — and runs it.
func (s *Service) runChunk(ctx context.Context, msg message) error {
	var r *chunkRun
	err := s.waitFor(ctx, s.runDeadline(ctx), func() (bool, time.Duration, error) {
		st, err := s.load(ctx, msg.Batch)
		if err != nil {
			return false, 0, err
		}
		c, err := s.loadChunk(ctx, msg.Batch, msg.Chunk)
		if err != nil {
			return false, 0, err
		}
		switch {
		case msg.End != 0 && (msg.Off != c.doc.Off || msg.End != c.doc.End):
			slog.WarnContext(ctx, "batches: dropped a chunk message whose range is not its chunk's", "batch", msg.Batch, "chunk", msg.Chunk)
			return true, 0, nil
		case c.status == chunkDone:
			// Its commit may have died before queueing the finalize.
			return true, 0, s.maybeFinalize(ctx, st)
		case c.status == chunkClosed || !st.runnable(s.now()):
			return true, 0, nil // the finalize that closes the batch has it
		}
		if l := c.doc.Lease; l != nil && s.live(l) {
			return false, time.Until(time.UnixMilli(l.Until)) + time.Second, nil
		}
		r, err = s.acquire(ctx, st, c)
		if errors.Is(err, errLost) {
			return false, 0, nil // another run took it first: look again
		}
		return err == nil, 0, err
	})
	if err != nil || r == nil {
		return err
	}
	return r.run(ctx)
}

// live reports whether a lease still holds: it has not run out, and (when
// this process is the store's only one) this process took it.
func (s *Service) live(l *lease) bool {
	if s.opts.SingleProcess && l.Instance != s.instance {
		return false
	}
	return s.now().UnixMilli() < l.Until
}

// acquire takes chunk c's lease with a write conditional on the version
// read: of two runs that try at once, one gets it (errLost for the other).
// The objects of a run that held the lease before and neither committed nor
// gave it back (it died) are removed.
func (s *Service) acquire(ctx context.Context, st *state, c *chunk) (*chunkRun, error) {
	id := st.doc.ID
	dead := c.doc.Lease
	c.doc.Epoch++
	c.doc.Lease = &lease{Epoch: c.doc.Epoch, Instance: s.instance, Until: s.now().Add(s.opts.Lease).UnixMilli()}
	rec, err := c.record(id)
	if err != nil {
		return nil, err
	}
	writes := append([]store.Write{{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{Version: c.version, StatusIn: []string{chunkPending}}}},
		unshow(&st.doc, dead)...)
	err = s.deps.Records.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return nil, errLost
	}
	if err != nil {
		return nil, fmt.Errorf("batches: lease chunk %d of %s: %w", c.doc.N, id, err)
	}
	c.version++
	if dead != nil {
		for _, kind := range []string{kindOut, kindErr} {
			_ = s.deps.Blobs.Delete(ctx, resultKey(id, c.doc.N, dead.Epoch, kind)) // best effort: leftovers are unlisted bytes
		}
	}
	r := &chunkRun{s: s, batch: st, c: c, stop: make(chan struct{}), quit: make(chan struct{}), prior: c.done(), mine: newBitmap(c.doc.Lines)}
	putCtx := context.WithoutCancel(ctx)
	r.out = newStream(putCtx, s.deps.Blobs, resultKey(id, c.doc.N, c.doc.Epoch, kindOut))
	r.errs = newStream(putCtx, s.deps.Blobs, resultKey(id, c.doc.N, c.doc.Epoch, kindErr))
	return r, nil
}

// chunkRun is one run of a chunk, from taking its lease to committing what
// it did.
type chunkRun struct {
	s     *Service
	batch *state
	c     *chunk // the chunk as leased; c.version follows the lease's renewals
	prior bitmap // lines earlier runs did

	p      auth.Principal
	keyErr error // the creating key cannot be used: every line fails with it
	op     modelcall.Operation

	lineCtx    context.Context
	cancel     context.CancelFunc
	stop       chan struct{} // closed: start no more lines
	stopOnce   sync.Once
	stopReason string
	quit       chan struct{} // closed: the monitor ends
	lines      sync.WaitGroup
	index      int // lines read so far

	out, errs *stream

	mu        sync.Mutex
	mine      bitmap // lines this run did
	completed int64
	failed    int64
	usage     oai.Usage
	cost      int64 // nano-USD the lines' calls cost, as priced
	fatal     error // the run cannot commit (an object write failed, the lease was lost)
}

// Why a run stops starting lines.
const (
	stopClosing  = "the batch is closing"
	stopTime     = "the run's time is up"
	stopShutdown = "the worker is stopping"
	stopFailed   = "the run failed"
)

// run reads the chunk's range of the input, runs each line not yet done
// with at most Options.Concurrency lines at once in the process, and
// commits: the result objects first, then, in one transaction, the chunk's
// progress (or completion) with the lease given back and the lines' counts
// and usage added to the batch.
func (r *chunkRun) run(ctx context.Context) (err error) {
	s, id, c := r.s, r.batch.doc.ID, r.c
	log := slog.With("batch", id, "chunk", c.doc.N, "epoch", c.doc.Epoch)
	// The batch may have changed while the lease was being taken.
	if st, err := s.load(ctx, id); err != nil || !st.runnable(s.now()) {
		r.release(ctx)
		return err
	}
	f, err := s.deps.Files.Recorded(ctx, r.batch.doc.InputFileID)
	if err != nil {
		r.release(ctx)
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			log.ErrorContext(ctx, "batches: the input file is gone; the chunk's lines cannot run")
			return nil
		}
		return err
	}
	r.op = s.deps.Operations[r.batch.doc.Endpoint]
	if r.op == nil {
		r.release(ctx)
		return fmt.Errorf("batches: no operation for %s", r.batch.doc.Endpoint)
	}
	r.p, r.keyErr = s.principal(ctx, r.batch.doc)
	if r.keyErr != nil && api.AsError(r.keyErr).Status != http.StatusUnauthorized {
		r.release(ctx)
		return r.keyErr
	}

	deadline := s.runDeadline(ctx)
	r.lineCtx, r.cancel = context.WithDeadline(ctx, deadline)
	defer r.cancel()
	// Lines started stop starting a quarter of the run before its end (at
	// most 2 minutes), so those in flight can finish.
	drain := min(time.Until(deadline)/4, 2*time.Minute)
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); r.monitor(ctx, deadline.Add(-drain)) }()

	rc, err := s.deps.Files.Open(ctx, f, c.doc.Off, c.doc.End-c.doc.Off)
	if err == nil {
		v := batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, OnLine: r.dispatch})
		_, err = io.Copy(v, rc)
		if err == nil {
			err = v.Close()
		}
		rc.Close()
		if errors.Is(err, errStopped) {
			err = nil
		}
	}
	if err != nil {
		r.fail(fmt.Errorf("batches: read chunk %d of %s: %w", c.doc.N, id, err))
	}
	r.lines.Wait()
	close(r.quit)
	<-monitorDone
	return r.commit(ctx, log)
}

// errStopped ends reading the input when the run stops starting lines.
var errStopped = errors.New("batches: the run stopped")

// dispatch starts one line, unless an earlier run did it, once the process
// has room for it. It is the validator's OnLine: l.Body is copied, since
// the validator reuses its buffer.
func (r *chunkRun) dispatch(l batchinput.Line) error {
	i := r.index
	r.index++
	if r.prior.has(i) {
		return nil
	}
	select {
	case <-r.stop:
		return errStopped
	case r.s.sem <- struct{}{}:
	}
	if _, closing := r.s.closing.Load(r.batch.doc.ID); closing {
		r.halt(stopClosing)
	}
	select {
	case <-r.stop: // stopped while waiting for room
		<-r.s.sem
		return errStopped
	default:
	}
	body := append([]byte(nil), l.Body...)
	customID := l.CustomID
	r.lines.Go(func() {
		defer func() { <-r.s.sem }()
		r.exec(i, customID, body)
	})
	return nil
}

// exec runs line i as an HTTP call of the batch's key would run: admitted
// against its limits, through the endpoint's operation. A 429 (a limit of
// the key, its team or every deployment, after the router's own retries) is
// waited out and tried again, as long as the run goes on: a line only fails
// for what its own request would fail.
func (r *chunkRun) exec(i int, customID string, body []byte) {
	if r.keyErr != nil {
		r.failLine(i, customID, api.NewRequestID(), r.keyErr)
		return
	}
	if streams(body) {
		r.failLine(i, customID, api.NewRequestID(), api.InvalidValue("stream",
			"A batch request cannot stream: remove 'stream' or set it to false."))
		return
	}
	lineCtx, span := r.s.deps.Tracer.StartBatchLine(r.lineCtx, r.batch.doc.ID, customID)
	defer span.End()
	tally := &spend.BatchLine{Reserved: r.batch.ownReserve()}
	lineCtx = spend.WithBatchLine(lineCtx, tally)
	defer r.addCost(tally)
	backoff := time.Second
	for {
		reqID := api.NewRequestID()
		ctx := api.WithRequestID(logevent.WithBatchLine(lineCtx, r.batch.doc.ID, customID), reqID)
		res, err := modelcall.Run(ctx, r.s.deps.Admit, r.p, r.op, body)
		if err == nil {
			r.answer(i, customID, reqID, res)
			return
		}
		if r.lineCtx.Err() != nil {
			return // the run ended under it: the line did not run
		}
		e := api.AsError(err)
		if e.Status != http.StatusTooManyRequests {
			r.failLine(i, customID, reqID, e)
			return
		}
		wait := e.RetryAfter
		if wait <= 0 {
			wait, backoff = backoff, min(2*backoff, 30*time.Second)
		}
		if !r.pause(wait) {
			return
		}
	}
}

// pause waits d, unless the run stops first (false).
func (r *chunkRun) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stop:
	case <-r.lineCtx.Done():
	}
	return false
}

// streams reports whether a request body asks to stream (stream: true).
func streams(body []byte) bool {
	stream := false
	_ = jsonscan.Members(body, func(name, value []byte) error {
		if string(name) == "stream" {
			stream = string(value) == "true"
		}
		return nil
	})
	return stream
}

// answer writes an answered line to the output object.
func (r *chunkRun) answer(i int, customID, reqID string, res *modelcall.Result) {
	lw := r.s.newLineWriter(r.out, customID, reqID)
	_, err := res.WriteTo(lw)
	if err == nil && res.Streamed {
		err = errors.New("the operation answered with a stream")
	}
	switch {
	case err != nil && lw.spilled:
		// Part of the line is in the object already: the object is lost.
		lw.end()
		r.fail(fmt.Errorf("batches: an answer of %d bytes was cut while it was written: %w", lw.written, err))
	case err != nil && r.lineCtx.Err() != nil:
		lw.discard() // the run ended under it: the line did not run
	case err != nil:
		lw.discard()
		r.failLine(i, customID, reqID, api.Upstream(err, "The provider's answer was cut off before it ended."))
	default:
		if err := lw.finish(); err != nil {
			if lw.spilled {
				r.fail(err)
				return
			}
			r.failLine(i, customID, reqID, api.Upstream(err, "The provider's answer is not a JSON object."))
			return
		}
		r.mark(i, true, res.Usage())
	}
}

// failLine writes line i, which ran and failed with err, to the error
// object.
func (r *chunkRun) failLine(i int, customID, reqID string, err error) {
	if werr := r.errs.write(errorLine(customID, reqID, api.AsError(err))); werr != nil {
		r.fail(werr)
		return
	}
	r.mark(i, false, oai.Usage{})
}

// addCost adds what a line's calls cost to the run's, whether or not the
// line ran to its end: the provider was paid.
func (r *chunkRun) addCost(l *spend.BatchLine) {
	if c := l.NanoCost(); c != 0 {
		r.mu.Lock()
		r.cost += c
		r.mu.Unlock()
	}
}

func (r *chunkRun) mark(i int, ok bool, u oai.Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mine.set(i)
	if ok {
		r.completed++
		r.usage.Add(u)
	} else {
		r.failed++
	}
}

// fail records why the run cannot commit, and stops it: lines in flight
// are cancelled, their results would be thrown away.
func (r *chunkRun) fail(err error) {
	r.mu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.mu.Unlock()
	r.halt(stopFailed)
	r.cancel()
}

// halt stops starting lines.
func (r *chunkRun) halt(reason string) {
	r.stopOnce.Do(func() {
		r.stopReason = reason
		close(r.stop)
	})
}

// monitor keeps the lease, and stops the run when its batch closes (a
// cancel, the expiry), when its time is up (at dispatchEnd), when the
// worker stops, or when the lease is lost.
func (r *chunkRun) monitor(ctx context.Context, dispatchEnd time.Time) {
	s := r.s
	renew := time.NewTicker(s.opts.Lease / 4)
	defer renew.Stop()
	status := time.NewTicker(s.opts.StatusEvery)
	defer status.Stop()
	show := time.NewTicker(s.opts.ProgressEvery)
	defer show.Stop()
	end := time.NewTimer(time.Until(dispatchEnd))
	defer end.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-ctx.Done():
			r.halt(stopShutdown)
			return
		case <-end.C:
			r.halt(stopTime)
		case <-status.C:
			if st, err := s.load(ctx, r.batch.doc.ID); err == nil && !st.runnable(s.now()) {
				r.halt(stopClosing)
			}
		case <-show.C:
			if err := r.publish(ctx); errors.Is(err, errLost) {
				r.fail(err)
			} else if err != nil {
				slog.WarnContext(ctx, "batches: could not show a chunk's progress", "batch", r.batch.doc.ID, "chunk", r.c.doc.N, "error", err)
			}
		case <-renew.C:
			if err := r.renew(ctx); errors.Is(err, errLost) {
				r.fail(err)
			} else if err != nil {
				slog.WarnContext(ctx, "batches: could not renew a chunk's lease", "batch", r.batch.doc.ID, "chunk", r.c.doc.N, "error", err)
			}
		}
	}
}

// renew extends the lease, on the version this run last wrote.
func (r *chunkRun) renew(ctx context.Context) error {
	r.c.doc.Lease.Until = r.s.now().Add(r.s.opts.Lease).UnixMilli()
	rec, err := r.c.record(r.batch.doc.ID)
	if err != nil {
		return err
	}
	err = r.s.deps.Records.Update(ctx, rec, store.Cond{Version: r.c.version})
	if errors.Is(err, store.ErrConditionFailed) {
		return errLost
	}
	if err != nil {
		return err
	}
	r.c.version++
	return nil
}

// release gives the lease back, having saved nothing (and taking back the
// progress it showed).
func (r *chunkRun) release(ctx context.Context) {
	shown := r.c.doc.Lease
	r.c.doc.Lease = nil
	rec, err := r.c.record(r.batch.doc.ID)
	if err == nil {
		writes := append([]store.Write{{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{Version: r.c.version}}},
			unshow(&r.batch.doc, shown)...)
		err = r.s.deps.Records.Transact(context.WithoutCancel(ctx), writes)
	}
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		slog.WarnContext(ctx, "batches: could not give a chunk's lease back; it runs out", "batch", r.batch.doc.ID, "chunk", r.c.doc.N, "error", err)
	}
	r.s.wake.notify()
}

// discard throws the run's objects away and gives the lease back.
func (r *chunkRun) discard(ctx context.Context, cause error) {
	r.out.abort(cause)
	r.errs.abort(cause)
	r.release(ctx)
}

// commit saves what the run did. Its objects are stored first; then one
// transaction records them in the chunk as a piece (with the lines it did)
// and gives the lease back — conditional on the lease's version, so a run
// whose lease was taken over (or whose chunk a finalize closed) commits
// nothing and removes its objects — and adds the lines' counts and tokens
// to the batch. The run that completes the chunk counts it done and, if it
// was the last, queues the finalize; a run that stopped for time queues
// the rest of the chunk.
func (r *chunkRun) commit(ctx context.Context, log *slog.Logger) error {
	s, id, c := r.s, r.batch.doc.ID, r.c
	ctx = context.WithoutCancel(ctx) // a stopping worker still saves what it did
	if r.fatal != nil {
		r.discard(ctx, r.fatal)
		if errors.Is(r.fatal, errLost) {
			return nil // the run that took over has the chunk
		}
		return r.fatal
	}
	out, err := r.out.close()
	errp, err2 := r.errs.close()
	if err = errors.Join(err, err2); err != nil {
		r.discard(ctx, err)
		return err
	}
	n := r.mine.count()
	if n == 0 {
		r.release(ctx)
		return r.after(ctx, false)
	}
	done := c.done()
	done.or(r.mine)
	complete := done.count() == c.doc.Lines
	if !complete && len(c.doc.Pieces) >= maxPieces-1 {
		// No room for another piece: only a run that completes the chunk
		// may save.
		err := fmt.Errorf("batches: chunk %d of %s has %d pieces; a run must finish it", c.doc.N, id, len(c.doc.Pieces))
		r.discard(ctx, err)
		return err
	}
	c.doc.Pieces = append(c.doc.Pieces, piece{Epoch: c.doc.Epoch, Out: out, Err: errp, Done: r.mine})
	shown := c.doc.Lease.Shown
	c.doc.Lease = nil
	c.status = chunkPending
	if complete {
		c.status = chunkDone
	}
	rec, err := c.record(id)
	if err != nil {
		r.discard(ctx, err)
		return err
	}
	adds := map[string]int64{}
	for ctr, v := range r.snapshot() {
		if v != 0 {
			adds[ctr] = v
		}
	}
	liveAdds(adds, shown, nil) // counted now: no longer live
	if complete {
		adds[ctrChunks] = 1
	}
	writes := append([]store.Write{
		{Kind: store.WriteUpdate, Record: rec, Cond: store.Cond{Version: c.version}},
		{Kind: store.WriteAdd, Record: store.Record{Key: batchKey(id), Counters: adds}, Cond: store.Cond{Exists: true}},
	}, r.batch.doc.reserveAdds(shown[ctrSettled]-r.settled())...) // the lines' shares given back
	for attempt := 1; ; attempt++ {
		err = s.deps.Records.Transact(ctx, writes)
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrConditionFailed) {
			// Lost to concurrent writers, or the lease is gone — or the
			// write went through and only its answer was lost (a retried
			// request finds its own write): the chunk tells which.
			now, lerr := s.loadChunk(ctx, id, c.doc.N)
			if lerr == nil && now.committed(c.doc.Epoch) {
				log.InfoContext(ctx, "batches: a commit answered as failed had gone through")
				err = nil
				break
			}
			if lerr == nil && now.version != c.version {
				r.out.abort(errLost)
				r.errs.abort(errLost)
				log.InfoContext(ctx, "batches: a run lost its chunk before it committed; its results are discarded")
				return nil
			}
		}
		if attempt == commitAttempts {
			r.discard(ctx, err)
			return fmt.Errorf("batches: commit chunk %d of %s: %w", c.doc.N, id, err)
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
	s.wake.notify()
	log.DebugContext(ctx, "batches: chunk committed", "lines", n, "complete", complete)
	return r.after(ctx, complete)
}

// after queues what follows a commit: the finalize when the chunk was the
// batch's last, the rest of the chunk when the run stopped for time.
// A worker that is stopping leaves its message for the next start.
func (r *chunkRun) after(ctx context.Context, complete bool) error {
	s, id := r.s, r.batch.doc.ID
	if complete {
		st, err := s.load(ctx, id)
		if err != nil {
			return err
		}
		return s.maybeFinalize(ctx, st)
	}
	switch r.stopReason {
	case stopShutdown:
		return errors.New("batches: the worker stopped before the chunk was done")
	case stopClosing:
		return nil
	}
	st, err := s.load(ctx, id)
	if err != nil || !st.runnable(s.now()) {
		return err
	}
	c := r.c.doc
	return s.send(ctx, message{Kind: kindChunk, Batch: id, Chunk: c.N, Off: c.Off, End: c.End})
}

// maybeFinalize queues the batch's finalize once all its chunks are done.
func (s *Service) maybeFinalize(ctx context.Context, st *state) error {
	if st.status != StatusInProgress || st.counters[ctrChunks] < int64(st.doc.Chunks) {
		return nil
	}
	return s.send(ctx, message{Kind: kindFinalize, Batch: st.doc.ID})
}
