package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// pressureIdle is how long a connection may wait idle between requests
// while more than half the connection slots are taken (otherwise the
// server's IdleTimeout): keep-alive is a courtesy that must not cost other
// clients their turn.
const pressureIdle = 5 * time.Second

// connLimiter holds at most max connections open at once: every connection
// costs a goroutine, buffers and a file descriptor, and a client may open as
// many as it likes.
//
// Idle connections (between requests, or not yet sent their first one)
// must not lock out other clients, so when a new connection would pass the
// cap, the connection idle the longest is closed to make room; only when
// every connection is serving a request does the new one wait (and with it
// the kernel's backlog) for a slot. Under pressure (more than half the
// slots taken) an HTTP/1 connection's keep-alive lasts pressureIdle.
type connLimiter struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[*limitedConn]struct{}
	// count is len(open), read without mu: every request's read deadlines
	// ask whether the limiter is under pressure, and a lock taken there by
	// both cores showed in profiles.
	count atomic.Int64
	// freed wakes an Accept waiting for a slot: a connection closed or went
	// idle.
	freed     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func limitConnections(l net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: l, max: max, open: map[*limitedConn]struct{}{},
		freed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept takes the next connection, and returns it once it has a slot.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l}
	lc.idleSince.Store(time.Now().UnixNano())
	for {
		l.mu.Lock()
		if len(l.open) < l.max {
			l.open[lc] = struct{}{}
			l.count.Store(int64(len(l.open)))
			l.mu.Unlock()
			return lc, nil
		}
		victim := l.oldestIdle()
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
			continue
		}
		select {
		case <-l.freed:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// oldestIdle is the open connection idle the longest, or nil when all are
// serving requests. l.mu is held.
func (l *connLimiter) oldestIdle() *limitedConn {
	var (
		oldest *limitedConn
		since  int64
	)
	for c := range l.open {
		if s := c.idleSince.Load(); s != 0 && (oldest == nil || s < since) {
			oldest, since = c, s
		}
	}
	return oldest
}

func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// ConnState is the http.Server hook through which the limiter learns which
// connections are idle (for HTTP/2, idle means no open stream).
func (l *connLimiter) ConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		lc.idleSince.Store(0)
	case http.StateIdle:
		lc.idleSince.Store(time.Now().UnixNano())
		l.wake()
	}
}

func (l *connLimiter) wake() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// underPressure reports whether more than half the slots are taken.
func (l *connLimiter) underPressure() bool { return 2*l.count.Load() > int64(l.max) }

// limitedConn gives its slot back when it closes (net/http may close twice).
//
// Its read deadline is put on the socket when a read begins, not when it is
// set: net/http sets one five to seven times a request (keep-alive, header
// timeout, cleared, the body guard's, cleared for its background read,
// aborting that read, cleared), each a runtime timer operation, while the
// socket is read twice (the next request, headers and body at once; the
// background read). A deadline set while a read waits applies at once, so a
// read in progress is cut as before.
type limitedConn struct {
	net.Conn
	l         *connLimiter
	idleSince atomic.Int64 // Unix nanoseconds; 0 while serving a request
	once      sync.Once

	dl      sync.Mutex // orders want, applied and the start of reads
	want    time.Time  // the read deadline last set
	applied time.Time  // the read deadline the socket has
	reading atomic.Int32

	// hangUp ends the connection's lane (lane.With): set before the
	// connection is served, called when a read fails other than by a
	// deadline — the client has gone, and net/http cancels its requests'
	// contexts for the same error — and when the connection closes.
	hangUp context.CancelFunc
}

func (c *limitedConn) Read(p []byte) (int, error) {
	c.dl.Lock()
	if !c.want.Equal(c.applied) {
		if err := c.Conn.SetReadDeadline(c.want); err != nil {
			c.dl.Unlock()
			return 0, err
		}
		c.applied = c.want
	}
	// Counted under dl, so a deadline set from now on applies at once.
	c.reading.Add(1)
	c.dl.Unlock()
	n, err := c.Conn.Read(p)
	c.reading.Add(-1)
	if err != nil && c.hangUp != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.hangUp()
	}
	return n, err
}

// setReadDeadline records t, and puts it on the socket now if a read is
// in progress (else the next read does).
func (c *limitedConn) setReadDeadline(t time.Time) error {
	c.dl.Lock()
	defer c.dl.Unlock()
	c.want = t
	if c.reading.Load() == 0 || t.Equal(c.applied) {
		return nil
	}
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	c.applied = t
	return nil
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.setReadDeadline(t)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.hangUp != nil {
		c.hangUp()
	}
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.count.Store(int64(len(c.l.open)))
		c.l.mu.Unlock()
		c.l.wake()
	})
	return err
}

// SetReadDeadline shortens the wait for a next request under pressure:
// net/http sets an idle connection's keep-alive deadline here, just after it
// reports the connection idle.
// Both are read without a lock: the connection's own goroutine reported it
// idle just before, and the count of slots taken is as good a moment later.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if c.idleSince.Load() != 0 && c.l.underPressure() {
		if limit := time.Now().Add(pressureIdle); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	return c.setReadDeadline(t)
}
