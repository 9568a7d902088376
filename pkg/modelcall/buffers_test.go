package modelcall

import (
	"runtime"
	"testing"
)

// A buffer given back is the one handed out next, even after garbage
// collections (which empty a sync.Pool).
func TestBufferListKeepsBuffersAcrossGC(t *testing.T) {
	var l bufferList
	b := l.Get().(*[]byte)
	if len(*b) != copyBufferSize {
		t.Fatalf("len = %d, want %d", len(*b), copyBufferSize)
	}
	l.Put(b)
	runtime.GC()
	runtime.GC()
	if got := l.Get().(*[]byte); got != b {
		t.Fatal("Get after two GCs returned a new buffer, not the one put back")
	}
}

// The list keeps at most maxFreeBuffers buffers; the rest are dropped.
func TestBufferListIsBounded(t *testing.T) {
	var l bufferList
	bufs := make([]*[]byte, maxFreeBuffers+5)
	for i := range bufs {
		bufs[i] = l.Get().(*[]byte)
	}
	for _, b := range bufs {
		l.Put(b)
	}
	if len(l.free) != maxFreeBuffers {
		t.Fatalf("kept %d buffers, want %d", len(l.free), maxFreeBuffers)
	}
	seen := map[*[]byte]bool{}
	for range maxFreeBuffers {
		seen[l.Get().(*[]byte)] = true
	}
	if len(seen) != maxFreeBuffers {
		t.Fatalf("Get handed out %d distinct buffers, want %d", len(seen), maxFreeBuffers)
	}
	if b := l.Get().(*[]byte); seen[b] {
		t.Fatal("an emptied list handed out a buffer already in use")
	}
}
