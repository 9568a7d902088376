// Package models routes a model call to a deployment of the configured
// model_list (LiteLLM's form) and owns the seam every provider package plugs
// into.
//
// A model_name may have several deployments: the router picks one at random,
// weighted by weight, rpm or tpm (LiteLLM's simple-shuffle), holds each
// deployment to its rpm/tpm limits through the shared store.Limiter (so the
// limits hold across Lambda containers), bounds each attempt by the
// deployment's timeout, retries 429s, 5xx answers, timeouts and connection
// failures with exponential backoff and jitter (honouring Retry-After), cools
// a failing deployment down, and finally tries router_settings.fallbacks.
// Before any of that it enforces the models the caller's key and team may use
// (403); their rpm/tpm limits were applied before the call reached it (429),
// and it counts the call's tokens against them once the answer is known.
//
// The seam: a Provider, registered under the provider part of
// litellm_params.model ("openai" in "openai/text-embedding-3-small"), opens a
// deployment into an Endpoint once (credentials resolved, URL built); the
// Endpoint implements Embedder, Moderator, Chatter, Completer and/or
// Responder, turning an OpenAI-shaped request into its wire call and its
// answer back into an OpenAI-shaped body. A deployment with a mock_response
// in its litellm_params is never opened: the router's mock endpoint answers
// its chat and embeddings calls from it (as it answers a request's own
// mock_response).
package models

import (
	"bytes"
	"context"
	"io"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Provider opens the deployments of one kind of provider.
type Provider interface {
	// Open prepares a deployment for calls: resolves its credentials
	// through resolve and builds its URLs. The router calls it once per
	// deployment and keeps the Endpoint; an error is not kept, so the next
	// call tries again. A missing credential should be an api.Unavailable
	// error (503) saying what to configure.
	Open(ctx context.Context, d config.Deployment, resolve Resolver) (Endpoint, error)
}

// Endpoint is an opened deployment. It implements one or more of Embedder,
// Moderator, Chatter, Completer and Responder; the router answers 400 for a
// model whose deployments do not support the call asked for.
type Endpoint interface {
	// APIBase is the base URL calls go to, for logs.
	APIBase() string
}

// Embedder is an Endpoint that serves embeddings.
type Embedder interface {
	// Embed calls the provider. On success the Answer's body is an OpenAI
	// embeddings response; on failure the error is a *ProviderError for an
	// answer other than 2xx, or the transport's error (wrapped).
	Embed(ctx context.Context, req *oai.EmbeddingRequest) (*Answer, error)
}

// Moderator is an Endpoint that serves moderations.
type Moderator interface {
	// Moderate calls the provider; errors as for Embed. The Answer's body
	// is an OpenAI moderation response.
	Moderate(ctx context.Context, req *oai.ModerationRequest) (*Answer, error)
}

// Chatter is an Endpoint that serves chat completions.
type Chatter interface {
	// Chat calls the provider; errors as for Embed. A parameter the
	// provider cannot honour is a 400 *api.Error naming it, unless the
	// deployment or the request drops it (providers.DropParams). On success
	// the Answer's body is an OpenAI chat.completion; for req.Stream, an
	// OpenAI chunk stream (text/event-stream: data: {chat.completion.chunk}
	// events) that, after the last choice chunk, ends with the usage chunk
	// (choices: [], the provider's usage) and data: [DONE] — whether or not
	// the client asked for usage: the gateway needs it, and the chat
	// endpoint drops it for clients that did not ask. A stream that fails
	// after its first byte returns the error from Read (an *api.Error for a
	// provider's in-band error: oai.ChunkStream).
	Chat(ctx context.Context, req *oai.ChatRequest) (*Answer, error)
}

// Completer is an Endpoint that serves the legacy text completions
// (/v1/completions): OpenAI-family providers only, forwarded. A stream
// ends with the usage chunk, as for Chat.
type Completer interface {
	Complete(ctx context.Context, req *oai.CompletionRequest) (*Answer, error)
}

// Responder is an Endpoint that serves the Responses API (/v1/responses):
// OpenAI-family providers only, forwarded. A stream is OpenAI's typed
// response events, its usage in response.completed.
type Responder interface {
	Respond(ctx context.Context, req *oai.ResponsesRequest) (*Answer, error)
}

// Answer is a provider's successful answer, already in OpenAI's shape. The
// body streams: the caller relays it and must close it.
type Answer struct {
	Body io.ReadCloser
	// ContentLength is the body's length, or -1 when unknown.
	ContentLength int64
	// Encoding is the embedding encoding of the vectors in Body
	// (oai.EncodingFloat or oai.EncodingBase64); empty for other calls. When it is
	// not what the client asked for, the embeddings endpoint converts.
	Encoding string
	// UsageEstimated is true when the provider reported no token counts
	// and the usage in Body is sluice's estimate (the log event says so).
	UsageEstimated bool
	// Usage is the answer's usage when the call layer need not read it
	// from Body: a translated (not forwarded) answer, whose translator
	// knows it. nil: meter Body (a forwarded OpenAI body, a stream).
	Usage *oai.Usage
	// FinishReason is the first choice's finish reason, with Usage.
	FinishReason string
}

// Translated is a translator's whole chat answer: the chat.completion body
// out, with the usage and finish reason the translator read (usage nil:
// the provider gave none, and the body is metered as forwarded ones are).
func Translated(out []byte, usage *oai.Usage, finish string) *Answer {
	return &Answer{Body: io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)), Usage: usage, FinishReason: finish}
}
