package lambdaedge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// MaxBufferedResponse is the largest body a buffered answer may carry.
// Lambda refuses a synchronous response over 6 MB (6,291,456 bytes, JSON
// envelope and base64 included) and API Gateway then answers a bare 502;
// answering a clear 500 instead leaves room for the envelope.
const MaxBufferedResponse = 6<<20 - 64<<10

// Buffered returns the Lambda handler of a buffered route: the REST API proxy
// event becomes a request (NewRequest), h answers it into memory, and the
// answer goes back as one events.APIGatewayProxyResponse (aws-lambda-go-api-
// proxy's writer: multi-value headers, base64 for bodies that are not UTF-8).
//
// Every answer is an HTTP response with a nil error: a returned error would
// reach the client as API Gateway's bare 502. An event that cannot be a
// request answers 400 and a panicking handler 500, both in the OpenAI error
// shape. The only error returned is for http.ErrAbortHandler, a handler's way
// to say the client must not get a normal answer.
func Buffered(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, e events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		ctx = invocationContext(ctx, e.RequestContext.RequestID)
		r, handler := requestFor(ctx, &e, h)
		w := &bufferedWriter{ProxyResponseWriter: core.NewProxyResponseWriter()}
		if p, stack := serveRecovering(handler, w, r); p != nil {
			if p == http.ErrAbortHandler {
				return events.APIGatewayProxyResponse{}, fmt.Errorf("lambdaedge: %s %s: handler aborted the response", r.Method, r.URL.Path)
			}
			w = &bufferedWriter{ProxyResponseWriter: core.NewProxyResponseWriter()}
			writePanic(w, r, p, stack)
		}
		if !w.wrote {
			w.WriteHeader(http.StatusOK) // net/http's answer for a handler that wrote nothing
		}
		resp, err := w.GetProxyResponse()
		if err == nil && len(resp.Body) > MaxBufferedResponse {
			err = fmt.Errorf("%s %s answered %d bytes, over the %d a buffered Lambda response may carry; the route should stream",
				r.Method, r.URL.Path, len(resp.Body), MaxBufferedResponse)
		}
		if err != nil {
			w = &bufferedWriter{ProxyResponseWriter: core.NewProxyResponseWriter()}
			api.WriteError(w, api.StartRequest(w, r), api.Internal(err))
			resp, err = w.GetProxyResponse()
		}
		return resp, err
	}
}

// bufferedWriter records whether the handler answered at all.
type bufferedWriter struct {
	*core.ProxyResponseWriter
	wrote bool
}

func (w *bufferedWriter) WriteHeader(code int) {
	w.wrote = true
	w.ProxyResponseWriter.WriteHeader(code)
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ProxyResponseWriter.Write(p)
}

// requestFor converts the event, or, when it cannot be a request, returns a
// stand-in request and a handler that answers 400.
func requestFor(ctx context.Context, e *events.APIGatewayProxyRequest, h http.Handler) (*http.Request, http.Handler) {
	r, err := NewRequest(ctx, e)
	if err == nil {
		return r, h
	}
	r, _ = http.NewRequestWithContext(ctx, http.MethodGet, "/", http.NoBody)
	r.Method = e.HTTPMethod
	return r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, api.StartRequest(w, r), api.InvalidValue("request", "The request could not be read: %v.", err))
	})
}

// serveRecovering runs h and returns what it panicked with (nil if it did
// not) and the stack where it did.
func serveRecovering(h http.Handler, w http.ResponseWriter, r *http.Request) (panicked any, stack []byte) {
	defer func() {
		if p := recover(); p != nil {
			panicked, stack = p, debug.Stack()
		}
	}()
	h.ServeHTTP(w, r)
	return nil, nil
}

// logPanic logs a handler's panic with its stack.
func logPanic(r *http.Request, p any, stack []byte) {
	slog.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path,
		"panic", fmt.Sprint(p), "stack", string(stack))
}

// writePanic logs a handler's panic and answers 500.
func writePanic(w http.ResponseWriter, r *http.Request, p any, stack []byte) {
	logPanic(r, p, stack)
	api.WriteError(w, api.StartRequest(w, r), api.Internal(panicError{p}))
}

// panicError carries a recovered panic value as an error.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.v) }
