package api

import (
	"context"
	"net/http"

	"github.com/sluice-gateway/sluice/pkg/ids"
)

// RequestIDHeader carries the request id on every response.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// WithRequestID returns ctx carrying a request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewRequestID makes a request id (req_…).
func NewRequestID() string { return ids.New(ids.Request) }

// StartRequest gives r a request id, sets it on the response, and returns
// the request carrying it.
func StartRequest(w http.ResponseWriter, r *http.Request) *http.Request {
	id := NewRequestID()
	w.Header().Set(RequestIDHeader, id)
	return r.WithContext(WithRequestID(r.Context(), id))
}
