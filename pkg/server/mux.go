package server

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/server/middleware"
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

// Handler builds the http.Handler for the routes selected by opts: each
// route's handler over s, inside the middleware (pkg/server/middleware).
func Handler(s *Services, opts Options) (http.Handler, error) {
	var routes []Route
	var aws middleware.AWSPrefixes
	for _, rt := range Routes() {
		if opts.Function != "" && rt.Function != opts.Function {
			continue
		}
		if rt.AWSErrors {
			aws = append(aws, routePrefix(rt.Pattern))
		}
		routes = append(routes, rt)
	}
	if len(routes) == 0 {
		return nil, errors.New("server: no routes for function " + opts.Function)
	}
	return newRouter(routes, aws, func(rt Route) http.Handler {
		return s.edge.Wrap(rt.rule(), rt.handler(s), opts.AwaitPublishes)
	}), nil
}

// newMux mounts routes, each's handler made by handler, with the answers
// for what no route serves: a 405 naming a pattern's methods, the bare
// prefix of a {name...} pattern, and every other path.
func newMux(routes []Route, aws middleware.AWSPrefixes, handler func(Route) http.Handler) (*http.ServeMux, []methodRoute) {
	mux := http.NewServeMux()
	methods := map[string][]string{} // pattern → methods, for 405s
	var mounted []methodRoute
	for _, rt := range routes {
		pattern := rt.Method + " " + rt.Pattern
		h := handler(rt)
		mux.Handle(pattern, h)
		mounted = append(mounted, methodRoute{method: rt.Method, path: rt.Pattern, pattern: pattern, h: h})
		methods[rt.Pattern] = append(methods[rt.Pattern], rt.Method)
	}
	for pattern, ms := range methods {
		allow := strings.Join(ms, ", ")
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			aws.Refuse(w, r, api.MethodNotAllowed(r.Method, r.URL.Path))
		})
		// A pattern ending in a {name...} wildcard would have the mux answer
		// its bare prefix (/anthropic) with a redirect and an HTML body.
		if i := strings.LastIndex(pattern, "/{"); i > 0 && strings.HasSuffix(pattern, "...}") {
			prefix := pattern[:i]
			mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
				aws.Refuse(w, r, api.NotFound("Unknown route: %s %s. Name the endpoint after the prefix: %s/….", r.Method, r.URL.Path, prefix))
			})
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		middleware.AWSPrefixes(nil).Refuse(w, r, api.NotFound("Unknown route: %s %s.", r.Method, r.URL.Path))
	})
	return mux, mounted
}

// rule is what the middleware needs to know of rt.
func (rt Route) rule() middleware.Rule {
	rule := middleware.Rule{
		Method: rt.Method, Pattern: rt.Pattern, Access: rt.Access, KeyInQuery: rt.KeyInQuery, Spends: rt.Spends,
		Publishes: slices.Contains(rt.Needs, EventsPublish), WriteError: rt.writeError,
	}
	if rule.WriteError == nil && rt.AWSErrors {
		rule.WriteError = api.WriteAWSError
	}
	return rule
}

// routePrefix is a pattern's first segment ("/bedrock/{endpoint...}" →
// "/bedrock").
func routePrefix(pattern string) string {
	if i := strings.IndexByte(pattern[1:], '/'); i >= 0 {
		return pattern[:i+1]
	}
	return pattern
}
