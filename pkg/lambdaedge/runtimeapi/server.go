// Package runtimeapi implements the Lambda Runtime API (version 2018-06-01)
// on 127.0.0.1 — /next hands out events, /response takes buffered and
// streamed answers (chunked, with the error trailers), /error and
// /init/error take failures — and Exec starts a built bootstrap pointed at
// it.
//
// Functions run under AWS's own emulator (package rie) everywhere it can
// show what is tested. This harness stays for what the emulator cannot:
// it buffers a whole answer before it answers the invocation and hides the
// Runtime API exchange, so only here can a test see a streamed answer's
// chunks as they arrive (a first event leaving while the handler runs), a
// streamed answer's error trailers, the response mode and content type the
// runtime declared, a contract violation by the runtime, an init error or
// init timeout as such, and a process exiting after a panic (the emulator
// restarts it).
//
// Reference: https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html
package runtimeapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

// Runtime API paths and headers.
const (
	apiPrefix = "/2018-06-01/runtime/"

	HeaderRequestID    = "Lambda-Runtime-Aws-Request-Id"
	HeaderDeadline     = "Lambda-Runtime-Deadline-Ms"
	HeaderFunctionARN  = "Lambda-Runtime-Invoked-Function-Arn"
	HeaderTraceID      = "Lambda-Runtime-Trace-Id"
	HeaderErrorType    = "Lambda-Runtime-Function-Error-Type"
	HeaderResponseMode = "Lambda-Runtime-Function-Response-Mode"
	TrailerErrorType   = "Lambda-Runtime-Function-Error-Type"
	TrailerErrorBody   = "Lambda-Runtime-Function-Error-Body"
)

// Limits Lambda applies to answers.
const (
	// MaxBufferedResponse is the largest buffered answer Lambda accepts.
	MaxBufferedResponse = 6 << 20
	// MaxStreamedResponse is the default cap on a streamed answer.
	MaxStreamedResponse = 200 << 20
)

// DefaultTimeout is an invocation's deadline when Server.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// DefaultInitTimeout is how long a started function may take to ask for its
// first event when Server.InitTimeout is zero: Lambda's 10 s.
const DefaultInitTimeout = 10 * time.Second

// Chunk is one piece of an answer as it reached the Runtime API.
type Chunk struct {
	At   time.Time
	Data []byte
}

// FunctionError is a failure the function reported: a posted /error, an
// /init/error, or the error trailers of a streamed answer.
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Result is the outcome of one invocation.
type Result struct {
	RequestID   string
	ContentType string
	// Streamed is true when the runtime answered in streaming mode:
	// Lambda-Runtime-Function-Response-Mode: streaming.
	Streamed bool
	// Body is the whole answer as posted; for an HTTP answer see DecodeHTTP.
	Body   []byte
	Chunks []Chunk
	// Error is set when the function failed: Body is then the error
	// document, if any.
	Error *FunctionError
	// Taken is when /next handed the event out; FirstByte when the first
	// byte of the answer arrived; Done when the answer was complete.
	Taken, FirstByte, Done time.Time
}

// Server is an in-process Lambda Runtime API for one function.
type Server struct {
	// FunctionARN is sent as Lambda-Runtime-Invoked-Function-Arn.
	FunctionARN string
	// Timeout is each invocation's deadline (DefaultTimeout when zero).
	Timeout time.Duration
	// InitTimeout bounds a started function's initialization
	// (DefaultInitTimeout when zero).
	InitTimeout time.Duration

	ln      net.Listener
	srv     *http.Server
	pending chan *invocation

	mu        sync.Mutex
	inflight  map[string]*invocation
	firstNext time.Time
	ready     chan struct{} // closed on the first /next: init is done
	initErr   *FunctionError
	failed    chan struct{} // closed on /init/error or when the process exits
	failure   error
	closed    chan struct{}
}

// invocation is an event on its way through the function.
type invocation struct {
	id      string
	event   []byte
	onChunk func(Chunk)
	taken   chan struct{} // closed when /next hands it out
	done    chan struct{} // closed when the answer is in
	claimed atomic.Bool   // an answer (response or error) has arrived
	result  Result
	// violation is how the answer broke the Runtime API contract; Invoke
	// returns it as its error.
	violation error
}

// NewServer starts a Runtime API on 127.0.0.1 on a free port.
func NewServer() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtimeapi: listen: %w", err)
	}
	s := &Server{
		FunctionARN: "arn:aws:lambda:us-east-1:123456789012:function:sluice-local",
		ln:          ln,
		pending:     make(chan *invocation),
		inflight:    map[string]*invocation{},
		ready:       make(chan struct{}),
		failed:      make(chan struct{}),
		closed:      make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apiPrefix+"invocation/next", s.next)
	mux.HandleFunc("POST "+apiPrefix+"invocation/{id}/response", s.response)
	mux.HandleFunc("POST "+apiPrefix+"invocation/{id}/error", s.invocationError)
	mux.HandleFunc("POST "+apiPrefix+"init/error", s.initError)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the host:port to give the function as AWS_LAMBDA_RUNTIME_API.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server; a /next still waiting gets an error, which makes
// the runtime exit.
func (s *Server) Close() error {
	select {
	case <-s.closed:
		return nil
	default:
	}
	close(s.closed)
	return s.srv.Close()
}

// Ready is closed when the function has finished initializing (its first
// /next); ReadyAt says when.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// ReadyAt is when the first /next arrived (zero before).
func (s *Server) ReadyAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstNext
}

// InitError is the error the function reported at initialization, or nil.
func (s *Server) InitError() *FunctionError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initErr
}

// fail records why no further invocation can be answered.
func (s *Server) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
		close(s.failed)
	}
}

func (s *Server) failureErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Invoke sends event to the function and waits for its answer: until the
// answer is complete, the function fails (init error, exit), the
// invocation's deadline passes, or ctx is done. onChunk, when not nil, sees
// each piece of the answer as it arrives.
func (s *Server) Invoke(ctx context.Context, event []byte, onChunk func(Chunk)) (*Result, error) {
	inv := &invocation{id: newRequestID(), event: event, onChunk: onChunk, taken: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.inflight[inv.id] = inv
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, inv.id)
		s.mu.Unlock()
	}()
	select {
	case s.pending <- inv:
	case <-s.failed:
		return nil, s.failureErr()
	case <-s.closed:
		return nil, errors.New("runtimeapi: server closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-inv.taken
	timer := time.NewTimer(time.Until(inv.result.Taken.Add(s.timeout())))
	defer timer.Stop()
	select {
	case <-inv.done:
		if inv.violation != nil {
			return &inv.result, fmt.Errorf("runtimeapi: invocation %s: the runtime broke the Runtime API contract: %w", inv.id, inv.violation)
		}
		return &inv.result, nil
	case <-s.failed:
		return nil, s.failureErr()
	case <-s.closed:
		return nil, errors.New("runtimeapi: server closed")
	case <-timer.C:
		return nil, fmt.Errorf("runtimeapi: invocation %s timed out after %s", inv.id, s.timeout())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

// next hands the next event to the runtime, waiting for one.
func (s *Server) next(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.mu.Lock()
	if s.firstNext.IsZero() {
		s.firstNext = now
		close(s.ready)
	}
	s.mu.Unlock()
	var inv *invocation
	select {
	case inv = <-s.pending:
	case <-s.closed:
		http.Error(w, "runtime API closed", http.StatusGone)
		return
	case <-r.Context().Done():
		return
	}
	inv.result.RequestID = inv.id
	inv.result.Taken = time.Now()
	deadline := inv.result.Taken.Add(s.timeout())
	h := w.Header()
	h.Set(HeaderRequestID, inv.id)
	h.Set(HeaderDeadline, strconv.FormatInt(deadline.UnixMilli(), 10))
	h.Set(HeaderFunctionARN, s.FunctionARN)
	h.Set(HeaderTraceID, newTraceID(inv.result.Taken))
	h.Set("Content-Type", "application/json")
	close(inv.taken)
	w.Write(inv.event)
}

// lookup finds the invocation an answer is for, or answers 400.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *invocation {
	id := r.PathValue("id")
	s.mu.Lock()
	inv := s.inflight[id]
	s.mu.Unlock()
	if inv == nil {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "no invocation in flight with id "+id)
		return nil
	}
	select {
	case <-inv.taken:
	default:
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "invocation "+id+" was not handed out")
		return nil
	}
	if !inv.claimed.CompareAndSwap(false, true) {
		writeAPIError(w, http.StatusBadRequest, "InvalidStateTransition", "invocation "+id+" already answered")
		return nil
	}
	return inv
}

// response takes an answer, buffered or streamed.
func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	inv := s.lookup(w, r)
	if inv == nil {
		return
	}
	res := &inv.result
	res.ContentType = r.Header.Get("Content-Type")
	res.Streamed = r.Header.Get(HeaderResponseMode) == "streaming"
	if err := streamingHeaders(r, res); err != nil {
		inv.violation = err
		s.finish(inv)
		writeAPIError(w, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	limit := int64(MaxBufferedResponse)
	if res.Streamed {
		limit = MaxStreamedResponse
	}
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			c := Chunk{At: time.Now(), Data: append([]byte(nil), buf[:n]...)}
			if res.FirstByte.IsZero() {
				res.FirstByte = c.At
			}
			total += int64(n)
			if total > limit {
				res.Error = &FunctionError{Type: "Function.ResponseSizeTooLarge",
					Message: fmt.Sprintf("the response is larger than the %d bytes Lambda allows", limit)}
				s.finish(inv)
				writeAPIError(w, http.StatusRequestEntityTooLarge, res.Error.Type, res.Error.Message)
				return
			}
			res.Chunks = append(res.Chunks, c)
			res.Body = append(res.Body, c.Data...)
			if inv.onChunk != nil {
				inv.onChunk(c)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			res.Error = &FunctionError{Type: "Runtime.TruncatedResponse", Message: err.Error()}
			s.finish(inv)
			return
		}
	}
	if typ := r.Trailer.Get(TrailerErrorType); typ != "" || r.Trailer.Get(TrailerErrorBody) != "" {
		fe, err := errorTrailers(r.Trailer)
		res.Error, inv.violation = fe, err
	}
	s.finish(inv)
	w.WriteHeader(http.StatusAccepted)
}

// streamingHeaders holds a streamed answer to the contract's headers
// (custom runtimes, "Implementing response streaming"): the response mode,
// chunked encoding, a content type, and both error trailers declared before
// the body. An answer in the streaming HTTP integration format must be one.
func streamingHeaders(r *http.Request, res *Result) error {
	mode := r.Header.Get(HeaderResponseMode)
	switch {
	case mode != "" && mode != "streaming":
		return fmt.Errorf("%s: %q is no response mode (want streaming)", HeaderResponseMode, mode)
	case !res.Streamed && res.ContentType == rie.StreamContentType:
		return fmt.Errorf("an answer in the streaming HTTP integration format (%s) without %s: streaming", rie.StreamContentType, HeaderResponseMode)
	case !res.Streamed:
		return nil
	case !slices.Contains(r.TransferEncoding, "chunked"):
		return fmt.Errorf("a streamed answer not sent with Transfer-Encoding: chunked (got %v)", r.TransferEncoding)
	case res.ContentType == "":
		return fmt.Errorf("a streamed answer without a Content-Type")
	}
	for _, t := range []string{TrailerErrorType, TrailerErrorBody} {
		if _, declared := r.Trailer[t]; !declared {
			return fmt.Errorf("a streamed answer that does not declare the trailer %s (Trailer: %q)", t, r.Header.Values("Trailer"))
		}
	}
	return nil
}

// errorTrailers reads a streamed answer's error: both trailers, the body
// Lambda's error document, base64-encoded.
func errorTrailers(t http.Header) (*FunctionError, error) {
	fe := &FunctionError{Type: t.Get(TrailerErrorType)}
	body, err := base64.StdEncoding.DecodeString(t.Get(TrailerErrorBody))
	var doc FunctionError
	switch {
	case fe.Type == "":
		return fe, fmt.Errorf("the error trailer %s without %s", TrailerErrorBody, TrailerErrorType)
	case err != nil:
		return fe, fmt.Errorf("the error trailer %s is not base64: %v", TrailerErrorBody, err)
	case json.Unmarshal(body, &doc) != nil || doc.Type == "" || doc.Message == "":
		return fe, fmt.Errorf("the error trailer %s is no error document ({\"errorMessage\",\"errorType\"}): %q", TrailerErrorBody, body)
	}
	fe.Message = doc.Message
	return fe, nil
}

// invocationError takes a function error for an invocation.
func (s *Server) invocationError(w http.ResponseWriter, r *http.Request) {
	inv := s.lookup(w, r)
	if inv == nil {
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxBufferedResponse))
	inv.result.Body = body
	inv.result.ContentType = r.Header.Get("Content-Type")
	inv.result.Error = decodeError(r.Header.Get(HeaderErrorType), body)
	inv.result.FirstByte = time.Now()
	s.finish(inv)
	w.WriteHeader(http.StatusAccepted)
}

// initError records a failed initialization; every invocation fails with it.
func (s *Server) initError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxBufferedResponse))
	fe := decodeError(r.Header.Get(HeaderErrorType), body)
	s.mu.Lock()
	s.initErr = fe
	s.mu.Unlock()
	s.fail(fmt.Errorf("runtimeapi: the function failed to initialize: %w", fe))
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) finish(inv *invocation) {
	inv.result.Done = time.Now()
	close(inv.done)
}

// decodeError reads Lambda's error document ({"errorMessage","errorType"}),
// the header's type taking precedence.
func decodeError(headerType string, body []byte) *FunctionError {
	var fe FunctionError
	if json.Unmarshal(body, &fe) != nil {
		fe.Message = string(body)
	}
	if headerType != "" {
		fe.Type = headerType
	}
	if fe.Type == "" {
		fe.Type = "Unhandled"
	}
	return &fe
}

func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(FunctionError{Type: typ, Message: msg})
}

// newRequestID makes a request id shaped like Lambda's (a UUID).
func newRequestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newTraceID makes an X-Ray trace header like the one Lambda sends.
func newTraceID(t time.Time) string {
	b := make([]byte, 20)
	rand.Read(b)
	h := hex.EncodeToString(b)
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", t.Unix(), h[:24], h[24:40])
}
