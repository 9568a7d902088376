package modelcall

import "sync"

// maxFreeBuffers bounds the copy buffers kept for reuse (1 MB): as many
// relays as run at once on a busy process's cores; a burst past it
// allocates, and what it allocated beyond the bound is left to the GC.
const maxFreeBuffers = 32

// bufferList is the relay's copy buffers: a bounded free list, with
// sync.Pool's Get and Put. A sync.Pool is emptied by every other garbage
// collection, and refilling it cost a 32 KB allocation every few
// collections (~300–380 B a request amortized, and GC work); the free list
// keeps its buffers across collections.
type bufferList struct {
	mu   sync.Mutex
	free []*[]byte
}

// Get returns a free *[]byte of copyBufferSize bytes, or a new one.
func (l *bufferList) Get() any {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	b := make([]byte, copyBufferSize)
	return &b
}

// Put gives back a buffer Get returned; past maxFreeBuffers it is dropped.
func (l *bufferList) Put(x any) {
	b := x.(*[]byte)
	l.mu.Lock()
	if len(l.free) < maxFreeBuffers {
		l.free = append(l.free, b)
	}
	l.mu.Unlock()
}
