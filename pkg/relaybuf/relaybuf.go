// Package relaybuf owns the relay's copy buffers: the 32 KB a relayed
// answer is read through, kept for reuse in a bounded free list.
package relaybuf

import "sync"

// Size is a buffer's length: the relay's read size, and the largest answer
// read whole before it is written.
const Size = 32 << 10

// maxFree bounds the buffers a List keeps for reuse (1 MB): as many relays
// as run at once on a busy process's cores; a burst past it allocates, and
// what it allocated beyond the bound is left to the GC.
const maxFree = 32

// List is a bounded free list of Size-byte buffers; its zero value is
// empty and ready. A sync.Pool is emptied by every other garbage
// collection, and refilling it cost a 32 KB allocation every few
// collections (~300–380 B a request amortized, and GC work); the list
// keeps its buffers across collections.
type List struct {
	mu   sync.Mutex
	free []*[]byte
}

// Get returns a free buffer of Size bytes, or a new one.
func (l *List) Get() *[]byte {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	b := make([]byte, Size)
	return &b
}

// Put gives back a buffer Get returned; past the bound it is dropped.
func (l *List) Put(b *[]byte) {
	l.mu.Lock()
	if len(l.free) < maxFree {
		l.free = append(l.free, b)
	}
	l.mu.Unlock()
}
