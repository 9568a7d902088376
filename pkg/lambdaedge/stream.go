package lambdaedge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// streamBufferSize is how much the streaming writer gathers before it sends
// a piece on its own, as net/http's response buffer does; a handler's Flush
// sends what it has at once.
const streamBufferSize = 4 << 10

// Streaming returns the Lambda handler of a streaming route, for API
// Gateway's REST response streaming (ResponseTransferMode: RESPONSE_STREAM).
// The event becomes a request (NewRequest); h runs in its own goroutine and
// its answer is aws-lambda-go's events.APIGatewayProxyStreamingResponse: the
// status and headers h committed, and the body as h writes it, which the
// response reads as API Gateway expects it — a JSON prelude (statusCode,
// headers, multiValueHeaders, cookies), 8 NUL bytes, then the body. The
// runtime (StartStreaming) posts that reader to the Runtime API as a chunked
// body, so each piece the handler sends (a full buffer, or a Flush) reaches
// API Gateway while the handler is still running.
//
// As in Buffered, every answer is an HTTP response: a bad event answers 400,
// a panic before the answer began answers 500. A panic after it began (or
// http.ErrAbortHandler) cuts the stream with an error, which the runtime
// reports in the Runtime API's error trailers, so the client sees a broken
// stream instead of a clean end.
func Streaming(h http.Handler) func(context.Context, *events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
	return func(ctx context.Context, e *events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
		if e == nil {
			e = &events.APIGatewayProxyRequest{}
		}
		ctx = invocationContext(ctx, e.RequestContext.RequestID)
		r, handler := requestFor(ctx, e, h)
		pr, pw := io.Pipe()
		w := &streamWriter{header: http.Header{}, pw: pw, ready: make(chan started, 1)}
		w.bw = bufio.NewWriterSize(pw, streamBufferSize)
		go w.serve(handler, r)
		s := <-w.ready
		if s.err != nil {
			pr.Close()
			return nil, s.err
		}
		resp := streamingResponse(s.status, s.header)
		resp.Body = pr
		return resp, nil
	}
}

// started is what the Lambda handler waits for: the status and headers,
// once the handler has committed them, or an error.
type started struct {
	status int
	header http.Header
	err    error
}

// streamWriter is the http.ResponseWriter of a streaming route. Status and
// headers are committed with the first body bytes (or Flush, or the handler's
// end), as net/http does, so a Content-Type can still be sniffed from them.
type streamWriter struct {
	header    http.Header
	status    int // from WriteHeader; 0 until then
	committed bool
	bodyOK    bool // the status allows a body
	bw        *bufio.Writer
	pw        *io.PipeWriter
	ready     chan started
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http
	}
	if w.committed || w.status != 0 || (code < 200 && code != http.StatusSwitchingProtocols) {
		return // superfluous, or informational (API Gateway has no use for 1xx)
	}
	w.status = code
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if !w.committed {
		w.commit(p)
	}
	if !w.bodyOK {
		return 0, http.ErrBodyNotAllowed
	}
	return w.bw.Write(p)
}

// Flush sends what the handler has written so far.
func (w *streamWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController, with the error.
func (w *streamWriter) FlushError() error {
	if !w.committed {
		w.commit(nil)
	}
	return w.bw.Flush()
}

// commit fixes the status and headers and hands the prelude to the Lambda
// handler; first is the first body write, for content sniffing.
func (w *streamWriter) commit(first []byte) {
	w.committed = true
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.bodyOK = bodyAllowed(w.status)
	if w.bodyOK && len(first) > 0 && w.header.Get("Content-Type") == "" && w.header.Get("Content-Encoding") == "" {
		w.header.Set("Content-Type", http.DetectContentType(first))
	}
	w.ready <- started{status: w.status, header: w.header.Clone()}
}

// serve runs the handler and ends the stream. A panic before the answer
// began becomes a 500; after, it cuts the stream with an error.
func (w *streamWriter) serve(h http.Handler, r *http.Request) {
	p, stack := serveRecovering(h, w, r)
	switch {
	case p == nil:
	case !w.committed && p == http.ErrAbortHandler:
		w.ready <- started{err: fmt.Errorf("lambdaedge: %s %s: handler aborted the response", r.Method, r.URL.Path)}
		w.pw.CloseWithError(http.ErrAbortHandler)
		return
	case !w.committed:
		w.header, w.status = http.Header{}, 0
		writePanic(w, r, p, stack)
	default:
		if p != http.ErrAbortHandler {
			logPanic(r, p, stack)
		}
		w.bw.Flush()
		w.pw.CloseWithError(panicError{p})
		return
	}
	if !w.committed {
		w.commit(nil)
	}
	// A failed flush means the reader is gone (the Runtime API went away);
	// there is nobody left to tell.
	_ = w.bw.Flush()
	w.pw.Close()
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

// streamingResponse is the head of a streamed answer (API Gateway's "Lambda
// proxy integration format for response streaming"): single-valued headers
// in Headers, repeated ones in MultiValueHeaders, Set-Cookie in Cookies.
func streamingResponse(status int, h http.Header) *events.APIGatewayProxyStreamingResponse {
	resp := &events.APIGatewayProxyStreamingResponse{StatusCode: status}
	for k, vs := range h {
		switch {
		case len(vs) == 0:
		case strings.EqualFold(k, "Set-Cookie"):
			resp.Cookies = append(resp.Cookies, vs...)
		case len(vs) == 1:
			if resp.Headers == nil {
				resp.Headers = map[string]string{}
			}
			resp.Headers[k] = vs[0]
		default:
			if resp.MultiValueHeaders == nil {
				resp.MultiValueHeaders = map[string][]string{}
			}
			resp.MultiValueHeaders[k] = append([]string(nil), vs...)
		}
	}
	return resp
}
