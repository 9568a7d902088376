package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// BlobOptions tunes BlobsWith for an adapter's known limits.
type BlobOptions struct {
	// SkipStreamingCheck skips the heap-growth check of the 100 MB Put (the
	// object is still written and read back). Set it only for an adapter whose
	// SDK inherently buffers whole parts, and say why where you set it.
	SkipStreamingCheck bool
	// MaxHeapGrowth bounds how much the live heap may grow during the 100 MB
	// Put; zero means DefaultMaxHeapGrowth.
	MaxHeapGrowth int64
}

// DefaultMaxHeapGrowth is far below the 100 MB the streaming check writes, and
// above what a streaming adapter needs (a few buffers, or a few upload parts).
const DefaultMaxHeapGrowth = 32 << 20

// bigBlobSize is the size of the object the streaming check writes.
const bigBlobSize = 100 << 20

// Blobs runs the conformance suite for store.Blobs with default options.
func Blobs(t *testing.T, open func(t *testing.T) store.Blobs) {
	BlobsWith(t, open, BlobOptions{})
}

// BlobsWith runs the conformance suite for store.Blobs. Call it from a test
// that does not call t.Parallel: it measures the heap.
func BlobsWith(t *testing.T, open func(t *testing.T) store.Blobs, opts BlobOptions) {
	if opts.MaxHeapGrowth == 0 {
		opts.MaxHeapGrowth = DefaultMaxHeapGrowth
	}
	// First and alone, so that no parallel subtest allocates while the heap
	// is measured.
	t.Run("Streaming100MB", func(t *testing.T) {
		blobsStreaming(t, testCtx(t, 2*time.Minute), open(t), "t"+uniq(), opts)
	})
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, b store.Blobs, p string)
	}{
		{"RoundTrip", blobsRoundTrip},
		{"Ranges", blobsRanges},
		{"Missing", blobsMissing},
		{"Overwrite", blobsOverwrite},
		{"NotVisibleUntilComplete", blobsNotVisibleUntilComplete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, testCtx(t, time.Minute), open(t), "t"+uniq())
		})
	}
}

// pattern returns n bytes that differ at nearby offsets.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) ^ seed
	}
	return b
}

func mustPutBlob(t *testing.T, ctx context.Context, b store.Blobs, key string, data []byte) {
	t.Helper()
	n, err := b.Put(ctx, key, bytes.NewReader(data))
	ok(t, err, "Put "+key)
	if n != int64(len(data)) {
		t.Fatalf("Put %s returned %d bytes, want %d", key, n, len(data))
	}
}

func readBlob(t *testing.T, ctx context.Context, b store.Blobs, key string, off, length int64) []byte {
	t.Helper()
	rc, err := b.Get(ctx, key, off, length)
	ok(t, err, fmt.Sprintf("Get %s [%d,+%d)", key, off, length))
	defer rc.Close()
	data, err := io.ReadAll(rc)
	ok(t, err, fmt.Sprintf("read %s [%d,+%d)", key, off, length))
	return data
}

func wantBlob(t *testing.T, ctx context.Context, b store.Blobs, key string, off, length int64, want []byte) {
	t.Helper()
	if got := readBlob(t, ctx, b, key, off, length); !bytes.Equal(got, want) {
		t.Fatalf("Get %s [%d,+%d): %d bytes, not the %d expected", key, off, length, len(got), len(want))
	}
}

func wantNoBlob(t *testing.T, ctx context.Context, b store.Blobs, key string) {
	t.Helper()
	_, err := b.Size(ctx, key)
	wantIs(t, err, store.ErrNotFound, "Size "+key)
	rc, err := b.Get(ctx, key, 0, -1)
	if err == nil {
		rc.Close()
	}
	wantIs(t, err, store.ErrNotFound, "Get "+key)
}

func blobsRoundTrip(t *testing.T, ctx context.Context, b store.Blobs, p string) {
	for _, tc := range []struct {
		key  string
		data []byte
	}{
		{p + "/files/file-1/part-0", pattern(70_000, 1)},
		{p + "/files/with space/ünï+code (1).jsonl", []byte(`{"custom_id":"a"}` + "\n")},
		{p + "/empty", nil},
		{p, []byte("a key that is also a prefix of other keys")},
	} {
		mustPutBlob(t, ctx, b, tc.key, tc.data)
		n, err := b.Size(ctx, tc.key)
		ok(t, err, "Size "+tc.key)
		if n != int64(len(tc.data)) {
			t.Fatalf("Size %s = %d, want %d", tc.key, n, len(tc.data))
		}
		wantBlob(t, ctx, b, tc.key, 0, -1, tc.data)
	}
}

func blobsRanges(t *testing.T, ctx context.Context, b store.Blobs, p string) {
	key := p + "/ranged"
	data := pattern(1000, 2)
	mustPutBlob(t, ctx, b, key, data)
	for _, r := range []struct{ off, length int64 }{
		{0, -1}, {0, 1}, {100, 50}, {100, -1}, {999, 1}, {999, -1}, {990, 100}, {0, 1000},
	} {
		end := int64(len(data))
		if r.length >= 0 {
			end = min(r.off+r.length, end)
		}
		wantBlob(t, ctx, b, key, r.off, r.length, data[r.off:end])
	}
}

func blobsMissing(t *testing.T, ctx context.Context, b store.Blobs, p string) {
	key := p + "/missing"
	wantNoBlob(t, ctx, b, key)
	ok(t, b.Delete(ctx, key), "Delete of a missing object")
	mustPutBlob(t, ctx, b, key, []byte("x"))
	ok(t, b.Delete(ctx, key), "Delete")
	wantNoBlob(t, ctx, b, key)
	ok(t, b.Delete(ctx, key), "second Delete")
}

func blobsOverwrite(t *testing.T, ctx context.Context, b store.Blobs, p string) {
	key := p + "/over"
	mustPutBlob(t, ctx, b, key, []byte("one"))
	mustPutBlob(t, ctx, b, key, []byte("two, longer"))
	wantBlob(t, ctx, b, key, 0, -1, []byte("two, longer"))
	mustPutBlob(t, ctx, b, key, []byte("3"))
	wantBlob(t, ctx, b, key, 0, -1, []byte("3"))
}

// blobsNotVisibleUntilComplete feeds Put through a pipe: while it runs the
// object does not exist, and when the reader fails the object is not created,
// or an old one is left as it was.
func blobsNotVisibleUntilComplete(t *testing.T, ctx context.Context, b store.Blobs, p string) {
	for _, old := range [][]byte{nil, []byte("the old object")} {
		key := p + "/partial"
		if old != nil {
			mustPutBlob(t, ctx, b, key, old)
		}
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := b.Put(ctx, key, pr)
			done <- err
		}()
		wrote := make(chan error, 1)
		go func() {
			_, err := pw.Write(pattern(256<<10, 3))
			wrote <- err
		}()
		select {
		case err := <-wrote:
			ok(t, err, "writing the first bytes")
		case err := <-done:
			t.Fatalf("Put returned before its reader ended: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("Put did not read its reader")
		}
		check := func() {
			if old == nil {
				wantNoBlob(t, ctx, b, key)
			} else {
				wantBlob(t, ctx, b, key, 0, -1, old)
			}
		}
		check() // mid-write
		pw.CloseWithError(errors.New("storetest: the reader failed midway"))
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("Put from a failing reader succeeded")
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Put did not return after its reader failed")
		}
		check()
	}
}

// blobsStreaming writes a 100 MB object from a generator and checks that the
// live heap stays far below its size, then reads it back through a hash.
func blobsStreaming(t *testing.T, ctx context.Context, b store.Blobs, p string, opts BlobOptions) {
	key := p + "/big"
	gen := newGenReader(bigBlobSize)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	peak := base
	gen.sample = func() {
		runtime.GC() // count live memory, not garbage awaiting collection
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	n, err := b.Put(ctx, key, gen)
	ok(t, err, "Put of 100 MB")
	gen.sample()
	if n != bigBlobSize {
		t.Fatalf("Put returned %d bytes, want %d", n, bigBlobSize)
	}
	growth := int64(peak) - int64(base)
	t.Logf("heap growth during a %d MB Put: %.1f MB", bigBlobSize>>20, float64(growth)/(1<<20))
	if !opts.SkipStreamingCheck && growth > opts.MaxHeapGrowth {
		t.Errorf("the live heap grew by %d MB during a %d MB Put (limit %d MB): Put buffers the object instead of streaming it",
			growth>>20, bigBlobSize>>20, opts.MaxHeapGrowth>>20)
	}

	size, err := b.Size(ctx, key)
	ok(t, err, "Size")
	if size != bigBlobSize {
		t.Fatalf("Size = %d, want %d", size, bigBlobSize)
	}
	rc, err := b.Get(ctx, key, 0, -1)
	ok(t, err, "Get")
	h := sha256.New()
	_, err = io.Copy(h, rc)
	rc.Close()
	ok(t, err, "reading 100 MB back")
	if !bytes.Equal(h.Sum(nil), gen.hash.Sum(nil)) {
		t.Fatal("the 100 MB object read back differs from what was written")
	}
	off := int64(bigBlobSize/2 + 12345)
	want := make([]byte, 1000)
	newGenReader(bigBlobSize).fill(want, off)
	wantBlob(t, ctx, b, key, off, 1000, want)
	ok(t, b.Delete(ctx, key), "Delete")
}

// genReader yields size bytes of a fixed pattern without holding them,
// hashing what it yields and calling sample every sampleEvery bytes.
type genReader struct {
	block      []byte
	off, size  int64
	nextSample int64
	sample     func()
	hash       interface {
		io.Writer
		Sum([]byte) []byte
	}
}

const sampleEvery = 8 << 20

func newGenReader(size int64) *genReader {
	// A prime block length, so that the pattern does not line up with any
	// part or buffer size and a misplaced part changes the hash.
	return &genReader{block: pattern(65521, 4), size: size, hash: sha256.New()}
}

func (g *genReader) fill(p []byte, off int64) {
	for i := 0; i < len(p); {
		i += copy(p[i:], g.block[(off+int64(i))%int64(len(g.block)):])
	}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.off >= g.size {
		return 0, io.EOF
	}
	if g.sample != nil && g.off >= g.nextSample {
		g.sample()
		g.nextSample += sampleEvery
	}
	p = p[:min(int64(len(p)), g.size-g.off)]
	g.fill(p, g.off)
	g.hash.Write(p)
	g.off += int64(len(p))
	return len(p), nil
}
