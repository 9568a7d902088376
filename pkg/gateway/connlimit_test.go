package gateway

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// pipeConn is a limitedConn over one end of a pipe, and the other end.
func pipeConn(t *testing.T) (*limitedConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &limitedConn{Conn: a, l: limitConnections(nil, 10)}, b
}

func TestReadDeadlineSetBeforeAReadAppliesToIt(t *testing.T) {
	c, _ := pipeConn(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("read waited %s", took)
	}
}

func TestReadDeadlineSetDuringAReadCutsIt(t *testing.T) {
	c, _ := pipeConn(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	for c.reading.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want a deadline error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read in progress was not cut")
	}
}

func TestReadDeadlineClearedAfterAPassedOneLetsReadsWait(t *testing.T) {
	c, peer := pipeConn(t)
	if err := c.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("x"))
	}()
	if n, err := c.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("read: %d, %v; want the byte sent", n, err)
	}
}

func TestSetDeadlineSetsTheReadDeadline(t *testing.T) {
	c, _ := pipeConn(t)
	if err := c.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
}
