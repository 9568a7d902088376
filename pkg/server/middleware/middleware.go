// Package middleware is what runs around every route handler: the request's
// start (id, clock), the error shape of its path, authentication and the
// route's access rule, admission against the key's and team's rate limits and
// budgets, the one place errors are rendered, the log events' publishes
// overlapped with the answer, and the request's metrics and span. The route
// table (pkg/server) says what each route needs of it in a Rule.
package middleware

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/metrics"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// Access says who may call a route.
type Access int

const (
	// Public routes need no key (health checks).
	Public Access = iota
	// AnyKey routes need a valid key: a team key or the master key.
	AnyKey
	// AdminOnly routes need the master key; team keys get 403.
	AdminOnly
)

// HandlerFunc is a route handler: it returns an error instead of writing
// one, and the middleware renders it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Rule is what the middleware needs to know of a route.
type Rule struct {
	Method  string
	Pattern string // names the route in metrics and spans
	Access  Access
	// KeyInQuery accepts the key in the ?key= query parameter.
	KeyInQuery bool
	// Spends has the caller's budgets admit each request (pkg/spend).
	Spends bool
	// Publishes marks a handler that publishes log events: their publishes
	// overlap with writing the answer (see Chain.Wrap).
	Publishes bool
	// WriteError renders the route's errors; nil: api.WriteError (OpenAI's
	// shape).
	WriteError func(http.ResponseWriter, *http.Request, error)
}

// Deps are what the middleware works with.
type Deps struct {
	// Auth resolves keys and admits requests against their rate limits.
	Auth *auth.Service
	// Budgets admits the requests of routes that spend.
	Budgets *spend.Budgets
	// Metrics records each request; nil records none.
	Metrics *metrics.Metrics
	// Tracer makes each request's span; nil makes none.
	Tracer *traces.Tracer
	// Now is the clock of the failed-authentication log's rate limit; nil
	// means time.Now.
	Now func() time.Time
}

// Chain wraps route handlers in the middleware.
type Chain struct {
	deps         Deps
	authFailures *authFailureLog
}

// New returns the middleware over deps.
func New(deps Deps) *Chain {
	return &Chain{deps: deps, authFailures: newAuthFailureLog(deps.Now)}
}

// Wrap adds the middleware to h, a handler of the route rule describes:
// request id, authentication and authorisation, and the one place errors
// are rendered. On a route that publishes log events, their publishes
// overlap with writing the answer: the answer (or the error) is written and
// flushed first; then, with await, they are awaited before the handler
// returns (a Lambda freezes once it has), else left to finish in the
// background.
func (c *Chain) Wrap(rule Rule, h HandlerFunc, await bool) http.Handler {
	w := &wrapped{chain: c, rule: rule, h: h, await: await, writeError: rule.WriteError}
	if w.writeError == nil {
		w.writeError = api.WriteError
	}
	return w
}

// wrapped is a route's handler inside the middleware. A type of its own,
// not a closure under http.HandlerFunc: every frame between net/http and a
// route counts against the stack a connection's goroutine is shrunk back
// to between requests (docs/benchmarks.md, the fourteenth wave).
type wrapped struct {
	chain      *Chain
	rule       Rule
	h          HandlerFunc
	await      bool
	writeError func(http.ResponseWriter, *http.Request, error)
}

func (m *wrapped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The request's context is built whole, then the request copied
	// once: each WithContext copies the whole request. Its layers and
	// writer are one allocation.
	st := &requestState{}
	st.Start(r.Context(), w)
	var ctx context.Context = st
	st.publishes = m.rule.Publishes
	var span trace.Span
	if m.chain.deps.Tracer.On() {
		ctx, span = m.chain.deps.Tracer.StartRequest(ctx, r, m.rule.Pattern)
	}
	st.tw = trackingWriter{ResponseWriter: w, ctx: ctx, overhead: -1}
	tw := &st.tw
	ctx, err := m.chain.authorize(ctx, &m.rule, r, st)
	refused := err
	r = r.WithContext(ctx)
	if err == nil {
		err = m.h(tw, r)
		// The call's log events are priced by now: its budget
		// reservation becomes their cost.
		spend.Settle(ctx)
		refused = nil
	}
	if m.chain.deps.Metrics != nil || span != nil {
		defer m.chain.record(&m.rule, tw, span, err, refused)
	}
	m.finish(w, r, st, err)
}

// finish writes err, if any, and on a route that publishes overlaps its
// publishes with the answer: written and flushed first, then, with await,
// waited for.
func (m *wrapped) finish(w http.ResponseWriter, r *http.Request, st *requestState, err error) {
	var pending *logevent.Pending
	if st.publishes {
		pending = &st.pending
	}
	if err != nil && st.tw.wrote {
		// The answer has begun (a stream) and cannot become an error any
		// more: it is cut (the connection closed, or the Lambda edge's
		// error trailer), so the client sees a broken answer, never the
		// clean end of a truncated one.
		api.LogLateError(r, err)
		if m.await && pending != nil {
			pending.Wait()
		}
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		st.tw.overhead = api.Overhead(r.Context()) // the error's headers go out now
		m.writeError(w, r, err)
	}
	if m.await && pending != nil && pending.Waiting() {
		http.NewResponseController(w).Flush()
		pending.Wait()
	}
}

// requestState is what Wrap makes a request, in one allocation: its
// context's one layer of sluice's own, carrying the request's id and clock
// (api.Call), its pending log events (as logevent.Deferred's layer: a zero
// Pending is a deferred one) and its principal (as auth.WithPrincipal's),
// and its tracking writer. A layer each would be an allocation each, and a
// step each of every context lookup the call makes.
type requestState struct {
	api.Call
	publishes bool // pending is carried
	authed    bool // principal is carried: set once, before the handler runs
	pending   logevent.Pending
	principal auth.Principal
	tw        trackingWriter
}

func (s *requestState) Value(k any) any {
	// The key is told first: authed is written while authorize runs, and
	// goroutines the request starts meanwhile (the transport's, looking
	// up their parent's cancel) read this layer for keys of their own.
	switch {
	case ctxvalue.Is[logevent.Pending](k) && s.publishes:
		return &s.pending
	case ctxvalue.Is[auth.Principal](k) && s.authed:
		return &s.principal
	}
	return s.Call.Value(k)
}

// authorize finds the caller's key in r, resolves it to a principal stored
// in st (the layer under ctx, r's own), checks the route's access rule, and
// admits the request against the key's and team's rpm/tpm limits (429) —
// before the handler reads a byte of the body, so a caller over its limits
// costs no more.
func (c *Chain) authorize(ctx context.Context, rule *Rule, r *http.Request, st *requestState) (context.Context, error) {
	if rule.Access == Public {
		return ctx, nil
	}
	key := auth.ExtractKey(r, rule.KeyInQuery)
	p, err := c.deps.Auth.Authenticate(ctx, key)
	if err != nil {
		c.authFailures.record(ctx, r, key, err)
		return ctx, err
	}
	if rule.Access == AdminOnly && !p.Admin {
		return ctx, api.Forbidden("This route needs the master key; team keys may not call %s %s.", rule.Method, rule.Pattern)
	}
	if err := c.deps.Auth.Admit(ctx, p); err != nil {
		return ctx, err
	}
	if rule.Spends {
		if ctx, err = c.deps.Budgets.Admit(ctx, p); err != nil {
			return ctx, err
		}
	}
	st.principal, st.authed = p, true
	return ctx, nil
}

// record measures a request that ended with err (nil: answered by the
// handler) and ends its span (nil: none); refused is the admission step's
// error, if it refused it.
func (c *Chain) record(rule *Rule, tw *trackingWriter, span trace.Span, err, refused error) {
	status, code := tw.status, ""
	if status == 0 {
		status = http.StatusOK
	}
	if err != nil && !tw.wrote {
		ae := api.AsError(err)
		status, code = ae.Status, ae.Code
	} else if err != nil {
		code = api.AsError(err).Code
	}
	reason := ""
	if refused != nil {
		switch code := api.AsError(refused).Code; {
		case strings.Contains(code, "budget"):
			reason = "budget"
		case code == "rate_limit_exceeded":
			reason = "rate_limit"
		}
	}
	c.deps.Metrics.Request(rule.Pattern, status, code, time.Since(api.RequestStart(tw.ctx)), tw.overhead, reason)
	if span != nil {
		traces.EndRequest(span, status, code)
	}
}

// trackingWriter records whether the response has started, its status,
// and sluice's overhead when its headers went out.
type trackingWriter struct {
	http.ResponseWriter
	ctx      context.Context
	wrote    bool
	status   int
	overhead time.Duration // -1 until the headers go out
}

func (w *trackingWriter) started(code int) {
	if !w.wrote {
		w.wrote, w.status = true, code
		w.overhead = api.Overhead(w.ctx)
	}
}

func (w *trackingWriter) WriteHeader(code int) {
	w.started(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.started(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush flushes when the underlying writer can (the Lambda streaming writer may not).
func (w *trackingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.started(http.StatusOK)
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
