package lambdaedge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// StreamContentType is the content type of a streamed answer: the one API
// Gateway (and Function URLs) read as "JSON prelude, 8 NUL bytes, body".
const StreamContentType = "application/vnd.awslambda.http-integration-response"

// streamBufferSize is how much the streaming writer gathers before it sends
// a piece on its own, as net/http's response buffer does; a handler's Flush
// sends what it has at once.
const streamBufferSize = 4 << 10

// preludeDelimiter separates the prelude from the body.
var preludeDelimiter = make([]byte, 8)

// Streaming returns the Lambda handler of a streaming route, for API
// Gateway's REST response streaming (ResponseTransferMode: RESPONSE_STREAM).
// The event becomes a request (NewRequest); h runs in its own goroutine and
// its answer is written, as it writes it, in the format API Gateway expects:
// a JSON prelude (statusCode, headers, multiValueHeaders, cookies), 8 NUL
// bytes, then the body. aws-lambda-go posts the returned reader to the
// Runtime API as a chunked body, so each piece the handler sends (a full
// buffer, or a Flush) reaches API Gateway while the handler is still running.
//
// As in Buffered, every answer is an HTTP response: a bad event answers 400,
// a panic before the answer began answers 500. A panic after it began (or
// http.ErrAbortHandler) cuts the stream with an error, which aws-lambda-go
// reports in the Runtime API's error trailers, so the client sees a broken
// stream instead of a clean end.
func Streaming(h http.Handler) func(context.Context, *events.APIGatewayProxyRequest) (*StreamingResponse, error) {
	return func(ctx context.Context, e *events.APIGatewayProxyRequest) (*StreamingResponse, error) {
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
		return &StreamingResponse{prelude: s.prelude, body: pr}, nil
	}
}

// StreamingResponse is a streamed answer: the prelude, then the body as the
// handler writes it. aws-lambda-go sends it as the raw response (it is an
// io.Reader that refuses JSON marshalling) with ContentType's content type.
type StreamingResponse struct {
	prelude []byte
	body    io.ReadCloser
}

// Read reads the prelude and delimiter, then the body.
func (s *StreamingResponse) Read(p []byte) (int, error) {
	if len(s.prelude) > 0 {
		n := copy(p, s.prelude)
		s.prelude = s.prelude[n:]
		return n, nil
	}
	return s.body.Read(p)
}

// Close stops the stream: a handler still writing gets an error.
func (s *StreamingResponse) Close() error { return s.body.Close() }

// ContentType is the content type aws-lambda-go posts the answer with.
func (s *StreamingResponse) ContentType() string { return StreamContentType }

// MarshalJSON fails on purpose: aws-lambda-go sends a handler's result as
// JSON unless marshalling fails and the result is an io.Reader.
func (s *StreamingResponse) MarshalJSON() ([]byte, error) {
	return nil, errors.New("lambdaedge: a streaming response is not JSON")
}

// started is what the Lambda handler waits for: the prelude, once the
// handler has committed its status and headers, or an error.
type started struct {
	prelude []byte
	err     error
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
	w.ready <- started{prelude: encodePrelude(w.status, w.header)}
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

// prelude is the JSON head of a streamed answer (API Gateway's "Lambda proxy
// integration format for response streaming"). Single-valued headers go in
// headers, repeated ones in multiValueHeaders, Set-Cookie in cookies.
type prelude struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers,omitempty"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders,omitempty"`
	Cookies           []string            `json:"cookies,omitempty"`
}

// encodePrelude renders the prelude and the delimiter.
func encodePrelude(status int, h http.Header) []byte {
	p := prelude{StatusCode: status}
	for k, vs := range h {
		switch {
		case len(vs) == 0:
		case strings.EqualFold(k, "Set-Cookie"):
			p.Cookies = append(p.Cookies, vs...)
		case len(vs) == 1:
			if p.Headers == nil {
				p.Headers = map[string]string{}
			}
			p.Headers[k] = vs[0]
		default:
			if p.MultiValueHeaders == nil {
				p.MultiValueHeaders = map[string][]string{}
			}
			p.MultiValueHeaders[k] = append([]string(nil), vs...)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		// Strings, string slices and an int always encode.
		panic(fmt.Sprintf("lambdaedge: encode prelude: %v", err))
	}
	b.Truncate(b.Len() - 1) // the encoder's newline
	b.Write(preludeDelimiter)
	return b.Bytes()
}
