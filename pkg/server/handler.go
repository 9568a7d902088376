package server

import (
	"context"
	"errors"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// Options choose what a Handler serves.
type Options struct {
	// Function, when set, mounts only that function's routes (a Lambda
	// function); empty mounts every route (the local process).
	Function string
	// AwaitPublishes makes a route that publishes log events wait for its
	// publishes before it returns, once its answer is written and flushed:
	// a Lambda function freezes when its handler returns. Without it (the
	// local process) they finish in the background, and the emitter's
	// Drain waits for them at shutdown.
	AwaitPublishes bool
}

// Handler builds the http.Handler for the routes selected by opts.
func Handler(s *Services, opts Options) (http.Handler, error) {
	mux := http.NewServeMux()
	methods := map[string][]string{} // pattern → methods, for 405s
	mounted := 0
	var aws awsPrefixes
	for _, rt := range Routes() {
		if opts.Function != "" && rt.Function != opts.Function {
			continue
		}
		if rt.AWSErrors {
			aws = append(aws, routePrefix(rt.Pattern))
		}
		mux.Handle(rt.Method+" "+rt.Pattern, s.wrap(rt, rt.handler(s), opts.AwaitPublishes))
		methods[rt.Pattern] = append(methods[rt.Pattern], rt.Method)
		mounted++
	}
	if mounted == 0 {
		return nil, errors.New("server: no routes for function " + opts.Function)
	}
	for pattern, ms := range methods {
		allow := strings.Join(ms, ", ")
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			r = api.StartRequest(w, r)
			w.Header().Set("Allow", allow)
			aws.writeError(w, r, api.MethodNotAllowed(r.Method, r.URL.Path))
		})
	}
	for pattern := range methods {
		// A pattern ending in a {name...} wildcard would have the mux answer
		// its bare prefix (/anthropic) with a redirect and an HTML body.
		if i := strings.LastIndex(pattern, "/{"); i > 0 && strings.HasSuffix(pattern, "...}") {
			prefix := pattern[:i]
			mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
				r = api.StartRequest(w, r)
				aws.writeError(w, r, api.NotFound("Unknown route: %s %s. Name the endpoint after the prefix: %s/….", r.Method, r.URL.Path, prefix))
			})
		}
	}
	mux.HandleFunc("/", unknownRoute)
	return rejectUncleanPaths(mux, aws), nil
}

// awsPrefixes are the path prefixes whose errors are in AWS's shape
// (Route.AWSErrors).
type awsPrefixes []string

// routePrefix is a pattern's first segment ("/bedrock/{endpoint...}" →
// "/bedrock").
func routePrefix(pattern string) string {
	if i := strings.IndexByte(pattern[1:], '/'); i >= 0 {
		return pattern[:i+1]
	}
	return pattern
}

// writeError renders err in the shape r's prefix uses.
func (a awsPrefixes) writeError(w http.ResponseWriter, r *http.Request, err error) {
	for _, p := range a {
		if r.URL.Path == p || strings.HasPrefix(r.URL.Path, p+"/") {
			api.WriteAWSError(w, r, err)
			return
		}
	}
	api.WriteError(w, r, err)
}

func unknownRoute(w http.ResponseWriter, r *http.Request) {
	r = api.StartRequest(w, r)
	api.WriteError(w, r, api.NotFound("Unknown route: %s %s.", r.Method, r.URL.Path))
}

// rejectUncleanPaths answers 400 for paths with dot segments or empty
// segments instead of letting the mux redirect them: a gateway has no use
// for them, and passthrough must never forward them.
func rejectUncleanPaths(next http.Handler, aws awsPrefixes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; !canonicalPath(p) {
			r = api.StartRequest(w, r)
			aws.writeError(w, r, api.InvalidValue("path", "The request path %q is not in canonical form (no '.', '..' or empty segments).", p))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalPath reports whether p is a path that path.Clean leaves as it
// is (but for a trailing slash). An absolute path with neither a dot nor an
// empty segment is, without Clean's pass over it.
func canonicalPath(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '/' && strings.IndexByte(p, '.') < 0 && !strings.Contains(p, "//") {
		return true
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// wrap adds the shared middleware to a route: request id, authentication and
// authorisation, and the one place errors are rendered. On a route that
// publishes log events, their publishes overlap with writing the answer:
// the answer (or the error) is written and flushed first; then, with await,
// they are awaited before the handler returns (a Lambda freezes once it
// has), else left to finish in the background.
func (s *Services) wrap(rt Route, h HandlerFunc, await bool) http.Handler {
	publishes := slices.Contains(rt.Needs, EventsPublish)
	writeError := api.WriteError
	switch {
	case rt.writeError != nil:
		writeError = rt.writeError
	case rt.AWSErrors:
		writeError = api.WriteAWSError
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request's context is built whole, then the request copied
		// once: each WithContext copies the whole request.
		ctx := api.Start(r.Context(), w)
		var pending *logevent.Pending
		if publishes {
			ctx, pending = logevent.Deferred(ctx)
		}
		var span trace.Span
		if s.Tracer.On() {
			ctx, span = s.Tracer.StartRequest(ctx, r, rt.Pattern)
		}
		tw := &trackingWriter{ResponseWriter: w, ctx: ctx, overhead: -1}
		ctx, err := s.authorize(ctx, rt, r)
		refused := err
		r = r.WithContext(ctx)
		if err == nil {
			err = h(tw, r)
			// The call's log events are priced by now: its budget
			// reservation becomes their cost.
			spend.Settle(ctx)
			refused = nil
		}
		if s.Metrics != nil || span != nil {
			defer s.record(rt, tw, span, err, refused)
		}
		if err != nil && tw.wrote {
			// The answer has begun (a stream) and cannot become an error
			// any more: it is cut (the connection closed, or the Lambda
			// edge's error trailer), so the client sees a broken answer,
			// never the clean end of a truncated one.
			api.LogLateError(r, err)
			if await && pending != nil {
				pending.Wait()
			}
			panic(http.ErrAbortHandler)
		}
		if err != nil {
			tw.overhead = api.Overhead(ctx) // the error's headers go out now
			writeError(w, r, err)
		}
		if await && pending != nil && pending.Waiting() {
			http.NewResponseController(w).Flush()
			pending.Wait()
		}
	})
}

// authorize finds the caller's key in r, resolves it to a principal stored
// in the returned context (ctx, r's own), checks the route's access rule, and
// admits the request against the key's and team's rpm/tpm limits (429) —
// before the handler reads a byte of the body, so a caller over its limits
// costs no more.
func (s *Services) authorize(ctx context.Context, rt Route, r *http.Request) (context.Context, error) {
	if rt.Access == Public {
		return ctx, nil
	}
	key := auth.ExtractKey(r, rt.KeyInQuery)
	p, err := s.Auth.Authenticate(ctx, key)
	if err != nil {
		s.authFailures.record(ctx, r, key, err)
		return ctx, err
	}
	if rt.Access == AdminOnly && !p.Admin {
		return ctx, api.Forbidden("This route needs the master key; team keys may not call %s %s.", rt.Method, rt.Pattern)
	}
	if err := s.Auth.Admit(ctx, p); err != nil {
		return ctx, err
	}
	if rt.Spends {
		if ctx, err = s.Budgets.Admit(ctx, p); err != nil {
			return ctx, err
		}
	}
	return auth.WithPrincipal(ctx, p), nil
}

// record measures a request that ended with err (nil: answered by the
// handler) and ends its span (nil: none); refused is the admission step's
// error, if it refused it.
func (s *Services) record(rt Route, tw *trackingWriter, span trace.Span, err, refused error) {
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
		switch c := api.AsError(refused).Code; {
		case strings.Contains(c, "budget"):
			reason = "budget"
		case c == "rate_limit_exceeded":
			reason = "rate_limit"
		}
	}
	s.Metrics.Request(rt.Pattern, status, code, time.Since(api.RequestStart(tw.ctx)), tw.overhead, reason)
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
