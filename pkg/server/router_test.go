package server

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/server/middleware"
)

// testRouter is the route table mounted with handlers that answer the
// pattern the request was routed by, behind the unclean-path check, and the
// same mux without the router's table in front.
func testRouter(t testing.TB, routes []Route) (rt *router, viaRouter, viaMux http.Handler) {
	t.Helper()
	aws := middleware.AWSPrefixes{"/bedrock"}
	rt = newRouter(routes, aws, func(Route) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Pattern", r.Pattern)
		})
	})
	return rt, rt, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := middleware.UncleanPath(r); err != nil {
			aws.Refuse(w, r, err)
			return
		}
		rt.mux.ServeHTTP(w, r)
	})
}

// sameAnswer serves r through both handlers and fails unless they answer
// alike: the same status, route and Allow and Location headers.
func sameAnswer(t testing.TB, viaRouter, viaMux http.Handler, method, target string) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: sluice\r\n\r\n")))
	if err != nil {
		return // the server would refuse it before any handler
	}
	got, want := httptest.NewRecorder(), httptest.NewRecorder()
	viaRouter.ServeHTTP(got, r.Clone(r.Context()))
	viaMux.ServeHTTP(want, r.Clone(r.Context()))
	for _, h := range []string{"X-Pattern", "Allow", "Location"} {
		if got.Header().Get(h) != want.Header().Get(h) {
			t.Errorf("%s %s: %s %q, the mux's %q", method, target, h, got.Header().Get(h), want.Header().Get(h))
		}
	}
	if got.Code != want.Code {
		t.Errorf("%s %s: status %d, the mux's %d", method, target, got.Code, want.Code)
	}
}

var routerMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT"}

var routerTargets = []string{
	"/anthropic/v1/messages", "/anthropic/", "/anthropic", "/anthropic/v1/messages/", "/anthropic/v1/%2Fx",
	"/%61nthropic/v1/messages", "/anthropic%2Fv1/messages", "/anthropic/v1/a%20b", "/anthropic/v1/a(b)",
	"/anthropic/v1/../x", "/anthropic//v1", "/anthropic/v1/messages?beta=true", "/anthropicx/v1",
	"/v1/chat/completions", "/v1/chat/completions/", "/v1/chat%2Fcompletions", "/v1/ch%61t/completions",
	"/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/models", "/v1/files", "/v1/files/abc",
	"/v1/files/abc/content", "/v1/uploads/u1/parts", "/team/t1/callback", "/team/t1/callback/c1",
	"/bedrock/model/x/invoke", "/bedrock/model/arn%3Aaws%2Fx/invoke", "/gemini/v1beta/models/x:generateContent",
	"/vertex_ai/v1/x", "/vertex-ai/v1/x", "/ui", "/ui/app.js", "/health/liveliness", "/", "*", "/unknown",
	"//v1/models", "/v1/./models", "http://sluice/anthropic/v1/messages", "/metrics",
}

// TestRouterRoutesAsTheMux: for every method and a path of each kind —
// routed by the table, escaped, unclean, unknown — the router answers as
// the mux alone does.
func TestRouterRoutesAsTheMux(t *testing.T) {
	_, viaRouter, viaMux := testRouter(t, Routes())
	for _, m := range routerMethods {
		for _, target := range routerTargets {
			sameAnswer(t, viaRouter, viaMux, m, target)
		}
	}
}

// TestRouterTable: the model routes are answered from the table, without
// the mux's walk; a request the table cannot name exactly goes to the mux.
func TestRouterTable(t *testing.T) {
	rt, _, _ := testRouter(t, Routes())
	for _, c := range []struct {
		method, target, want string // want: the table's pattern, "" for the mux
	}{
		{"POST", "/anthropic/v1/messages", "POST /anthropic/{endpoint...}"},
		{"GET", "/bedrock/model/arn%3Aaws%2Fx/invoke", "GET /bedrock/{endpoint...}"},
		{"POST", "/v1/chat/completions", "POST /v1/chat/completions"},
		{"GET", "/v1/files", "GET /v1/files"},
		{"HEAD", "/anthropic/v1/messages", ""},
		{"GET", "/v1/chat/completions", ""},
		{"POST", "/anthropic", ""},
		{"POST", "/%61nthropic/v1/messages", ""},
		{"GET", "/v1/files/abc", ""},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		got := ""
		if m := rt.find(r); m != nil {
			got = m.pattern
		}
		if got != c.want {
			t.Errorf("%s %s: the table's route %q, want %q", c.method, c.target, got, c.want)
		}
	}
}

// TestNoRouteUnderAWildcardPrefix: a route more specific than a prefix's
// wildcard cannot be mounted (its 405 pattern conflicts with the wildcard
// route), so the table may take every path under the prefix for the
// wildcard's.
func TestNoRouteUnderAWildcardPrefix(t *testing.T) {
	for _, other := range []Route{{Method: "POST", Pattern: "/p/x/{id}"}, {Method: "GET", Pattern: "/p/x"}, {Method: "POST", Pattern: "/{a}/x"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s %s mounted beside POST /p/{rest...}", other.Method, other.Pattern)
				}
			}()
			testRouter(t, []Route{{Method: "POST", Pattern: "/p/{rest...}"}, other})
		}()
	}
}

func FuzzRouterRoutesAsTheMux(f *testing.F) {
	for i, target := range routerTargets {
		f.Add(uint8(i), target)
	}
	_, viaRouter, viaMux := testRouter(f, Routes())
	f.Fuzz(func(t *testing.T, method uint8, target string) {
		sameAnswer(t, viaRouter, viaMux, routerMethods[int(method)%len(routerMethods)], target)
	})
}

// BenchmarkRouter is the route look-up of the bench's model calls, through
// the table and through the mux alone.
func BenchmarkRouter(b *testing.B) {
	rt, _, _ := testRouter(b, Routes())
	for _, target := range []string{"/anthropic/v1/messages", "/v1/chat/completions"} {
		for _, via := range []struct {
			name string
			h    http.Handler
		}{{"table", rt}, {"mux", rt.mux}} {
			b.Run(strings.ReplaceAll(target[1:], "/", "_")+"/"+via.name, func(b *testing.B) {
				r := httptest.NewRequest(http.MethodPost, target, nil)
				w := httptest.NewRecorder()
				b.ReportAllocs()
				for range b.N {
					via.h.ServeHTTP(w, r)
				}
			})
		}
	}
}
