// Package openai speaks OpenAI's API: api.openai.com, and any
// OpenAI-compatible server at an api_base (vLLM, Ollama's /v1, TEI, Mistral,
// Together, …). Requests and answers already have OpenAI's shape, so bodies
// pass through as bytes: only the model name is rewritten on the way up.
package openai

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
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

// Provider opens deployments of one OpenAI-compatible provider.
type Provider struct {
	name   string
	client *http.Client
	getenv func(string) string
}

// New returns the provider registered as name (one of Names), calling out
// through client. getenv (nil: none) supplies LiteLLM's fallback key
// variable (OPENAI_API_KEY, MISTRAL_API_KEY, TOGETHERAI_API_KEY, …).
func New(name string, client *http.Client, getenv func(string) string) *Provider {
	return &Provider{name: name, client: client, getenv: getenv}
}

// Open resolves the deployment's api_base and api_key. A deployment on a
// provider's hosted API needs a key — its api_key, else the provider's
// environment variable — and is 503 without one. One with its own api_base
// may have none (a local vLLM or Ollama), and never gets the environment's
// key: that key is for the provider's own API, not whatever server
// api_base names.
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	base, err := resolve(ctx, d.Params.APIBase)
	if err != nil {
		return nil, fmt.Errorf("%s: resolve api_base: %w", p.name, err)
	}
	ownBase := base != ""
	if !ownBase {
		base = defaultBase(p.name)
	}
	if base == "" {
		return nil, api.Unavailable("Model '%s' (provider %s) has no api_base configured: set litellm_params.api_base to the server's base URL, ending in /v1.", d.ModelName, p.name)
	}
	base = strings.TrimRight(base, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, api.Unavailable("Model '%s' has an api_base that is not an http(s) URL.", d.ModelName)
	}
	key, err := resolve(ctx, d.Params.APIKey)
	if err != nil {
		return nil, fmt.Errorf("%s: resolve api_key: %w", p.name, err)
	}
	if key == "" && !ownBase && p.getenv != nil {
		key = p.getenv(keyEnv(p.name))
	}
	if key == "" && !ownBase {
		return nil, api.Unavailable("Model '%s' has no api_key configured for provider %s: set litellm_params.api_key, or %s.", d.ModelName, p.name, keyEnv(p.name))
	}
	org, _ := d.Params.Extra["organization"].(string)
	if org, err = resolve(ctx, org); err != nil {
		return nil, fmt.Errorf("%s: resolve organization: %w", p.name, err)
	}
	e := &endpoint{
		provider: p.name, client: p.client, base: base, model: d.Params.ProviderModel(),
		header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"sluice"}},
	}
	if key != "" {
		e.header.Set("Authorization", "Bearer "+key)
	}
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
}

func (e *endpoint) APIBase() string { return e.base }

// Embed sends POST {api_base}/embeddings.
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	ans, err := e.post(ctx, "/embeddings", req.Body(e.model))
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
	return e.send(ctx, "/chat/completions", req.Forward(e.model, true), req.Stream)
}

// Complete sends POST {api_base}/completions, as Chat does.
func (e *endpoint) Complete(ctx context.Context, req *oai.CompletionRequest) (*models.Answer, error) {
	return e.send(ctx, "/completions", req.Forward(e.model, true), req.Stream)
}

// Respond sends POST {api_base}/responses.
func (e *endpoint) Respond(ctx context.Context, req *oai.ResponsesRequest) (*models.Answer, error) {
	return e.send(ctx, "/responses", req.Forward(e.model), req.Stream)
}

func (e *endpoint) post(ctx context.Context, path string, body []byte) (*models.Answer, error) {
	return e.send(ctx, path, body, false)
}

// send posts body to path; a streamed answer is an event stream.
func (e *endpoint) send(ctx context.Context, path string, body []byte, stream bool) (*models.Answer, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.provider, path, err)
	}
	if stream {
		hreq.Header = e.streamHeader
		return providers.RelayStream(e.client, e.provider, hreq)
	}
	hreq.Header = e.header
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
	return e.post(ctx, "/moderations", req.Body(e.model))
}
