package api

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/ids"
)

// RequestIDHeader carries the request id on every response.
const RequestIDHeader = "X-Request-Id"

// requestKey finds a *request in a context: a request's id and timing
// travel in one context value, so that starting a request adds one layer to
// its context, not two (every Value lookup below walks them all).
type requestKey struct{}

// request is what a context knows of its request: its id ("" when none)
// and its timing (nil when none). It is itself the context layer that
// carries it (Value answers requestKey with it), so that starting a request
// is one allocation, not a value and a context.WithValue node.
type request struct {
	context.Context
	id     string
	timing *timing
	own    timing    // Start's timing, allocated with the request
	header [1]string // the id's header value, allocated with the request
}

func (r *request) Value(key any) any {
	if key == (requestKey{}) {
		return r
	}
	return r.Context.Value(key)
}

// String names the layer as context.WithValue's do.
func (r *request) String() string { return "api.request(" + r.id + ")" }

// timing is when a request (or a call without one: a batch line) began and
// how long it has waited on others since.
type timing struct {
	start  time.Time
	waited atomic.Int64 // nanoseconds
}

func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// WithRequestID returns ctx carrying a request id (and the timing it
// carried).
func WithRequestID(ctx context.Context, id string) context.Context {
	r := &request{Context: ctx, id: id}
	if old := requestOf(ctx); old != nil {
		r.timing = old.timing
	}
	return r
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	if r := requestOf(ctx); r != nil {
		return r.id
	}
	return ""
}

// WithStart returns ctx carrying start as the moment its request began, and
// a count of the time it waits on others (AddWait) from then on (and the
// request id it carried).
func WithStart(ctx context.Context, start time.Time) context.Context {
	r := &request{Context: ctx}
	if old := requestOf(ctx); old != nil {
		r.id = old.id
	}
	r.own.start = start
	r.timing = &r.own
	return r
}

func timingOf(ctx context.Context) *timing {
	if r := requestOf(ctx); r != nil {
		return r.timing
	}
	return nil
}

// RequestStart returns when sluice began handling the request (from
// StartRequest or WithStart), or now when the context has no start.
func RequestStart(ctx context.Context) time.Time {
	if t := timingOf(ctx); t != nil {
		return t.start
	}
	return time.Now()
}

// AddWait records that the request waited d on something not sluice's own
// work — a provider's answer, a pause between retries — so that Overhead
// leaves it out. Without a start in ctx it does nothing. Safe for
// concurrent use.
func AddWait(ctx context.Context, d time.Duration) {
	if t := timingOf(ctx); t != nil {
		t.waited.Add(int64(d))
	}
}

// Waited is the time AddWait has recorded.
func Waited(ctx context.Context) time.Duration {
	if t := timingOf(ctx); t != nil {
		return time.Duration(t.waited.Load())
	}
	return 0
}

// Overhead is sluice's own time on the request so far: since its start,
// less what it waited (never below zero; zero without a start).
func Overhead(ctx context.Context) time.Duration {
	t := timingOf(ctx)
	if t == nil {
		return 0
	}
	return max(time.Since(t.start)-time.Duration(t.waited.Load()), 0)
}

// OverheadHeader carries the time a call spent inside sluice, in
// milliseconds: from the request's arrival (auth included) to the answer's
// headers, less the time spent waiting on providers and between retries.
const OverheadHeader = "X-Sluice-Overhead-Ms"

// SetOverhead sets OverheadHeader on h to ctx's Overhead. Successes and
// failures both set it, just before their headers go out.
func SetOverhead(h http.Header, ctx context.Context) {
	h.Set(OverheadHeader, OverheadValue(ctx))
}

// OverheadValue is OverheadHeader's value for ctx: its Overhead in
// milliseconds.
func OverheadValue(ctx context.Context) string {
	ms := float64(Overhead(ctx)) / float64(time.Millisecond)
	return strconv.FormatFloat(ms, 'f', 3, 64)
}

// NewRequestID makes a request id (req_…).
func NewRequestID() string { return ids.New(ids.Request) }

// Start gives a request's context a request id and a start time (so time
// spent in auth counts as sluice's overhead), and sets the id on the
// response.
func Start(ctx context.Context, w http.ResponseWriter) context.Context {
	return new(Call).Start(ctx, w)
}

// Call is the context layer Start adds, for a caller that allocates an
// object per request anyway (the middleware's) and holds it there: one
// allocation a request fewer. A Call is started once. An object that
// embeds it is a context layer itself, whose Value must defer to the
// Call's for the keys it does not answer.
type Call struct{ request }

// Start is the package's Start, with c as the layer.
func (c *Call) Start(ctx context.Context, w http.ResponseWriter) context.Context {
	r := &c.request
	r.Context, r.id = ctx, NewRequestID()
	r.own.start = time.Now()
	r.timing = &r.own
	// The canonical key: Set would canonicalise it anew on every request.
	// The value's slice is the request's own (capacity 1: an Add copies).
	r.header[0] = r.id
	w.Header()[RequestIDHeader] = r.header[:1:1]
	return r
}

// StartRequest is Start for a request that needs nothing more in its
// context: it returns r carrying the id and start.
func StartRequest(w http.ResponseWriter, r *http.Request) *http.Request {
	return r.WithContext(Start(r.Context(), w))
}
