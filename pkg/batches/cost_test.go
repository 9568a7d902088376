package batches_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// countingRecords counts the record-store writes made through it: calls,
// and the items they write (a transaction's writes each count, as
// DynamoDB bills them).
type countingRecords struct {
	store.Records
	calls, items atomic.Int64
}

func (c *countingRecords) count(items int) { c.calls.Add(1); c.items.Add(int64(items)) }

func (c *countingRecords) Put(ctx context.Context, rec store.Record, cond store.Cond) error {
	c.count(1)
	return c.Records.Put(ctx, rec, cond)
}

func (c *countingRecords) Update(ctx context.Context, rec store.Record, cond store.Cond) error {
	c.count(1)
	return c.Records.Update(ctx, rec, cond)
}

func (c *countingRecords) Add(ctx context.Context, key store.Key, deltas map[string]int64, cond store.Cond) (map[string]int64, error) {
	c.count(1)
	return c.Records.Add(ctx, key, deltas, cond)
}

func (c *countingRecords) Delete(ctx context.Context, key store.Key, cond store.Cond) error {
	c.count(1)
	return c.Records.Delete(ctx, key, cond)
}

func (c *countingRecords) Transact(ctx context.Context, writes []store.Write) error {
	c.count(len(writes))
	return c.Records.Transact(ctx, writes)
}

// A batch writes a few records per chunk and none per line. Two batches of
// 2 and 6 chunks give the writes of a chunk and those of a batch (create,
// plan, finalize); a third, of 6 chunks with fewer lines, writes no more
// than the second. From those, a 50,000-line batch in chunks of 1,000 lines
// (the default) makes at most 5 record writes per 1,000 lines, every item
// of a transaction counted. The test handles the work messages one at a
// time, so that the count is the design's, without the retries of commits
// that lost to another chunk's commit at the same moment (tiny chunks meet
// them often; chunks of 1,000 lines, which take seconds, seldom do).
func TestRecordWritesStaySmall(t *testing.T) {
	const chunkLines = 5
	recs := new(countingRecords)
	u := newUpstream(t)
	opts := options(u, func(o *batches.Options) { o.ChunkLines = chunkLines })
	opts.Backend = func(b *store.Backend) {
		*recs = countingRecords{Records: b.Records}
		b.Records = recs
	}
	opts.Jobs = nil
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		writes := func(n int) int64 {
			t.Helper()
			file := uploadInput(t, g, key, jsonl(embeddingLines("emb", "l", n, func(i int) string { return t.Name() + " " + strconv.Itoa(n) + " " + strconv.Itoa(i) })))
			before := recs.items.Load()
			b := createBatch(t, g, key, file)
			if b = drain(t, g, key, b.ID); b.Status != batches.StatusCompleted || b.RequestCounts.Completed != int64(n) {
				t.Fatalf("%s %+v", b.Status, b.RequestCounts)
			}
			return recs.items.Load() - before
		}
		two, six, sixShort := writes(2*chunkLines), writes(6*chunkLines), writes(5*chunkLines+1)
		if sixShort > six {
			t.Errorf("6 chunks: %d record writes for %d lines, %d for %d: writes grow with lines", six, 6*chunkLines, sixShort, 5*chunkLines+1)
		}
		perChunk := float64(six-two) / 4
		perBatch := float64(two) - 2*perChunk
		const lines, chunks = 50000, 50000 / batches.DefaultChunkLines
		per1000 := (perBatch + chunks*perChunk) * 1000 / lines
		t.Logf("record writes: %.1f per chunk, %.0f per batch; a %d-line batch: %.1f per 1,000 lines", perChunk, perBatch, lines, per1000)
		if per1000 > 5 {
			t.Errorf("%.1f record writes per 1,000 lines (%.1f per chunk, %.0f per batch), want at most 5", per1000, perChunk, perBatch)
		}
	})
}
