// Package chat is the POST /v1/chat/completions operation (also served at
// /chat/completions, as LiteLLM serves it), with the two endpoints that are
// only forwarded to OpenAI-family providers: /v1/completions and
// /v1/responses. Each validates the request (pkg/oai), routes it through
// pkg/models (whose providers forward or translate it), and hands the
// provider's OpenAI-shaped answer to pkg/modelcall to relay — JSON as it
// comes, a stream event by event — while a meter reads its usage, finish
// reason and content for the log event.
//
// A provider's stream always ends with the usage chunk (the gateway counts
// tokens by it); when the client did not ask for it
// (stream_options.include_usage), the stream goes through a filter that
// meters each event as it passes and drops that chunk.
package chat

import (
	"context"
	"encoding/json"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Router is what the service needs of pkg/models.
type Router interface {
	Chat(ctx context.Context, p auth.Principal, req *oai.ChatRequest) (*models.Reply, error)
	Complete(ctx context.Context, p auth.Principal, req *oai.CompletionRequest) (*models.Reply, error)
	Respond(ctx context.Context, p auth.Principal, req *oai.ResponsesRequest) (*models.Reply, error)
}

// Service is the chat endpoints' operations, transport-free.
type Service struct {
	calls *modelcall.Calls
	// Each endpoint's steps, made once: the router's method values would
	// be allocated anew on every call.
	chat        modelcall.Steps[*oai.ChatRequest]
	completions modelcall.Steps[*oai.CompletionRequest]
	responses   modelcall.Steps[*oai.ResponsesRequest]
}

// New builds the service over router, its calls ending through calls.
func New(router Router, calls *modelcall.Calls) *Service {
	return &Service{
		calls: calls,
		chat: modelcall.Steps[*oai.ChatRequest]{
			CallType: logevent.CallCompletion, Parse: oai.ParseChatRequest, Route: router.Chat, Describe: describeChat,
		},
		completions: modelcall.Steps[*oai.CompletionRequest]{
			CallType: logevent.CallTextCompletion, Parse: oai.ParseCompletionRequest, Route: router.Complete, Describe: describeCompletion,
		},
		responses: modelcall.Steps[*oai.ResponsesRequest]{
			CallType: logevent.CallResponses, Parse: oai.ParseResponsesRequest, Route: router.Respond, Describe: describeResponses,
		},
	}
}

func describeChat(req *oai.ChatRequest, ev *logevent.Event) error {
	ev.Model, ev.ModelGroup, ev.EndUser, ev.Stream = req.Model, req.Model, req.User, req.Stream
	ev.Messages = req.RawMessages
	ev.ModelParameters = chatParameters(req)
	return nil
}

func describeCompletion(req *oai.CompletionRequest, ev *logevent.Event) error {
	ev.Model, ev.ModelGroup, ev.Stream = req.Model, req.Model, req.Stream
	ev.Messages = req.Prompt
	return nil
}

func describeResponses(req *oai.ResponsesRequest, ev *logevent.Event) error {
	ev.Model, ev.ModelGroup, ev.Stream = req.Model, req.Model, req.Stream
	ev.Messages = req.Input
	return nil
}

// Chat is the chat completions Operation (POST /v1/chat/completions).
func (s *Service) Chat(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	c, req, rep, err := s.chat.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	ans := rep.Answer
	c.Event.UsageEstimated = ans.UsageEstimated
	return relay(c, ans, kindChat, req.Stream, req.IncludeUsage, (*chatPrompt)(req)), nil
}

// Completions is the text completions Operation (POST /v1/completions):
// forwarded to OpenAI-family deployments only.
func (s *Service) Completions(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	c, req, rep, err := s.completions.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	return relay(c, rep.Answer, kindText, req.Stream, req.IncludeUsage, (*textPrompt)(req)), nil
}

// relay makes the Result of a chat or text completion: its JSON answer, or
// its stream — through the usage filter when the client did not ask for
// the usage chunk.
func relay(c *modelcall.Call, ans *models.Answer, k kind, stream, includeUsage bool, prompt prompt) *modelcall.Result {
	if !stream {
		m := newJSONMeter(k, prompt, ans.ContentLength, c.LogsBodies())
		m.usage, m.finish = ans.Usage, ans.FinishReason
		return c.Answer(ans.Body, ans.ContentLength, m)
	}
	obs := newChunks(k, prompt)
	if includeUsage {
		return c.Stream(ans.Body, newStreamMeter(obs))
	}
	f := newUsageFilter(ans.Body, obs)
	return c.Stream(f, f)
}

// Responses is the Responses API Operation (POST /v1/responses): forwarded
// to OpenAI-family deployments only.
func (s *Service) Responses(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	c, req, rep, err := s.responses.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	ans := rep.Answer
	prompt := (*responsesPrompt)(req)
	if !req.Stream {
		return c.Answer(ans.Body, ans.ContentLength, newJSONMeter(kindResponses, prompt, ans.ContentLength, c.LogsBodies())), nil
	}
	return c.Stream(ans.Body, newResponseStreamMeter(prompt)), nil
}

// prompt is a request's prompt, whose tokens a meter estimates for an
// answer without usage. The requests are prompts as they are (a pointer in
// an interface): a closure over one would be allocated on every call.
type prompt interface{ tokens() int64 }

type (
	chatPrompt      oai.ChatRequest
	textPrompt      oai.CompletionRequest
	responsesPrompt oai.ResponsesRequest
)

func (p *chatPrompt) tokens() int64 {
	var n int64
	for _, msg := range (*oai.ChatRequest)(p).Messages() {
		n += oai.EstimateTokens(msg.Text())
	}
	return n
}

func (p *textPrompt) tokens() int64 { return oai.EstimateTokens(string(p.Prompt)) }

func (p *responsesPrompt) tokens() int64 { return oai.EstimateTokens(string(p.Input)) }

// chatParameters are the request's parameters as the log event keeps them
// (LiteLLM's model_parameters): the ones given.
func chatParameters(r *oai.ChatRequest) json.RawMessage {
	var p logevent.Params // in key order, as encoding/json writes a map
	floatParam(&p, "frequency_penalty", r.FrequencyPenalty)
	if r.Logprobs {
		p.Bool("logprobs", true)
	}
	if r.MaxCompletionTokens > 0 {
		p.Int("max_completion_tokens", r.MaxCompletionTokens)
	}
	if r.MaxTokens > 0 {
		p.Int("max_tokens", r.MaxTokens)
	}
	if r.N > 0 {
		p.Int("n", int64(r.N))
	}
	floatParam(&p, "presence_penalty", r.PresencePenalty)
	if r.ReasoningEffort != "" {
		p.String("reasoning_effort", r.ReasoningEffort)
	}
	if r.ResponseFormat != nil {
		p.String("response_format", r.ResponseFormat.Type)
	}
	if r.Seed != nil {
		p.Int("seed", *r.Seed)
	}
	if r.Stop != nil {
		p.Strings("stop", r.Stop)
	}
	if r.Stream {
		p.Bool("stream", true)
	}
	floatParam(&p, "temperature", r.Temperature)
	if r.ToolChoice != nil {
		p.Raw("tool_choice", r.ToolChoice.Raw)
	}
	if len(r.Tools) > 0 {
		p.Int("tools", int64(len(r.Tools)))
	}
	floatParam(&p, "top_p", r.TopP)
	if r.User != "" {
		p.String("user", r.User)
	}
	return p.End()
}

func floatParam(p *logevent.Params, name string, v *float64) {
	if v != nil {
		p.Float(name, *v)
	}
}
