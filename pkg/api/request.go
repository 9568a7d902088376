package api

import (
	"context"
	"net/http"
	"time"

	"github.com/sluice-gateway/sluice/pkg/ids"
)

// RequestIDHeader carries the request id on every response.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

type requestStartKey struct{}

// WithRequestID returns ctx carrying a request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestStart returns when sluice began handling the request (from
// StartRequest), or now when the context has no start.
func RequestStart(ctx context.Context) time.Time {
	if t, ok := ctx.Value(requestStartKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

// NewRequestID makes a request id (req_…).
func NewRequestID() string { return ids.New(ids.Request) }

// StartRequest gives r a request id and a start time (so time spent in auth
// counts as sluice's overhead), sets the id on the response, and returns the
// request carrying both.
func StartRequest(w http.ResponseWriter, r *http.Request) *http.Request {
	start := time.Now()
	id := NewRequestID()
	w.Header().Set(RequestIDHeader, id)
	ctx := context.WithValue(WithRequestID(r.Context(), id), requestStartKey{}, start)
	return r.WithContext(ctx)
}
