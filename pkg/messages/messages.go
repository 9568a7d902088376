package messages

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/tokenizer"
)

// Router is what the service needs of pkg/models.
type Router interface {
	Messages(ctx context.Context, p auth.Principal, req *models.MessagesRequest) (*models.Reply, bool, error)
	Has(model string) bool
	Deployments() []config.Deployment // count_tokens: which tokenizer a model has
}

// Service is the Messages API's operations, transport-free.
type Service struct {
	router Router
	calls  *modelcall.Calls
	o200k  *tokenizer.Encoding // count_tokens', read on its first count
	// steps start a Messages call; made once, so that a call makes no
	// closures of its own (its state is one messageCall).
	steps modelcall.Steps[*messageCall]
	// answers are the buffers a translated answer is read into: it is
	// translated, then not needed again, so the buffer goes back.
	answers sync.Pool
}

// maxPooledAnswer bounds the buffers answers keeps: a larger answer's
// buffer is left to the collector, not held.
const maxPooledAnswer = 64 << 10

// New builds the service over router, its calls ending through calls.
func New(router Router, calls *modelcall.Calls) *Service {
	s := &Service{router: router, calls: calls, o200k: tokenizer.NewO200kBase()}
	s.steps = modelcall.Steps[*messageCall]{CallType: CallType, Parse: parseCall, Describe: describeCall, Route: s.route}
	s.answers.New = func() any { b := make([]byte, 0, 4<<10); return &b }
	return s
}

// headers are the client's anthropic-version and anthropic-beta.
type headers struct{ version, beta string }

// WithHeaders returns ctx carrying the client's anthropic-version and
// anthropic-beta headers, which a native deployment receives.
func WithHeaders(ctx context.Context, version, beta string) context.Context {
	ctx, _ = ctxvalue.With(ctx, headers{version, beta})
	return ctx
}

// Handler is modelcall.Handler for a Messages operation: the client's
// Anthropic headers ride in the context to the native deployments.
func Handler(op modelcall.Operation, jsonLimit int64) func(w http.ResponseWriter, r *http.Request) error {
	return modelcall.HandlerWith(op, jsonLimit, withHeaders)
}

// withHeaders is ctx carrying r's Anthropic headers, if they ask for
// anything a native deployment does not send anyway: a beta, or a version
// other than anthropic.APIVersion. Most clients send that version and no
// beta; their calls carry no context layer (an allocation, and a step of
// every context lookup below it).
func withHeaders(ctx context.Context, r *http.Request) context.Context {
	if v, b := r.Header.Get("Anthropic-Version"), r.Header.Get("Anthropic-Beta"); v != "" && v != anthropic.APIVersion || b != "" {
		return WithHeaders(ctx, v, b)
	}
	return ctx
}

// messageCall is one Messages call's state, in one allocation: the request
// as parsed, as the router takes it, and the answer's meter and reader.
type messageCall struct {
	parsed Parsed
	req    models.MessagesRequest
	native bool // the router's answer is Anthropic's own
	json   jsonMeter
	answer answerMeter // a translated answer's body and meter
}

// parseCall reads the request's head only: a native deployment takes the
// body as it came, and the chat seam decodes the rest (Chat) when it is
// tried.
func parseCall(body []byte) (*messageCall, error) {
	mc := &messageCall{}
	p := &mc.parsed
	if err := p.parseHead(body); err != nil {
		return nil, err
	}
	mc.req = models.MessagesRequest{
		Model: p.Model, Body: p.Body, Stream: p.Stream,
		Mock: len(p.MockResponse) > 0, AsIs: p.asIs, Chat: p.Chat,
	}
	return mc, nil
}

func describeCall(mc *messageCall, ev *logevent.Event) error {
	p := &mc.parsed
	ev.Model, ev.ModelGroup, ev.Stream = p.Model, p.Model, p.Stream
	ev.Messages = p.RawMessages
	if p.Metadata != nil {
		ev.EndUser = p.Metadata.UserID
	}
	ev.ModelParameters = parameters(p)
	return nil
}

// route sends the call on with the client's Anthropic headers, and notes
// whether a native deployment answered.
func (s *Service) route(ctx context.Context, p auth.Principal, mc *messageCall) (*models.Reply, error) {
	if hs := ctxvalue.From[headers](ctx); hs != nil {
		mc.req.Version, mc.req.Beta = hs.version, hs.beta
	}
	rep, native, err := s.router.Messages(ctx, p, &mc.req)
	mc.native = native
	return rep, err
}

// Messages is the Messages Operation (POST /v1/messages).
func (s *Service) Messages(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	c, mc, rep, err := s.steps.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	ans, req := rep.Answer, &mc.req
	c.Event.UsageEstimated = ans.UsageEstimated
	switch {
	case mc.native && req.Stream:
		return c.StreamAs(ans.Body, newStreamMeter(), ErrorEvent), nil
	case mc.native:
		mc.json.start(ans.ContentLength, c.LogsBodies())
		return c.Answer(ans.Body, ans.ContentLength, &mc.json), nil
	case req.Stream:
		return c.StreamAs(Stream(ans.Body, req.Model), newStreamMeter(), ErrorEvent), nil
	}
	b, res, err := s.translateAnswer(ans.Body, ans.ContentLength, req.Model)
	if err != nil {
		return nil, c.Fail(err)
	}
	mc.answer = answerMeter{answer: b, res: res}
	return c.Answer(&mc.answer, int64(len(b)), &mc.answer), nil
}

// translateAnswer reads a translated provider's whole JSON answer of length
// bytes (-1: unknown) into a buffer of s.answers, and returns it translated
// into a message, encoded, and the message. The buffer goes back: nothing
// FromChat returns points into it (its strings are copies).
func (s *Service) translateAnswer(body io.ReadCloser, length int64, model string) ([]byte, *Response, error) {
	bp := s.answers.Get().(*[]byte)
	in, err := readAnswerInto((*bp)[:0], body, length)
	var (
		res *Response
		out []byte
	)
	if err == nil {
		if res, err = FromChat(in, model); err == nil {
			out, err = AnswerJSON(res)
		}
	}
	if cap(in) <= maxPooledAnswer {
		*bp = in[:0]
		s.answers.Put(bp)
	}
	return out, res, err
}

// readAnswer reads a translated provider's whole JSON answer (to be
// translated again), within providers.MaxAnswerBytes; length (-1: unknown)
// sizes the buffer once.
func readAnswer(body io.ReadCloser, length int64) ([]byte, error) {
	return readAnswerInto(nil, body, length)
}

// readAnswerInto is readAnswer appending to buf, which it returns (grown,
// and emptied on an error) with what it read.
func readAnswerInto(buf []byte, body io.ReadCloser, length int64) ([]byte, error) {
	defer body.Close()
	if length > 0 && length <= providers.MaxAnswerBytes {
		buf = slices.Grow(buf, int(length)+1) // one byte more: the read that sees the end
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, bytes.MinRead)
		}
		free := buf[len(buf):cap(buf)]
		if over := len(buf) + len(free) - providers.MaxAnswerBytes - 1; over > 0 {
			free = free[:len(free)-over] // a byte past the bound is enough to know
		}
		n, err := body.Read(free)
		buf = buf[:len(buf)+n]
		switch {
		case len(buf) > providers.MaxAnswerBytes:
			return buf[:0], api.Upstream(nil, "The provider's answer is larger than %d bytes.", providers.MaxAnswerBytes)
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf[:0], api.Upstream(err, "The provider's answer was cut off before it ended.")
		}
	}
}

// parameters are the request's parameters as the log event keeps them
// (LiteLLM's model_parameters): the ones given.
func parameters(p *Parsed) json.RawMessage {
	r := &p.Request
	var m logevent.Params // in key order, as encoding/json writes a map
	m.Int("max_tokens", r.MaxTokens)
	if len(r.StopSequences) > 0 {
		m.Strings("stop_sequences", r.StopSequences)
	}
	if r.Stream {
		m.Bool("stream", true)
	}
	if r.Temperature != nil {
		m.Float("temperature", *r.Temperature)
	}
	if r.Thinking != nil {
		m.String("thinking", r.Thinking.Type)
	}
	if r.ToolChoice != nil {
		m.String("tool_choice", r.ToolChoice.Type)
	}
	if p.tools > 0 {
		m.Int("tools", int64(p.tools))
	}
	if r.TopK != nil {
		m.Int("top_k", *r.TopK)
	}
	if r.TopP != nil {
		m.Float("top_p", *r.TopP)
	}
	return m.End()
}
