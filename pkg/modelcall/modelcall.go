// Package modelcall owns one model call's lifecycle, whoever makes it: an
// HTTP route or a batch line. An endpoint's Operation is transport-free: it
// takes the caller and the request body and returns the answer as a Result
// to copy (or the error the client sees), and between the two it parses,
// routes (deployments, retries, fallbacks, deployment limits) and converts.
// This package holds what every operation shares: the log event from the
// first byte read to the last byte written, the token counting once the
// answer's usage is known, the copy of the answer (flushed event by event
// when it streams, ended with an OpenAI-shaped error event when a stream
// fails midway), the one HTTP shell all model routes use (Handler), and the
// entry for callers that are not HTTP routes (Run).
package modelcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/relaybuf"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// Operation runs one model call of one endpoint for p with the request body.
// On failure it has emitted the call's log event and returns the error the
// caller sees (an *api.Error, possibly wrapped). On success it returns the
// answer, which ends the call when it has been written (Result.WriteTo) or
// abandoned (Result.Close). The caller has admitted the call: the HTTP edge
// does for routes, Run for everyone else.
type Operation func(ctx context.Context, p auth.Principal, body []byte) (*Result, error)

// Operations maps an OpenAI endpoint path ("/v1/embeddings") to its
// Operation: the routes mount them, and the batch worker runs a line's url
// through them.
type Operations map[string]Operation

// Admitter admits a call against its caller's limits (auth.Service).
type Admitter interface {
	Admit(ctx context.Context, p auth.Principal) error
}

// Run runs op for a caller that is not an HTTP route (the batch worker) as
// the HTTP edge would: it admits p first (a refused call has no log event,
// as a refused request has none), gives the call a start of its own (its
// times and overhead count from now) and a request id unless ctx has one,
// and runs op.
func Run(ctx context.Context, admit Admitter, p auth.Principal, op Operation, body []byte) (*Result, error) {
	end := func() {}
	if ca, ok := admit.(CallAdmitter); ok {
		var err error
		if ctx, end, err = ca.AdmitCall(ctx, p); err != nil {
			return nil, err
		}
	} else if err := admit.Admit(ctx, p); err != nil {
		return nil, err
	}
	if api.RequestID(ctx) == "" {
		ctx = api.WithRequestID(ctx, api.NewRequestID())
	}
	res, err := op(api.WithStart(ctx, time.Now()), p, body)
	if err != nil {
		end()
	}
	return res, err
}

// CallAdmitter is an Admitter that also reserves for the call (its
// budgets, pkg/spend): the context it returns carries the reservation to
// the call's log event, whose pricing settles it; end releases it when the
// call fails before it has one.
type CallAdmitter interface {
	AdmitCall(ctx context.Context, p auth.Principal) (_ context.Context, end func(), err error)
}

// Handler is the HTTP shell of a model route: it reads the body (at most
// jsonLimit bytes; 0 is api.DefaultJSONLimit), runs op as the request's
// principal, and writes the answer with its Content-Type, Content-Length when
// known, and x-sluice-overhead-ms — set on failures too, which it returns
// for the middleware to render.
func Handler(op Operation, jsonLimit int64) func(w http.ResponseWriter, r *http.Request) error {
	return HandlerWith(op, jsonLimit, nil)
}

// HandlerWith is Handler whose call runs in with(r.Context(), r) (nil: the
// request's context): a route's own values from the request ride in the
// context without a copy of the request (r.WithContext) a call.
func HandlerWith(op Operation, jsonLimit int64, with func(context.Context, *http.Request) context.Context) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		if with != nil {
			ctx = with(ctx, r)
		}
		h := w.Header()
		body, err := api.ReadBody(w, r, jsonLimit)
		if err != nil {
			api.SetOverhead(h, ctx)
			return err
		}
		res, err := op(ctx, auth.FromContext(ctx), body)
		if err != nil {
			api.SetOverhead(h, ctx)
			return err
		}
		defer res.Close()
		res.setHeaders(h, ctx)
		if res.readWhole() {
			// The answer is read whole before its first byte goes out:
			// its cost goes in the headers.
			res.costHeader = costHeader{ResponseWriter: w, res: res}
			_, err = res.WriteTo(&res.costHeader)
			return err
		}
		w.WriteHeader(http.StatusOK)
		_, err = res.WriteTo(w)
		return err
	}
}

// Header keys the answer sets, canonical: Set would canonicalise them anew
// on every call.
var (
	contentTypeKey   = http.CanonicalHeaderKey("Content-Type")
	contentLengthKey = http.CanonicalHeaderKey("Content-Length")
	overheadKey      = http.CanonicalHeaderKey(api.OverheadHeader)
)

// The answer's header values in Result.header.
const (
	overheadValue = iota
	contentTypeValue
	contentLengthValue
	costValue
	headerValues
)

// setHeaders sets the answer's x-sluice-overhead-ms (now), Content-Type
// and Content-Length (when known) on h. Their values' slices are r's own
// (each of capacity 1: an Add copies), allocated with the call.
func (r *Result) setHeaders(h http.Header, ctx context.Context) {
	v := &r.header
	v[overheadValue] = api.OverheadValue(ctx)
	h[overheadKey] = v[overheadValue : overheadValue+1 : overheadValue+1]
	v[contentTypeValue] = r.ContentType
	h[contentTypeKey] = v[contentTypeValue : contentTypeValue+1 : contentTypeValue+1]
	if r.ContentLength >= 0 {
		v[contentLengthValue] = strconv.FormatInt(r.ContentLength, 10)
		h[contentLengthKey] = v[contentLengthValue : contentLengthValue+1 : contentLengthValue+1]
	}
}

// CostHeader is LiteLLM's header of a call's cost in USD. It is set on
// answers read whole before they are written (JSON answers up to the relay
// buffer); a stream's headers go out before its usage is known, so a
// stream (and a larger answer) has none: its log event has the cost.
const CostHeader = "x-litellm-response-cost"

var costHeaderKey = http.CanonicalHeaderKey(CostHeader)

// costHeader writes the status and headers of a whole answer with its
// first (and only) write, once the answer's usage can be read from it.
type costHeader struct {
	http.ResponseWriter
	res *Result // its flag headerSent says whether the status is out
}

func (c *costHeader) Write(b []byte) (int, error) {
	if !c.res.headerSent {
		c.res.headerSent = true
		if cost, ok := c.res.quote(b); ok {
			// The canonical key: Set would canonicalise CostHeader anew
			// on every call. The value's slice is the call's own.
			v := &c.res.header
			v[costValue] = strconv.FormatFloat(cost, 'g', -1, 64)
			c.Header()[costHeaderKey] = v[costValue : costValue+1 : costValue+1]
		}
		c.ResponseWriter.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *costHeader) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// readWhole reports whether WriteTo reads the answer whole before writing.
func (r *Result) readWhole() bool {
	return !r.Streamed && r.ContentLength > 0 && r.ContentLength <= relaybuf.Size
}

// quote prices the whole answer doc by the usage it carries (OpenAI's
// names, or the Responses API's).
func (r *Result) quote(doc []byte) (float64, bool) {
	var u oai.Usage
	if m, ok := r.meter.(UsageMeter); ok {
		u, _ = m.Usage() // the meter has read it from the same bytes
	} else {
		u = answerUsage(doc)
	}
	// The call's own event, its tokens set for the quote and put back
	// (end sets them for good): a copy of the event would be one more
	// allocation of its size a call. Nothing else reads it before end.
	ev := r.call.Event
	in, cached, out, total := ev.PromptTokens, ev.CachedTokens, ev.CompletionTokens, ev.TotalTokens
	ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
	ev.CachedTokens = u.PromptTokensDetails.CachedTokens
	cost, ok := r.call.calls.events.Quote(ev)
	ev.PromptTokens, ev.CachedTokens, ev.CompletionTokens, ev.TotalTokens = in, cached, out, total
	return cost, ok
}

// UsageMeter is a Meter of a whole answer that reads its usage as soon as
// it has seen the answer, so that the cost header needs no pass of its own.
type UsageMeter interface {
	Meter
	Usage() (oai.Usage, bool)
}

// answerUsage is the usage a whole answer doc carries (OpenAI's names, or
// the Responses API's); zero when it has none.
func answerUsage(doc []byte) oai.Usage {
	var raw []byte
	jsonscan.Members(doc, func(name, value []byte) error {
		if string(name) == "usage" {
			raw = value
		}
		return nil
	})
	var u oai.Usage
	if len(raw) > 0 {
		if bytes.Contains(raw, []byte(`"input_tokens"`)) {
			u, _ = oai.ParseResponseUsage(raw)
		} else {
			u, _ = oai.ParseUsage(raw)
		}
	}
	return u
}

// Tokens counts a finished call's tokens against its deployment's and its
// caller's tpm limits (models.Router).
type Tokens interface {
	Finish(ctx context.Context, p auth.Principal, rep *models.Reply, tokens int64)
}

// Calls is what every operation's calls share: the log-event emitter, the
// token counting, and the relay's copy buffers.
type Calls struct {
	events  *logevent.Emitter
	tokens  Tokens
	buffers relaybuf.List
}

// New builds the call layer over events (nil: no events) and tokens.
func New(events *logevent.Emitter, tokens Tokens) *Calls {
	return &Calls{events: events, tokens: tokens}
}

// Begin starts a call of callType (logevent.CallEmbedding, ...) made by p.
// The operation then fills in the event, records where the router sent the
// call (Routed), and ends it with Fail or by answering (Answer, Stream).
func (c *Calls) Begin(ctx context.Context, p auth.Principal, callType string) *Call {
	call := &Call{calls: c, ctx: ctx, p: p, start: api.RequestStart(ctx)}
	call.event.Reset(ctx, p, callType)
	call.Event = &call.event
	call.res.call = call
	return call
}

// Steps are how an endpoint's operation starts a call; Start runs them.
type Steps[Req any] struct {
	// CallType is the log event's call type (logevent.CallEmbedding, ...).
	CallType string
	// Parse reads and checks the request body.
	Parse func(body []byte) (Req, error)
	// Describe records the request in the call's log event (model,
	// messages, parameters, end user); an error refuses the request.
	Describe func(req Req, ev *logevent.Event) error
	// Route sends the request to a deployment.
	Route func(ctx context.Context, p auth.Principal, req Req) (*models.Reply, error)
}

// Start begins a call for p with body and runs its steps: parse, describe,
// route (recording the deployment, Routed). What fails ends the call (Fail)
// and comes back as the error the operation returns; otherwise the
// operation makes its Result from the reply (Answer, Stream).
func (st Steps[Req]) Start(ctx context.Context, calls *Calls, p auth.Principal, body []byte) (*Call, Req, *models.Reply, error) {
	c := calls.Begin(ctx, p, st.CallType)
	req, err := st.Parse(body)
	if err == nil {
		err = st.Describe(req, c.Event)
	}
	if err != nil {
		var none Req
		return nil, none, nil, c.Fail(err)
	}
	rep, err := st.Route(ctx, p, req)
	c.Routed(rep)
	if err != nil {
		return nil, req, nil, c.Fail(err)
	}
	return c, req, rep, nil
}

// Call is one model call in progress.
type Call struct {
	// Event is the call's log event: the operation records what it knows of
	// the request (model, messages, parameters, end user) and its Meter what
	// the answer says.
	Event *logevent.Event

	calls *Calls
	ctx   context.Context
	p     auth.Principal
	start time.Time
	rep   *models.Reply
	// Allocated with the call: one allocation, not three.
	res   Result
	event logevent.Event
}

// Routed records the deployment the router sent the call to (on a failure,
// the one it tried last). rep may be nil.
func (c *Call) Routed(rep *models.Reply) {
	if rep == nil {
		return
	}
	c.rep = rep
	t, ev := rep.Target, c.Event
	ev.ModelGroup = t.ModelGroup
	if t.Model != "" {
		ev.Model = t.Model
	}
	ev.ModelID = t.DeploymentID
	ev.CustomLLMProvider = t.Provider
	ev.APIBase = t.APIBase
}

// LogsBodies reports whether a callback may log the bodies of the call's
// event (logevent.Emitter.WantsBodies): a Meter that would copy the answer
// only for the event's Response asks first.
func (c *Call) LogsBodies() bool {
	return c.calls.events.WantsBodies(c.ctx, c.p.TeamID)
}

// Fail ends the call as failed with err, before any answer: its log event
// records err as the caller sees it and is emitted (awaited: a Lambda
// freezes once it answers). It returns err, for the operation to return —
// a 499 instead when the caller has gone (api.ClientGone): a provider call
// its leaving cut short is not the provider's failure.
func (c *Call) Fail(err error) error {
	err = api.ClientGone(c.ctx, err)
	ev := c.Event
	ev.Fail(err)
	ev.SetTimes(c.start, time.Time{}, time.Now())
	c.calls.events.Emit(c.ctx, ev)
	c.release()
	return err
}

// Answer makes the call's Result from a JSON answer of length bytes (-1:
// unknown) that body yields, metered by m. The Result owns body.
func (c *Call) Answer(body io.ReadCloser, length int64, m Meter) *Result {
	return c.result(body, "application/json", length, false, m)
}

// Stream makes the call's Result from an OpenAI-shaped event stream
// (text/event-stream) that body yields, metered by m: each read of it is
// flushed to the caller as it comes. The Result owns body.
func (c *Call) Stream(body io.ReadCloser, m Meter) *Result {
	return c.result(body, "text/event-stream", -1, true, m)
}

// StreamAs is Stream for an answer in another API's event grammar:
// errorEvent renders the event that ends a stream failing midway
// (Anthropic's event: error) instead of OpenAI's.
func (c *Call) StreamAs(body io.ReadCloser, m Meter, errorEvent func(error) []byte) *Result {
	r := c.result(body, "text/event-stream", -1, true, m)
	r.errorEvent = errorEvent
	return r
}

func (c *Call) result(body io.ReadCloser, contentType string, length int64, streamed bool, m Meter) *Result {
	r := &c.res
	r.ContentType, r.ContentLength, r.Streamed = contentType, length, streamed
	r.body, r.meter = body, m
	r.errorEvent = errorEvent
	return r
}

// Meter reads what an answer carries as it goes by. Every byte written to
// the caller passes through Write, in order (it must not keep the slice).
// End is called once, when the answer has gone out whole or has been cut:
// it records in ev what the answer says (its response, finish reason, ...)
// and returns its usage, which the call layer counts and puts in ev. An
// error says that the answer, though it went out whole, was not well formed
// (a JSON answer that did not end): the call is logged as failed.
type Meter interface {
	io.Writer
	End(ev *logevent.Event) (oai.Usage, error)
}

// WholeMeter is a stream's Meter that can tell when the caller has the
// whole answer (OpenAI's data: [DONE] has gone out). A read of the
// provider's stream that fails after that — the caller hanging up before
// the provider closed its end, which cancels the provider call — does not
// cut the call: the caller took everything there was.
type WholeMeter interface {
	Meter
	Whole() bool
}

func wholeAnswer(m Meter) bool {
	w, ok := m.(WholeMeter)
	return ok && w.Whole()
}

// Result is a call's answer. WriteTo copies it to the caller and ends the
// call; Close ends a call whose answer will not be written (and is a no-op
// after WriteTo). Either way the provider's answer is closed, the tokens
// counted and the log event emitted before they return.
type Result struct {
	// ContentType is the answer's media type: application/json, or
	// text/event-stream when Streamed.
	ContentType string
	// ContentLength is the answer's length in bytes, -1 when unknown.
	ContentLength int64
	// Streamed marks an event stream, flushed event by event. (Beside
	// the other flags: apart, each would take a word, and the call — at
	// most 888 bytes, with the allocator's 8-byte header in its 896-byte
	// class — one size class more.)
	Streamed   bool
	written    bool
	ended      bool
	headerSent bool // costHeader wrote the status
	firstSeen  bool // a byte of the answer came (or it is written whole: first is the end)

	call       *Call
	body       io.ReadCloser
	meter      Meter
	errorEvent func(error) []byte
	// firstAfter is when the answer's first byte came, after the call's
	// start (0: with the end): a time.Time would make the call 16 bytes
	// larger, past its size class.
	firstAfter time.Duration
	usage      oai.Usage
	// header holds the answer's header values (setHeaders), costHeader
	// the writer of a whole answer: allocated with the call.
	header     [headerValues]string
	costHeader costHeader
}

// errWritten is WriteTo's error when the answer was already written.
var errWritten = errors.New("modelcall: the answer was already written")

// WriteTo copies the answer to w and ends the call. When the answer
// streams, each read is flushed if w can be (http.Flusher, or Flush()
// error); a stream that fails after its first byte ends with an error event
// in OpenAI's shape (data: {"error":{...}}), never a silent cut. The call's
// context going away (the client left) stops the provider's answer. The
// error is the copy's: the provider's answer cut, or w refusing bytes.
func (r *Result) WriteTo(w io.Writer) (n int64, err error) {
	if r.written || r.ended {
		return 0, errWritten
	}
	r.written = true
	defer func() { r.end(err) }()
	bp := r.call.calls.buffers.Get()
	defer r.call.calls.buffers.Put(bp)
	buf := *bp
	flush := flusherOf(w, r.Streamed)
	whole := r.readWhole() && r.ContentLength <= int64(len(buf))
	// An answer read whole goes out in one write, its first byte with its
	// last: the end's clock read stands for both (SetTimes), one read of
	// the clock less a call.
	r.firstSeen = whole
	for {
		var (
			k    int
			rerr error
		)
		if whole {
			// A JSON answer that fits the buffer is read whole and written
			// in one piece: it arrives in pieces (what the transport's read
			// buffer held, then the rest), and writing each as it comes
			// costs the caller's connection a system call more.
			whole = false
			if k, rerr = io.ReadFull(r.body, buf[:r.ContentLength]); rerr == io.EOF {
				rerr = io.ErrUnexpectedEOF // promised bytes, none came
			}
		} else {
			k, rerr = r.body.Read(buf)
		}
		if k > 0 {
			if !r.firstSeen {
				r.firstSeen, r.firstAfter = true, time.Since(r.call.start)
			}
			r.meter.Write(buf[:k])
			m, werr := w.Write(buf[:k])
			n += int64(m)
			if werr != nil {
				return n, notDelivered(werr)
			}
			if flush != nil {
				if ferr := flush(); ferr != nil {
					return n, notDelivered(ferr)
				}
			}
		}
		if rerr == io.EOF || rerr != nil && r.Streamed && wholeAnswer(r.meter) {
			return n, nil
		}
		if rerr != nil {
			err := r.cut(rerr)
			if r.Streamed && !errors.Is(err, errNotDelivered) {
				m, _ := w.Write(r.errorEvent(err))
				n += int64(m)
				if flush != nil {
					flush()
				}
			}
			return n, err
		}
	}
}

// cut classifies a failure to read the rest of the answer.
func (r *Result) cut(err error) error {
	var ae *api.Error
	switch {
	case r.call.ctx.Err() != nil:
		return notDelivered(err) // the caller left: its context stopped the provider
	case errors.As(err, &ae):
		return err // a translator that named the failure (an in-band provider error)
	}
	return api.Upstream(err, "The provider's answer was cut off before it ended.")
}

// Close ends the call if its answer was not written: the provider's answer
// is closed and the call logged as not delivered.
func (r *Result) Close() error {
	if !r.ended {
		r.end(notDelivered(errors.New("the answer was not written")))
	}
	return nil
}

// Usage is the answer's token usage, once the call has ended.
func (r *Result) Usage() oai.Usage { return r.usage }

// end closes the provider's answer, counts the tokens and emits the event.
func (r *Result) end(copyErr error) {
	if r.ended {
		return
	}
	r.ended = true
	r.body.Close()
	c := r.call
	ev := c.Event
	usage, merr := r.meter.End(ev)
	r.usage = usage
	ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = usage.PromptTokens, usage.CompletionTokens, usage.TotalTokens
	ev.CachedTokens = usage.PromptTokensDetails.CachedTokens
	switch {
	case copyErr != nil:
		ev.Fail(copyErr)
	case merr != nil:
		ev.Fail(merr)
	}
	var first time.Time // none: SetTimes takes the end
	if r.firstAfter > 0 {
		first = c.start.Add(r.firstAfter)
	}
	ev.SetTimes(c.start, first, time.Now())
	// The caller may have gone: its tokens still count. (Emit keeps
	// publishing past its context's end by itself; its values are read
	// through c.ctx, not a detached copy, whose every lookup allocates.)
	if c.calls.tokens != nil {
		c.calls.tokens.Finish(context.WithoutCancel(c.ctx), c.p, c.rep, usage.TotalTokens)
	}
	c.calls.events.Emit(c.ctx, ev)
	r.body, r.meter, r.costHeader.ResponseWriter = nil, nil, nil
	c.release()
}

// release drops what the call holds of its request once its event is
// emitted. The event lives on until it is delivered and counted (hundreds
// of milliseconds under load), and it is the call's own: every pointer
// the call kept would keep the request's objects (its context, the
// provider's answer and meter, the caller's writer) alive and scanned by
// every garbage collection until then. Nothing reads them after the end.
func (c *Call) release() {
	c.ctx, c.rep = nil, nil
}

var errNotDelivered = errors.New("modelcall: the caller did not take the answer")

// notDelivered is the error of an answer its caller did not take whole: a
// 499 (api.ClientClosed), never sent.
func notDelivered(err error) error {
	e := api.ClientClosed(errors.Join(errNotDelivered, err))
	e.Message = "The caller went away before the whole answer was delivered."
	return e
}

// flusherOf returns how to flush w after each read of a streamed answer,
// or nil.
func flusherOf(w io.Writer, streamed bool) func() error {
	if !streamed {
		return nil
	}
	switch f := w.(type) {
	case http.Flusher:
		return func() error { f.Flush(); return nil }
	case interface{ Flush() error }:
		return f.Flush
	}
	return nil
}

// errorEvent is the event that ends a failed stream, as OpenAI ends one.
func errorEvent(err error) []byte {
	b, _ := json.Marshal(api.AsError(err).Body()) // strings and pointers to them always encode
	return sse.AppendEvent(nil, "", b)
}
