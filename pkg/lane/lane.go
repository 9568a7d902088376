// Package lane bounds the provider calls of one HTTP/1 client connection by
// their deadlines with one context and one timer per connection, where a
// context.WithDeadline per call costs a timer, a context, its channel and
// its children's map: some 6,500 instructions and seven allocations, about
// 3 % of a forwarded chat call's CPU (docs/benchmarks.md).
//
// An HTTP/1 connection carries one request at a time, and a request makes
// its provider calls one after another, so the calls of a connection can
// share one cancellation scope, a child of a context of the connection's
// that its hang-up (With) cancels: the scope is cancelled only when a call
// overruns its deadline, and then replaced. A call whose context is not its
// HTTP/1 request's own (HTTP/2 streams, background jobs, a layer of
// cancellation added on the way) or that overlaps another gets no lane and
// is bounded the usual way.
package lane

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
)

// maxCalls is how many calls a scope serves before it is replaced, so that a
// context derived from a call and never released (none is known) is
// released, as a per-call context's end would, within a bounded number of
// calls.
const maxCalls = 256

// Lane is the cancellation scope of one connection's calls.
type Lane struct {
	parent context.Context // the connection's: done once it hangs up

	mu       sync.Mutex
	request  <-chan struct{} // Done of the request being served (HTTP/1 only)
	scope    context.Context // nil: none yet, or the last one was cancelled
	cancel   context.CancelCauseFunc
	calls    int // calls the scope has served
	busy     bool
	deadline time.Time // of the call in progress
	timer    *time.Timer
}

// With returns a connection's context, ctx, carrying a new Lane
// (http.Server.ConnContext), and the lane's hang-up: whoever reads the
// connection must call it when the client has gone (a read fails other than
// by a deadline, as net/http cancels its requests' contexts then) and when
// the connection closes. The lane's calls end with it; a call begun after it
// starts cancelled.
func With(ctx context.Context) (context.Context, context.CancelFunc) {
	parent, hangUp := context.WithCancel(ctx)
	ctx, _ = ctxvalue.With(ctx, Lane{parent: parent}) // the lane is its layer's value: one allocation
	return ctx, hangUp
}

// Serve notes that the request whose context is ctx, of HTTP major version
// proto, is the one its connection now serves: calls made with that context
// (or layers of values over it) may use the connection's lane. An HTTP/2
// request shares its connection with others and is cancelled on its own:
// its calls never do.
func Serve(ctx context.Context, proto int) {
	if proto != 1 {
		return
	}
	l := ctxvalue.From[Lane](ctx)
	if l == nil {
		return
	}
	done := ctx.Done()
	l.mu.Lock()
	l.request = done
	l.mu.Unlock()
}

// Begin returns ctx bounded by deadline on the lane of ctx's connection, and
// that lane, which End must be given when the call is over (its answer read
// or dropped). ok is false, and nothing is to be ended, when ctx has no lane
// to use: no HTTP/1 connection, a cancellation of its own beyond its
// request's, or another call in progress on it.
func Begin(ctx context.Context, deadline time.Time) (bounded context.Context, l *Lane, ok bool) {
	if l = ctxvalue.From[Lane](ctx); l == nil {
		return ctx, nil, false
	}
	done := ctx.Done()
	l.mu.Lock()
	if l.busy || done == nil || done != l.request {
		l.mu.Unlock()
		return ctx, nil, false
	}
	if l.scope == nil || l.scope.Err() != nil || l.calls >= maxCalls {
		if l.cancel != nil {
			l.cancel(context.Canceled)
		}
		l.scope, l.cancel = context.WithCancelCause(l.parent)
		l.calls = 0
	}
	l.calls++
	l.busy, l.deadline = true, deadline
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(deadline), l.expire)
	} else {
		l.timer.Reset(time.Until(deadline))
	}
	scope := l.scope
	l.mu.Unlock()
	return &call{Context: scope, values: ctx, deadline: deadline}, l, true
}

// End ends the call Begin started on l.
func (l *Lane) End() {
	l.mu.Lock()
	l.busy = false
	l.timer.Stop()
	l.mu.Unlock()
}

// expire cancels the scope of a call that has overrun its deadline. A timer
// that fires for a call already over (End raced it) finds the lane idle, or
// a later call's deadline ahead, and does nothing.
func (l *Lane) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.busy || time.Now().Before(l.deadline) {
		return
	}
	l.cancel(context.DeadlineExceeded)
	l.scope, l.cancel = nil, nil
}

// call is a call's context: the lane's scope for cancellation, its
// request's context for every value, and its own deadline.
type call struct {
	context.Context // the scope
	values          context.Context
	deadline        time.Time
}

func (c *call) Deadline() (time.Time, bool) { return c.deadline, true }

// Err reports an overrun as the deadline it is, not as the cancellation
// that carried it.
func (c *call) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// Value answers from the request's context, except the context package's
// own lookup of the nearest cancellable context (its key is an *int):
// that is the scope, so that a context derived from the call (the HTTP
// transport's, one a request) joins the scope's children, as it would a
// per-call context's, rather than watching it from a goroutine of its own.
// Were that key ever another type, derived contexts would still be
// cancelled, only at a goroutine's cost.
func (c *call) Value(key any) any {
	if _, ok := key.(*int); ok {
		return c.Context.Value(key)
	}
	return c.values.Value(key)
}

// String names the layer as the context package's do.
func (c *call) String() string { return "lane.call" }
