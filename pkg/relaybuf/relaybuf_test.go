package relaybuf

import (
	"runtime"
	"testing"
)

// A buffer given back is the one handed out next, even after garbage
// collections (which empty a sync.Pool).
func TestListKeepsBuffersAcrossGC(t *testing.T) {
	var l List
	b := l.Get()
	if len(*b) != Size {
		t.Fatalf("len = %d, want %d", len(*b), Size)
	}
	l.Put(b)
	runtime.GC()
	runtime.GC()
	if got := l.Get(); got != b {
		t.Fatal("Get after two GCs returned a new buffer, not the one put back")
	}
}

// The list keeps at most maxFree buffers; the rest are dropped.
func TestListIsBounded(t *testing.T) {
	var l List
	bufs := make([]*[]byte, maxFree+5)
	for i := range bufs {
		bufs[i] = l.Get()
	}
	for _, b := range bufs {
		l.Put(b)
	}
	if len(l.free) != maxFree {
		t.Fatalf("kept %d buffers, want %d", len(l.free), maxFree)
	}
	seen := map[*[]byte]bool{}
	for range maxFree {
		seen[l.Get()] = true
	}
	if len(seen) != maxFree {
		t.Fatalf("Get handed out %d distinct buffers, want %d", len(seen), maxFree)
	}
	if b := l.Get(); seen[b] {
		t.Fatal("an emptied list handed out a buffer already in use")
	}
}
