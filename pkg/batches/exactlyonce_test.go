package batches_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Every input line appears exactly once across the output and error files
// whatever happens to the worker: the tests here deliver messages twice, in
// a row and at once, let a message's visibility lapse while its first run
// goes on, fail an object's write midway, and leave a chunk leased by a
// run that died. (Killing the local process midway is in
// process_test.go.) Each also checks the provider was called once per
// line wherever no run was lost.

// work is a message of the work queue, decoded.
type work struct {
	Kind  string `json:"kind"`
	Chunk int    `json:"chunk"`
}

func decodeWork(t testing.TB, m store.Message) work {
	var w work
	if err := json.Unmarshal(m.Body, &w); err != nil {
		t.Fatalf("work message %s: %v", m.Body, err)
	}
	return w
}

// receive takes n messages from the work queue (a test without the worker
// job drives the queue itself).
func receive(t testing.TB, g *gatewaytest.Gateway, n int) []store.Message {
	t.Helper()
	var out []store.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d work messages, want %d", len(out), n)
		}
		msgs, err := g.Backend.Work.Receive(context.Background(), n-len(out), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msgs...)
	}
	return out
}

// handle runs one message through the worker, as a consumer would, acking
// it when the worker is done with it.
func handle(t testing.TB, g *gatewaytest.Gateway, m store.Message) error {
	err := g.Services.Batches.Work(context.Background(), m)
	if err == nil {
		g.Backend.Work.Ack(context.Background(), m)
	}
	return err
}

// drain handles messages until batch id has ended.
func drain(t testing.TB, g *gatewaytest.Gateway, key, id string) batches.Batch {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b := getBatch(t, g, key, id); b.Status == batches.StatusCompleted || b.Status == batches.StatusCancelled ||
			b.Status == batches.StatusExpired || b.Status == batches.StatusFailed {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s has not ended", id)
		}
		msgs, err := g.Backend.Work.Receive(context.Background(), 10, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := handle(t, g, m); err != nil {
				t.Fatalf("work %s: %v", m.Body, err)
			}
		}
	}
}

// chunkReads counts reads of one chunk's record.
type chunkReads struct {
	store.Records
	key   atomic.Pointer[store.Key]
	reads atomic.Int64
}

func (c *chunkReads) Get(ctx context.Context, k store.Key) (store.Record, error) {
	if p := c.key.Load(); p != nil && *p == k {
		c.reads.Add(1)
	}
	return c.Records.Get(ctx, k)
}

func TestAMessageDeliveredTwiceRunsItsLinesOnce(t *testing.T) {
	var reads *chunkReads
	runEach(t, func(u *upstream) gatewaytest.Options {
		opts := options(u)
		opts.Jobs = nil // the test is the consumer
		opts.Backend = func(b *store.Backend) {
			reads = &chunkReads{Records: b.Records}
			b.Records = reads
		}
		return opts
	}, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "blocked", 3, func(i int) string { return "block " + run + strconv.Itoa(i) })
		lines = append(lines, embeddingLines("titan", "plain", 3, func(i int) string { return run + " plain " + strconv.Itoa(i) })...)
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		if err := handle(t, g, receive(t, g, 1)[0]); err != nil { // the plan
			t.Fatal(err)
		}
		chunks := map[int]store.Message{}
		for _, m := range receive(t, g, 2) {
			chunks[decodeWork(t, m).Chunk] = m
		}

		// Twice in a row: the second finds the chunk done.
		for range 2 {
			if err := g.Services.Batches.Work(context.Background(), chunks[1]); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range lines[3:] {
			if n := u.calls(l.Body["input"].(string)); n != 1 {
				t.Errorf("%s: %d provider calls", l.CustomID, n)
			}
		}

		// Twice at once: the second waits on the first's lease.
		first := make(chan error, 1)
		go func() { first <- g.Services.Batches.Work(context.Background(), chunks[0]) }()
		for range 3 {
			<-u.blocked // the first run's three lines are at the provider
		}
		k := batches.ChunkKey(b.ID, 0)
		reads.key.Store(&k)
		second := make(chan error, 1)
		go func() { second <- g.Services.Batches.Work(context.Background(), chunks[0]) }()
		for reads.reads.Load() < 3 { // the second run looks at the lease again and again
			select {
			case err := <-second:
				t.Fatalf("the second delivery returned (%v) while the first ran", err)
			case <-time.After(time.Millisecond):
			}
		}
		u.open()
		if err := errors.Join(<-first, <-second); err != nil {
			t.Fatal(err)
		}
		for _, l := range lines[:3] {
			if n := u.calls(l.Body["input"].(string)); n != 1 {
				t.Errorf("%s: %d provider calls", l.CustomID, n)
			}
		}
		b = drain(t, g, key, b.ID)
		if b.Status != batches.StatusCompleted || b.RequestCounts != (batches.RequestCounts{Total: 6, Completed: 6}) {
			t.Errorf("%s %+v", b.Status, b.RequestCounts)
		}
		collect(t, g, key, b, lines)
	})
}

// lapsing lets the test see the messages the consumer receives.
type lapsing struct {
	store.Queue
	got chan store.Message
}

func (q *lapsing) Receive(ctx context.Context, max int, wait time.Duration) ([]store.Message, error) {
	msgs, err := q.Queue.Receive(ctx, max, wait)
	for _, m := range msgs {
		q.got <- m
	}
	return msgs, err
}

func TestAVisibilityLapseWhileTheFirstRunGoesOnRunsItsLinesOnce(t *testing.T) {
	var q *lapsing
	runEach(t, func(u *upstream) gatewaytest.Options {
		opts := options(u)
		opts.Backend = func(b *store.Backend) {
			q = &lapsing{Queue: b.Work, got: make(chan store.Message, 100)}
			b.Work = q
		}
		return opts
	}, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "blocked", 2, func(i int) string { return "block " + run + strconv.Itoa(i) })
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		var chunk store.Message
		for chunk.ID == "" {
			if m := <-q.got; decodeWork(t, m).Kind == "chunk" {
				chunk = m
			}
		}
		<-u.blocked
		<-u.blocked
		// The message comes back while its first run is still at the
		// provider, as if that run had failed to keep it hidden.
		if err := q.Queue.Extend(context.Background(), chunk, 0); err != nil {
			t.Fatal(err)
		}
		for again := false; !again; {
			m := <-q.got
			again = m.ID == chunk.ID
		}
		u.open()
		b = waitFor(t, g, key, b.ID, batches.StatusCompleted)
		collect(t, g, key, b, lines)
		for _, l := range lines {
			if n := u.calls(l.Body["input"].(string)); n != 1 {
				t.Errorf("%s: %d provider calls", l.CustomID, n)
			}
		}
	})
}

// failingBlobs fails the first write of a chunk's output object after
// some of its bytes.
type failingBlobs struct {
	store.Blobs
	failed atomic.Bool
}

var errDiskGone = errors.New("test: the disk went away")

func (f *failingBlobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if strings.HasSuffix(key, ".out.jsonl") && f.failed.CompareAndSwap(false, true) {
		return f.Blobs.Put(ctx, key, &cutReader{r: r, left: 100})
	}
	return f.Blobs.Put(ctx, key, r)
}

// cutReader yields left bytes of r, then fails.
type cutReader struct {
	r    io.Reader
	left int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errDiskGone
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

func TestAnObjectWriteFailingMidwayLosesNoLine(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	var blobs *failingBlobs
	opts.Backend = func(b *store.Backend) {
		blobs = &failingBlobs{Blobs: b.Blobs}
		b.Blobs = blobs
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "l", 7, func(i int) string { return run + " text " + strconv.Itoa(i) })
		lines = append(lines, embeddingLines("emb", "bad", 1, func(int) string { return "fail-400 " + run })...)
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		b = waitFor(t, g, key, b.ID, batches.StatusCompleted)
		if !blobs.failed.Load() {
			t.Fatal("no write failed")
		}
		if b.RequestCounts != (batches.RequestCounts{Total: 8, Completed: 7, Failed: 1}) {
			t.Errorf("%+v", b.RequestCounts)
		}
		collect(t, g, key, b, lines)
	})
}

func TestAChunkLeasedByARunThatDiedIsTakenOver(t *testing.T) {
	u := newUpstream(t)
	opts := options(u, func(o *batches.Options) { o.Lease = 300 * time.Millisecond })
	opts.Jobs = nil
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "l", 5, func(i int) string { return run + " text " + strconv.Itoa(i) })
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		if err := handle(t, g, receive(t, g, 1)[0]); err != nil { // the plan
			t.Fatal(err)
		}
		dead, err := g.Services.Batches.LeaseAsDeadRun(context.Background(), b.ID, 0, time.Now().Add(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		b = drain(t, g, key, b.ID)
		if b.Status != batches.StatusCompleted || b.RequestCounts.Completed != 5 {
			t.Errorf("%s %+v", b.Status, b.RequestCounts)
		}
		collect(t, g, key, b, lines)
		if _, err := g.Backend.Blobs.Size(context.Background(), dead); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the dead run's object %s: %v, want it removed", dead, err)
		}
	})
}

// Many deliveries of every message, at once, still give each line once.
func TestEveryMessageDeliveredManyTimesAtOnce(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	opts.Jobs = nil
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("titan", "l", 10, func(i int) string { return run + " text " + strconv.Itoa(i) })
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		deadline := time.Now().Add(20 * time.Second)
		for getBatch(t, g, key, b.ID).Status != batches.StatusCompleted {
			if time.Now().After(deadline) {
				t.Fatal("the batch did not complete")
			}
			msgs, err := g.Backend.Work.Receive(context.Background(), 10, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 3*len(msgs))
			for _, m := range msgs {
				for range 3 {
					wg.Go(func() { errs <- g.Services.Batches.Work(context.Background(), m) })
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range msgs {
				g.Backend.Work.Ack(context.Background(), m)
			}
		}
		b = getBatch(t, g, key, b.ID)
		collect(t, g, key, b, lines)
		for _, l := range lines {
			if n := u.calls(l.Body["input"].(string)); n != 1 {
				t.Errorf("%s: %d provider calls", l.CustomID, n)
			}
		}
		if b.RequestCounts != (batches.RequestCounts{Total: 10, Completed: 10}) {
			t.Error(fmt.Sprintf("%+v", b.RequestCounts))
		}
	})
}
