// Package openai speaks OpenAI's API: api.openai.com, and any
// OpenAI-compatible server at an api_base (vLLM, Ollama's /v1, TEI, Mistral,
// Together, …). Requests and answers already have OpenAI's shape, so bodies
// pass through as bytes: only the model name is rewritten on the way up.
package openai

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// DefaultAPIBase is OpenAI's API. For OpenAI-compatible servers, api_base is
// their base URL ending in /v1, as in LiteLLM.
const DefaultAPIBase = "https://api.openai.com/v1"

// Names lists the litellm_params.model provider prefixes this package
// serves: "openai" (api.openai.com, or any OpenAI-compatible api_base) and
// LiteLLM's names for OpenAI-compatible hosts.
func Names() []string {
	return []string{"openai", "hosted_vllm", "mistral", "together_ai"}
}

// defaultBase is a provider's api_base when the deployment sets none; ""
// means the deployment must set one.
func defaultBase(name string) string {
	switch name {
	case "openai":
		return DefaultAPIBase
	case "mistral":
		return "https://api.mistral.ai/v1"
	case "together_ai":
		return "https://api.together.xyz/v1"
	}
	return ""
}

// keyEnv is the environment variable LiteLLM reads a provider's key from
// when the deployment sets none.
func keyEnv(name string) string {
	switch name {
	case "together_ai":
		return "TOGETHERAI_API_KEY"
	}
	return strings.ToUpper(name) + "_API_KEY"
}

// Key is the credential of provider name (one of Names): an API key sent
// as a bearer token. A deployment with its own api_base (a local vLLM or
// Ollama) may have none, and never gets the environment's key: that key is
// for the provider's own API, not whatever server api_base names.
func Key(name string) models.KeySpec {
	return models.KeySpec{
		Vendor: name, KeyEnv: []string{keyEnv(name)}, DefaultBase: defaultBase(name),
		BaseHint: " to the server's base URL, ending in /v1",
		Header:   "Authorization", Scheme: "Bearer ", OwnBaseOwnKey: true,
	}
}

// Provider opens deployments of one OpenAI-compatible provider.
type Provider struct {
	name   string
	client *http.Client
}

// New returns the provider registered as name (one of Names), calling out
// through client.
func New(name string, client *http.Client) *Provider {
	return &Provider{name: name, client: client}
}

var (
	_ models.Embedder  = (*endpoint)(nil)
	_ models.Chatter   = (*endpoint)(nil)
	_ models.Completer = (*endpoint)(nil)
	_ models.Responder = (*endpoint)(nil)
	_ models.Moderator = (*moderatingEndpoint)(nil)
	_ models.Batcher   = (*moderatingEndpoint)(nil)
)

// Open resolves the deployment's api_base and api_key (Key): a deployment
// on a provider's hosted API needs a key, and is 503 without one.
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	cred, model, err := resolve.OpenKey(ctx, Key(p.name), d)
	if err != nil {
		return nil, err
	}
	base := cred.APIBase
	org, _ := d.Params.Extra["organization"].(string)
	if org, err = resolve.Value(ctx, org); err != nil {
		return nil, fmt.Errorf("%s: resolve organization: %w", p.name, err)
	}
	e := &endpoint{
		provider: p.name, client: p.client, base: base, model: model,
		header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"sluice"}},
	}
	for op, path := range paths {
		e.targets[op] = providers.NewTarget(base + path)
	}
	cred.Authorize(e.header)
	if org != "" {
		e.header.Set("OpenAI-Organization", org)
	}
	e.streamHeader = e.header.Clone()
	e.streamHeader.Set("Accept", "text/event-stream")
	if p.name == "openai" {
		// Only OpenAI's own API (and servers copying it) has OpenAI's
		// moderation shape; Mistral's, for one, differs.
		return &moderatingEndpoint{endpoint: e, BatchAPI: &BatchAPI{Provider: p.name, Client: p.client, Base: base, Header: e.header}}, nil
	}
	return e, nil
}

type endpoint struct {
	provider string
	client   *http.Client
	base     string
	model    string
	// The headers of every call, and of every streamed one: shared by the
	// calls (neither the transport nor the client writes a request's
	// headers), so never modified after Open.
	header, streamHeader http.Header
	// The URL of each operation, parsed at Open.
	targets [len(paths)]providers.Target
}

// The operations an endpoint posts to, and their paths under api_base.
const (
	opEmbeddings = iota
	opChat
	opCompletions
	opResponses
	opModerations
)

var paths = [...]string{
	opEmbeddings:  "/embeddings",
	opChat:        "/chat/completions",
	opCompletions: "/completions",
	opResponses:   "/responses",
	opModerations: "/moderations",
}

func (e *endpoint) APIBase() string { return e.base }

// Embed sends POST {api_base}/embeddings.
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	ans, err := e.send(ctx, opEmbeddings, req.Body(e.model), false)
	if err != nil {
		return nil, err
	}
	ans.Encoding = req.Encoding()
	return ans, nil
}

// Chat sends POST {api_base}/chat/completions: the client's body with the
// model rewritten (and, for a stream, the usage chunk asked for). The answer
// is relayed as it comes.
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	return e.send(ctx, opChat, req.Forward(e.model, true), req.Stream)
}

// Complete sends POST {api_base}/completions, as Chat does.
func (e *endpoint) Complete(ctx context.Context, req *oai.CompletionRequest) (*models.Answer, error) {
	return e.send(ctx, opCompletions, req.Forward(e.model, true), req.Stream)
}

// Respond sends POST {api_base}/responses.
func (e *endpoint) Respond(ctx context.Context, req *oai.ResponsesRequest) (*models.Answer, error) {
	return e.send(ctx, opResponses, req.Forward(e.model), req.Stream)
}

// send posts body to operation op; a streamed answer is an event stream.
func (e *endpoint) send(ctx context.Context, op int, body []byte, stream bool) (*models.Answer, error) {
	header := e.header
	if stream {
		header = e.streamHeader
	}
	hreq, err := e.targets[op].Post(ctx, header, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.provider, paths[op], err)
	}
	if stream {
		return providers.RelayStream(e.client, e.provider, hreq)
	}
	return providers.Relay(e.client, e.provider, hreq)
}

// moderatingEndpoint is an endpoint of OpenAI's own API: it also serves
// moderations, and runs native batches (BatchAPI).
type moderatingEndpoint struct {
	*endpoint
	*BatchAPI
}

// Moderate sends POST {api_base}/moderations.
func (e *moderatingEndpoint) Moderate(ctx context.Context, req *oai.ModerationRequest) (*models.Answer, error) {
	return e.endpoint.send(ctx, opModerations, req.Body(e.model), false)
}
