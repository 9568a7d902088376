package middleware

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// BenchmarkWrap is the middleware around a keyed route that publishes,
// over a handler that looks up what a model call's handler does (the
// request id, the principal, the pending events, the clock): what the
// middleware allocates and its context lookups cost, without a network.
func BenchmarkWrap(b *testing.B) {
	a := masterKeyAuth(b)
	h := New(Deps{Auth: a}).Wrap(Rule{Method: "POST", Pattern: "/x", Access: AnyKey, Publishes: true}, func(w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		if api.RequestID(ctx) == "" || !auth.FromContext(ctx).Admin || ctxvalue.From[logevent.Pending](ctx) == nil {
			b.Fatal("the context lacks the request's values")
		}
		api.AddWait(ctx, time.Millisecond)
		api.SetOverhead(w.Header(), ctx)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}, false)
	req := httptest.NewRequest(http.MethodPost, "/x", nil)
	req.Header.Set("Authorization", "Bearer sk-master")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
