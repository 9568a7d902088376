package messages

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers"
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
}

// New builds the service over router, its calls ending through calls.
func New(router Router, calls *modelcall.Calls) *Service {
	return &Service{router: router, calls: calls, o200k: tokenizer.NewO200kBase()}
}

type headersKey struct{}

// headers are the client's anthropic-version and anthropic-beta.
type headers struct{ version, beta string }

// WithHeaders returns ctx carrying the client's anthropic-version and
// anthropic-beta headers, which a native deployment receives.
func WithHeaders(ctx context.Context, version, beta string) context.Context {
	return context.WithValue(ctx, headersKey{}, headers{version, beta})
}

// Handler is modelcall.Handler for a Messages operation: the client's
// Anthropic headers ride in the context to the native deployments.
func Handler(op modelcall.Operation, jsonLimit int64) func(w http.ResponseWriter, r *http.Request) error {
	h := modelcall.Handler(op, jsonLimit)
	return func(w http.ResponseWriter, r *http.Request) error {
		if v, b := r.Header.Get("Anthropic-Version"), r.Header.Get("Anthropic-Beta"); v != "" || b != "" {
			r = r.WithContext(WithHeaders(r.Context(), v, b))
		}
		return h(w, r)
	}
}

// Messages is the Messages Operation (POST /v1/messages).
func (s *Service) Messages(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	var (
		native bool
		parsed *Parsed
	)
	hs, _ := ctx.Value(headersKey{}).(headers)
	c, req, rep, err := modelcall.Steps[*models.MessagesRequest]{
		CallType: CallType,
		Parse: func(body []byte) (*models.MessagesRequest, error) {
			var err error
			// Only the head: a native deployment takes the body as it came,
			// and the chat seam decodes the rest (Chat) when it is tried.
			if parsed, err = ParseHead(body); err != nil {
				return nil, err
			}
			return &models.MessagesRequest{
				Model: parsed.Model, Body: parsed.Body, Stream: parsed.Stream, Version: hs.version, Beta: hs.beta,
				Mock: len(parsed.MockResponse) > 0, AsIs: parsed.asIs, Chat: parsed.Chat,
			}, nil
		},
		Describe: func(req *models.MessagesRequest, ev *logevent.Event) error {
			ev.Model, ev.ModelGroup, ev.Stream = req.Model, req.Model, req.Stream
			ev.Messages = parsed.RawMessages
			if parsed.Metadata != nil {
				ev.EndUser = parsed.Metadata.UserID
			}
			ev.ModelParameters = parameters(parsed)
			return nil
		},
		Route: func(ctx context.Context, p auth.Principal, req *models.MessagesRequest) (*models.Reply, error) {
			rep, n, err := s.router.Messages(ctx, p, req)
			native = n
			return rep, err
		},
	}.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	ans := rep.Answer
	c.Event.UsageEstimated = ans.UsageEstimated
	switch {
	case native && req.Stream:
		return c.StreamAs(ans.Body, newStreamMeter(), ErrorEvent), nil
	case native:
		return c.Answer(ans.Body, ans.ContentLength, newJSONMeter(ans.ContentLength)), nil
	case req.Stream:
		return c.StreamAs(Stream(ans.Body, req.Model), newStreamMeter(), ErrorEvent), nil
	}
	b, err := readAnswer(ans.Body, ans.ContentLength)
	var res *Response
	if err == nil {
		if res, err = FromChat(b, req.Model); err == nil {
			b, err = AnswerJSON(res)
		}
	}
	if err != nil {
		return nil, c.Fail(err)
	}
	return c.Answer(io.NopCloser(bytes.NewReader(b)), int64(len(b)), &answerMeter{answer: b, res: res}), nil
}

// readAnswer reads a translated provider's whole JSON answer (to be
// translated again), within providers.MaxAnswerBytes; length (-1: unknown)
// sizes the buffer once.
func readAnswer(body io.ReadCloser, length int64) ([]byte, error) {
	defer body.Close()
	var buf bytes.Buffer
	if length > 0 && length <= providers.MaxAnswerBytes {
		buf.Grow(int(length) + bytes.MinRead) // ReadFrom wants MinRead free to see the end
	}
	if _, err := buf.ReadFrom(io.LimitReader(body, providers.MaxAnswerBytes+1)); err != nil {
		return nil, api.Upstream(err, "The provider's answer was cut off before it ended.")
	}
	if buf.Len() > providers.MaxAnswerBytes {
		return nil, api.Upstream(nil, "The provider's answer is larger than %d bytes.", providers.MaxAnswerBytes)
	}
	return buf.Bytes(), nil
}

// parameters are the request's parameters as the log event keeps them
// (LiteLLM's model_parameters): the ones given.
func parameters(p *Parsed) map[string]any {
	r := &p.Request
	m := map[string]any{"max_tokens": r.MaxTokens}
	if r.Stream {
		m["stream"] = true
	}
	if r.Temperature != nil {
		m["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		m["top_p"] = *r.TopP
	}
	if r.TopK != nil {
		m["top_k"] = *r.TopK
	}
	if len(r.StopSequences) > 0 {
		m["stop_sequences"] = r.StopSequences
	}
	if p.tools > 0 {
		m["tools"] = p.tools
	}
	if r.ToolChoice != nil {
		m["tool_choice"] = r.ToolChoice.Type
	}
	if r.Thinking != nil {
		m["thinking"] = r.Thinking.Type
	}
	return m
}
