package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/lane"
)

// guardBodies holds the local server's request bodies to two rules.
//
// A body keeps moving: no read waits longer than idle for its next byte and,
// once a body has waited idle in all, it must have arrived at minRate bytes
// per second of waiting (0: no rate). Only time spent waiting for the client
// counts: a handler that reads slowly because it forwards what it read is
// not the client's fault. A body that falls behind fails its read with 408.
//
// An answer that begins before its request's body has been read to the end
// (a 401 for a body never sent) goes out at once and closes the connection.
// net/http would otherwise read up to 256 KiB of the body before writing the
// answer's headers, and again after the handler, waiting as long as the
// client cares to send nothing.
//
// And a body held whole in memory draws on budget (api.BodyBudget), given
// back when its request ends.
//
// The answer's Date header is set from a value made once a second, as its
// headers go out: net/http would format one for every answer (a thousand
// instructions each), and a relay that copies its provider's Date keeps it.
//
// The guard is also where an HTTP/1 request tells its connection's lane
// that it is the request now served (lane.Serve): one handler in front of
// the routes rather than two, as every frame between net/http and a route
// counts against the stack a connection's goroutine is shrunk back to
// between requests (see docs/benchmarks.md, the fourteenth wave).
//
// Lambda needs none of this: API Gateway delivers whole bodies, and a
// function serves one request at a time.
func guardBodies(next http.Handler, idle time.Duration, minRate int64, budget *bodyBudget) *bodyGuard {
	return &bodyGuard{next: next, idle: idle, minRate: minRate, budget: budget, date: &serverDate{}}
}

// bodyGuard is guardBodies' handler.
type bodyGuard struct {
	next    http.Handler
	idle    time.Duration
	minRate int64
	budget  *bodyBudget
	date    *serverDate
}

func (h *bodyGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lane.Serve(r.Context(), r.ProtoMajor)
	if r.Body == nil || r.Body == http.NoBody {
		h.next.ServeHTTP(w, r)
		return
	}
	g := &guardedRequest{body: progressBody{ReadCloser: r.Body, w: w, idle: h.idle, minRate: h.minRate, bodies: h.budget}}
	b := &g.body
	g.w = refusingWriter{ResponseWriter: w, body: b, date: h.date}
	defer b.refundAll()
	r.Body = b
	h.next.ServeHTTP(&g.w, r)
}

// guardedRequest is a request's guarded body and its answer's writer, allocated
// together: one allocation a request, not two.
type guardedRequest struct {
	body progressBody
	w    refusingWriter
}

// deadlineSlack: a read's deadline is set up to idle/deadlineSlack later
// than its budget, and kept while it covers the next reads' budgets within
// that much. Re-arming it on every read (a timer operation each, two reads
// for the smallest body) showed in profiles; a client is allowed a
// sixty-fourth of idle more, never less.
const deadlineSlack = 64

// progressBody is a request body whose reads carry a deadline.
type progressBody struct {
	io.ReadCloser
	w       http.ResponseWriter // its answer's: where its read deadline is set
	idle    time.Duration
	minRate int64

	// Reads of one body do not overlap; these belong to the reader.
	read     int64
	waited   time.Duration
	deadline time.Time // the last one set

	ended atomic.Bool // EOF seen: the connection is net/http's again

	mu        sync.Mutex // orders deadlines set by Read and by abandon
	abandoned bool

	bodies  *bodyBudget  // nil: none
	charged atomic.Int64 // what this body holds of bodies
}

func (b *progressBody) Read(p []byte) (int, error) {
	if b.ended.Load() {
		// net/http now reads the connection for the next request: a
		// deadline set here would cut that read.
		return b.ReadCloser.Read(p)
	}
	budget, byRate := b.budget()
	start := time.Now()
	if want := start.Add(budget); b.deadline.Before(want) || b.deadline.Sub(want) > b.idle/deadlineSlack {
		b.mu.Lock()
		if !b.abandoned {
			// Not all writers support deadlines (a test recorder); then
			// the server's own timeouts are all there is.
			b.deadline = want.Add(b.idle / deadlineSlack)
			_ = setReadDeadline(b.w, b.deadline)
		}
		b.mu.Unlock()
	}
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	b.read += int64(n)
	switch {
	case err == io.EOF:
		b.ended.Store(true)
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.mu.Lock()
		abandoned := b.abandoned
		b.mu.Unlock()
		if abandoned {
			return n, errAbandoned
		}
		if byRate {
			return n, api.RequestTimeout("The request body arrived too slowly: %d bytes in %s; it must keep up at least %d bytes per second, with pauses under %s.",
				b.read, b.waited.Round(time.Millisecond), b.minRate, b.idle)
		}
		return n, api.RequestTimeout("The request body stalled: no byte arrived for %s.", b.idle)
	}
	return n, err
}

// budget is how long the next read may wait, and whether the rate (rather
// than the idle limit) set it. It is negative once the body is behind.
func (b *progressBody) budget() (time.Duration, bool) {
	if b.minRate <= 0 {
		return b.idle, false
	}
	// The waiting the bytes so far, and the next one, have earned: idle as
	// a start, then one second per minRate bytes.
	earned := max(float64(b.idle), float64(b.read+1)/float64(b.minRate)*float64(time.Second))
	if left := earned - float64(b.waited); left < float64(b.idle) {
		return time.Duration(left), true
	}
	return b.idle, false
}

var errAbandoned = errors.New("request body abandoned: the answer began before it was read")

// abandon gives up on the rest of the body: a read in progress, or to come,
// fails at once, and net/http's drain after the handler does not wait.
func (b *progressBody) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.abandoned = true
	_ = setReadDeadline(b.w, time.Now())
}

// setReadDeadline sets w's connection's read deadline as
// http.ResponseController does (through Unwrap), without making one: a
// ResponseController is an allocation a request.
func setReadDeadline(w http.ResponseWriter, deadline time.Time) error {
	for {
		switch t := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return t.SetReadDeadline(deadline)
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return fmt.Errorf("set read deadline: %w", http.ErrNotSupported)
		}
	}
}

// refusingWriter closes the connection of an answer that begins before its
// request's body has ended, instead of letting net/http wait for that body.
type refusingWriter struct {
	http.ResponseWriter
	body  *progressBody
	date  *serverDate
	begun bool
}

func (w *refusingWriter) begin() {
	if w.begun {
		return
	}
	w.begun = true
	h := w.Header()
	if _, ok := h["Date"]; !ok {
		h["Date"] = w.date.at(time.Now())
	}
	if !w.body.ended.Load() {
		h.Set("Connection", "close")
		w.body.abandon()
	}
}

// serverDate is the Date header's value for the current second, made once
// that second: what net/http would set, without formatting it per answer.
type serverDate struct {
	cur atomic.Pointer[dateValue]
}

type dateValue struct {
	sec int64
	v   []string // capacity 1: a header's Add copies it rather than write into it
}

// at is the Date header value for now.
func (d *serverDate) at(now time.Time) []string {
	sec := now.Unix()
	if c := d.cur.Load(); c != nil && c.sec == sec {
		return c.v
	}
	c := &dateValue{sec: sec, v: []string{now.UTC().Format(http.TimeFormat)}}
	d.cur.Store(c)
	return c.v
}

func (w *refusingWriter) WriteHeader(code int) {
	if code >= 200 {
		w.begin()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusingWriter) Write(p []byte) (int, error) {
	w.begin()
	return w.ResponseWriter.Write(p)
}

// Flush flushes when the underlying writer can.
func (w *refusingWriter) Flush() {
	w.begin()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *refusingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
