package gateway

import (
	"net"
	"net/http"
	"sync"
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
	lc := &limitedConn{Conn: c, l: l, idleSince: time.Now()}
	for {
		l.mu.Lock()
		if len(l.open) < l.max {
			l.open[lc] = struct{}{}
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
	var oldest *limitedConn
	for c := range l.open {
		if !c.idleSince.IsZero() && (oldest == nil || c.idleSince.Before(oldest.idleSince)) {
			oldest = c
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
	l.mu.Lock()
	switch state {
	case http.StateActive:
		lc.idleSince = time.Time{}
	case http.StateIdle:
		lc.idleSince = time.Now()
	}
	l.mu.Unlock()
	if state == http.StateIdle {
		l.wake()
	}
}

func (l *connLimiter) wake() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// underPressure reports whether more than half the slots are taken. l.mu is
// held.
func (l *connLimiter) underPressure() bool { return 2*len(l.open) > l.max }

// limitedConn gives its slot back when it closes (net/http may close twice).
type limitedConn struct {
	net.Conn
	l         *connLimiter
	idleSince time.Time // zero while serving a request; guarded by l.mu
	once      sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
		c.l.wake()
	})
	return err
}

// SetReadDeadline shortens the wait for a next request under pressure:
// net/http sets an idle connection's keep-alive deadline here, just after it
// reports the connection idle.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	c.l.mu.Lock()
	if !c.idleSince.IsZero() && c.l.underPressure() {
		if limit := time.Now().Add(pressureIdle); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	c.l.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}
