package lane

import (
	"context"
	"errors"
	"testing"
	"time"
)

type valueKey struct{}

// served returns a connection's context with a lane, and the context of an
// HTTP/1 request served on it (a cancellable child, as net/http's, with a
// value over it, as the request path adds).
func served(t *testing.T) (conn context.Context, hangUp context.CancelFunc, req context.Context) {
	t.Helper()
	conn, hangUp = With(context.Background())
	t.Cleanup(hangUp)
	r, done := context.WithCancel(conn)
	t.Cleanup(done)
	Serve(r, 1)
	return conn, hangUp, context.WithValue(r, valueKey{}, "v")
}

// transport derives a context from a call as net/http's transport does.
func transport(t *testing.T, call context.Context) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancelCause(call)
	t.Cleanup(func() { cancel(nil) })
	return ctx
}

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the call was not cancelled")
	}
}

func TestCallCarriesTheRequestsValuesAndItsDeadline(t *testing.T) {
	_, _, req := served(t)
	deadline := time.Now().Add(time.Hour)
	call, l, ok := Begin(req, deadline)
	if !ok {
		t.Fatal("an HTTP/1 request's call got no lane")
	}
	defer l.End()
	if v := call.Value(valueKey{}); v != "v" {
		t.Errorf("Value = %v, want the request's", v)
	}
	if d, ok := call.Deadline(); !ok || !d.Equal(deadline) {
		t.Errorf("Deadline = %v, %v; want %v", d, ok, deadline)
	}
	if call.Err() != nil {
		t.Errorf("Err = %v before any end", call.Err())
	}
}

func TestOverrunCancelsTheCallWithItsDeadline(t *testing.T) {
	_, _, req := served(t)
	call, l, ok := Begin(req, time.Now().Add(20*time.Millisecond))
	if !ok {
		t.Fatal("no lane")
	}
	defer l.End()
	sent := transport(t, call)
	waitDone(t, sent)
	if err := context.Cause(sent); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the transport's context ended with %v, want the deadline", err)
	}
	if err := call.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call.Err = %v, want context.DeadlineExceeded", err)
	}
	if req.Err() != nil {
		t.Errorf("the request itself ended: %v", req.Err())
	}
}

func TestNextCallAfterAnOverrunGetsAFreshScope(t *testing.T) {
	_, _, req := served(t)
	call, l, _ := Begin(req, time.Now().Add(time.Millisecond))
	waitDone(t, call)
	l.End()
	next, l, ok := Begin(req, time.Now().Add(time.Hour))
	if !ok {
		t.Fatal("no lane after an overrun")
	}
	defer l.End()
	if next.Err() != nil {
		t.Errorf("the next call starts cancelled: %v", next.Err())
	}
}

func TestEndedCallsTimerDoesNotCancelTheNext(t *testing.T) {
	_, _, req := served(t)
	_, l, _ := Begin(req, time.Now().Add(10*time.Millisecond))
	l.End()
	next, l, ok := Begin(req, time.Now().Add(time.Hour))
	if !ok {
		t.Fatal("no lane")
	}
	defer l.End()
	sent := transport(t, next)
	time.Sleep(50 * time.Millisecond)
	if sent.Err() != nil {
		t.Errorf("the first call's deadline cancelled the next call: %v", context.Cause(sent))
	}
}

func TestCallBegunAfterAHangUpStartsCancelled(t *testing.T) {
	_, hangUp, req := served(t)
	hangUp()
	call, l, ok := Begin(req, time.Now().Add(time.Hour))
	if ok {
		defer l.End()
	}
	if call.Err() == nil {
		t.Error("a call begun after its client hung up is not cancelled")
	}
}

func TestHangUpCancelsTheCall(t *testing.T) {
	_, hangUp, req := served(t)
	call, l, _ := Begin(req, time.Now().Add(time.Hour))
	defer l.End()
	sent := transport(t, call)
	hangUp()
	waitDone(t, sent)
	if err := call.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("call.Err = %v, want context.Canceled", err)
	}
}

func TestCallsWithoutTheirOwnLaneAreRefused(t *testing.T) {
	_, _, req := served(t)
	cancellable, cancel := context.WithCancel(req)
	defer cancel()
	conn, hangUp := With(context.Background())
	defer hangUp()
	h2, h2done := context.WithCancel(conn)
	defer h2done()
	Serve(h2, 2)
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no connection", context.Background()},
		{"a cancellation of its own", cancellable},
		{"an HTTP/2 request", h2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, ok := Begin(tc.ctx, time.Now().Add(time.Hour)); ok {
				t.Error("got a lane")
			}
		})
	}
}

func TestOverlappingCallIsRefused(t *testing.T) {
	_, _, req := served(t)
	_, l, _ := Begin(req, time.Now().Add(time.Hour))
	if _, _, ok := Begin(req, time.Now().Add(time.Hour)); ok {
		t.Error("a second call in progress got the lane")
	}
	l.End()
	if _, l, ok := Begin(req, time.Now().Add(time.Hour)); !ok {
		t.Error("the lane was not free after End")
	} else {
		l.End()
	}
}

func TestLeakedContextIsReleasedWithinMaxCalls(t *testing.T) {
	_, _, req := served(t)
	call, l, _ := Begin(req, time.Now().Add(time.Hour))
	leaked, release := context.WithCancel(call) // not released until the test ends: the leak under test
	defer release()
	l.End()
	for range maxCalls {
		_, l, ok := Begin(req, time.Now().Add(time.Hour))
		if !ok {
			t.Fatal("no lane")
		}
		l.End()
	}
	waitDone(t, leaked)
}
