package middleware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// seen is what a handler found in its request's context.
type seen struct {
	id        string
	principal *auth.Principal
	pending   *logevent.Pending
	deadline  bool
}

// serveOnce wraps a handler recording its context under rule, serves one
// request with the master key, and returns what the handler saw.
func serveOnce(t *testing.T, rule Rule) seen {
	t.Helper()
	a := masterKeyAuth(t)
	var got seen
	h := New(Deps{Auth: a}).Wrap(rule, func(w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		got = seen{id: api.RequestID(ctx), principal: ctxvalue.From[auth.Principal](ctx), pending: ctxvalue.From[logevent.Pending](ctx)}
		_, got.deadline = ctx.Deadline()
		w.WriteHeader(http.StatusNoContent)
		return nil
	}, false)
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("Authorization", "Bearer sk-master")
	ctx, cancel := context.WithTimeout(req.Context(), time.Hour)
	defer cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got.id == "" || rec.Header().Get(api.RequestIDHeader) != got.id {
		t.Errorf("request id %q in the context, %q on the answer", got.id, rec.Header().Get(api.RequestIDHeader))
	}
	if !got.deadline {
		t.Error("the request's deadline was lost")
	}
	return got
}

func TestContextCarriesThePrincipalAndPendingEvents(t *testing.T) {
	got := serveOnce(t, Rule{Method: "GET", Pattern: "/x", Access: AnyKey, Publishes: true})
	if got.principal == nil || !got.principal.Admin {
		t.Errorf("principal %+v, want the master key's", got.principal)
	}
	if got.pending == nil {
		t.Error("no pending log events on a route that publishes")
	}
}

func TestPublicRouteCarriesNoPrincipal(t *testing.T) {
	got := serveOnce(t, Rule{Method: "GET", Pattern: "/x", Access: Public})
	if got.principal != nil {
		t.Errorf("principal %+v on a public route, want none", got.principal)
	}
	if got.pending != nil {
		t.Error("pending log events on a route that does not publish")
	}
}

// masterKeyAuth is an auth service over a fresh embedded store whose one
// key is the master key "sk-master".
func masterKeyAuth(tb testing.TB) *auth.Service {
	tb.Helper()
	db, err := local.OpenDB(filepath.Join(tb.TempDir(), "db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	records, err := local.NewRecords(db)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := auth.NewService(records, local.NewLimiter(), "sk-master", auth.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
