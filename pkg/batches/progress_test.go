package batches_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// writeCounter counts the writes to batch records and chunk records (keys
// BATCH#…), and the transactions among them that show live progress.
type writeCounter struct {
	store.Records
	mu    sync.Mutex
	batch int // writes to any BATCH# record
	shows int // transactions that add to live_completed or live_failed
}

func (w *writeCounter) note(keys ...store.Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		if strings.HasPrefix(k.PK, "BATCH#") {
			w.batch++
		}
	}
}

func (w *writeCounter) Put(ctx context.Context, rec store.Record, cond store.Cond) error {
	w.note(rec.Key)
	return w.Records.Put(ctx, rec, cond)
}

func (w *writeCounter) Update(ctx context.Context, rec store.Record, cond store.Cond) error {
	w.note(rec.Key)
	return w.Records.Update(ctx, rec, cond)
}

func (w *writeCounter) Add(ctx context.Context, key store.Key, d map[string]int64, cond store.Cond) (map[string]int64, error) {
	w.note(key)
	return w.Records.Add(ctx, key, d, cond)
}

func (w *writeCounter) Delete(ctx context.Context, key store.Key, cond store.Cond) error {
	w.note(key)
	return w.Records.Delete(ctx, key, cond)
}

func (w *writeCounter) Transact(ctx context.Context, writes []store.Write) error {
	for _, wr := range writes {
		w.note(wr.Record.Key)
		if wr.Kind == store.WriteAdd && (wr.Record.Counters["live_completed"] > 0 || wr.Record.Counters["live_failed"] > 0) {
			w.mu.Lock()
			w.shows++
			w.mu.Unlock()
		}
	}
	return w.Records.Transact(ctx, writes)
}

func (w *writeCounter) counts() (batch, shows int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.batch, w.shows
}

// A batch whose lines finish one at a time in one chunk of 1,000 lines
// shows them as they finish: its request_counts and usage move at least
// every 2 s while lines finish (not only when the chunk ends), through
// a bounded number of store writes — at most one progress transaction per
// second of the chunk's run — and end exact, with nothing left live.
func TestBatchCountsAdvanceWhileAChunkRuns(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			u := newUpstream(t)
			wc := &writeCounter{}
			opts := options(u, func(o *batches.Options) {
				o.ChunkLines = 1000
				o.Concurrency = 1 // lines finish one by one, 100 ms apart
			})
			opts.Backend = func(be *store.Backend) { wc.Records = be.Records; be.Records = wc }
			g := gatewaytest.Start(t, b, opts)
			_, key := g.TeamKey()
			const n = 35
			lines := embeddingLines("emb", "slow", n, func(i int) string { return "slow " + t.Name() + " " + strconv.Itoa(i) })
			batch := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))

			type seen struct {
				at   time.Time
				done int64
			}
			var changes []seen
			var last int64 = -1
			var tokensMoved bool
			start := time.Now()
			deadline := start.Add(60 * time.Second)
			for {
				cur := getBatch(t, g, key, batch.ID)
				done := cur.RequestCounts.Completed + cur.RequestCounts.Failed
				if done != last {
					changes = append(changes, seen{time.Now(), done})
					last = done
					if done > 0 && done < n && cur.Usage.InputTokens == 3*done {
						tokensMoved = true
					}
				}
				if cur.Status == batches.StatusCompleted {
					if cur.RequestCounts != (batches.RequestCounts{Total: n, Completed: n}) || cur.Usage.InputTokens != 3*n {
						t.Fatalf("completed with %+v, usage %+v", cur.RequestCounts, cur.Usage)
					}
					break
				}
				if time.Now().After(deadline) || cur.Status != batches.StatusInProgress && cur.Status != batches.StatusValidating && cur.Status != batches.StatusFinalizing {
					t.Fatalf("batch %s: %+v", cur.Status, cur)
				}
				time.Sleep(50 * time.Millisecond)
			}
			elapsed := time.Since(start)

			var between int
			for i, c := range changes {
				if c.done > 0 && c.done < n {
					between++
				}
				if i > 0 && c.done > 0 && c.done < n {
					if gap := c.at.Sub(changes[i-1].at); changes[i-1].done > 0 && gap > 2*time.Second {
						t.Errorf("the counts stood still %v while lines finished (%d → %d)", gap, changes[i-1].done, c.done)
					}
				}
			}
			if between < 2 {
				t.Errorf("the counts went %v: want them to move through values between 0 and %d", changes, n)
			}
			if !tokensMoved {
				t.Errorf("usage did not move with the counts")
			}
			writes, shows := wc.counts()
			t.Logf("%d lines in %v: %d progress transactions, %d writes to the batch's records", n, elapsed.Round(time.Millisecond), shows, writes)
			if limit := int(elapsed/batches.DefaultProgressEvery) + 1; shows > limit {
				t.Errorf("%d progress transactions in %v, want at most %d (one per %v)", shows, elapsed, limit, batches.DefaultProgressEvery)
			}
			rec, err := g.Backend.Records.Get(context.Background(), store.Key{PK: "BATCH#" + batch.ID, SK: "BATCH"})
			if err != nil {
				t.Fatal(err)
			}
			for name, v := range rec.Counters {
				if strings.HasPrefix(name, "live_") && v != 0 {
					t.Errorf("counter %s is %d after the batch ended, want 0", name, v)
				}
			}
		})
	}
}
