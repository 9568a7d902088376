// Package azure speaks Azure OpenAI: OpenAI's API behind a resource
// endpoint, addressed by deployment name and api-version, authenticated with
// an api-key header.
//
//	POST {api_base}/openai/deployments/{deployment}/{embeddings|chat/completions|completions}?api-version={api_version}
//	POST {api_base}/openai/responses?api-version={api_version}
//
// api_base keeps LiteLLM's meaning: the resource endpoint,
// https://{resource}.openai.azure.com. The deployment is the model part of
// litellm_params.model ("azure/{deployment}").
package azure

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/openai"
)

// Name is the litellm_params.model provider prefix this package serves.
const Name = "azure"

// DefaultAPIVersion is the api-version sent when the deployment sets no
// api_version: the current generally-available data-plane version.
const DefaultAPIVersion = "2024-10-21"

// Provider opens Azure OpenAI deployments.
type Provider struct {
	client *http.Client
}

// New returns the provider, calling out through client.
func New(client *http.Client) *Provider { return &Provider{client: client} }

// Key is Azure OpenAI's credential: an api-key header for a resource
// endpoint, both required.
var Key = models.KeySpec{
	Vendor: Name, KeyEnv: []string{"AZURE_API_KEY"}, BaseEnv: []string{"AZURE_API_BASE"},
	BaseHint: " to the resource endpoint, https://<resource>.openai.azure.com",
	Header:   "Api-Key",
	Model:    models.ModelForm{What: "Azure deployment", Form: "azure/<deployment>"},
}

// VersionEnv is api_version's environment fallback (LiteLLM's).
const VersionEnv = "AZURE_API_VERSION"

var (
	_ models.Embedder  = (*endpoint)(nil)
	_ models.Chatter   = (*endpoint)(nil)
	_ models.Completer = (*endpoint)(nil)
	_ models.Responder = (*endpoint)(nil)
	_ models.Batcher   = (*endpoint)(nil)
)

// Open resolves the deployment's api_base, api_key and deployment (Key),
// and api_version (else VersionEnv, else DefaultAPIVersion).
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	cred, deployment, err := resolve.OpenKey(ctx, Key, d)
	if err != nil {
		return nil, err
	}
	base := cred.APIBase
	version, err := resolve.Setting(ctx, d.Params.APIVersion, VersionEnv)
	if err != nil {
		return nil, fmt.Errorf("azure: resolve api_version: %w", err)
	}
	if version == "" {
		version = DefaultAPIVersion
	}
	e := &endpoint{
		client:     p.client,
		base:       base,
		deployment: deployment,
		query:      "?api-version=" + url.QueryEscape(version),
		header:     http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"sluice"}},
	}
	cred.Authorize(e.header)
	// Azure serves OpenAI's Files and Batch APIs under /openai, naming
	// endpoints without /v1.
	e.BatchAPI = &openai.BatchAPI{Provider: Name, Client: p.client, Base: base + "/openai", Query: e.query, Header: e.header, NoV1: true}
	return e, nil
}

type endpoint struct {
	client     *http.Client
	base       string
	deployment string
	query      string
	header     http.Header // never modified after Open
	// BatchAPI runs native batches on the resource (global-batch
	// deployments).
	*openai.BatchAPI
}

func (e *endpoint) APIBase() string { return e.base }

// Embed sends POST {api_base}/openai/deployments/{deployment}/embeddings.
// Azure takes the model from the URL; the body's model is set to the
// deployment name, as Azure's own SDKs send it.
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	ans, err := e.send(ctx, e.deploymentURL("/embeddings"), req.Body(e.deployment), false)
	if err != nil {
		return nil, err
	}
	ans.Encoding = req.Encoding()
	return ans, nil
}

// Chat sends POST {api_base}/openai/deployments/{deployment}/chat/completions,
// the body as for OpenAI (model: the deployment name).
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	return e.send(ctx, e.deploymentURL("/chat/completions"), req.Forward(e.deployment, true), req.Stream)
}

// Complete sends POST {api_base}/openai/deployments/{deployment}/completions.
func (e *endpoint) Complete(ctx context.Context, req *oai.CompletionRequest) (*models.Answer, error) {
	return e.send(ctx, e.deploymentURL("/completions"), req.Forward(e.deployment, true), req.Stream)
}

// Respond sends POST {api_base}/openai/responses?api-version=…: the
// Responses API is not under the deployment's path; the body's model names
// the deployment.
func (e *endpoint) Respond(ctx context.Context, req *oai.ResponsesRequest) (*models.Answer, error) {
	return e.send(ctx, e.base+"/openai/responses"+e.query, req.Forward(e.deployment), req.Stream)
}

func (e *endpoint) deploymentURL(op string) string {
	return e.base + "/openai/deployments/" + url.PathEscape(e.deployment) + op + e.query
}

// send posts body to u; a streamed answer is an event stream.
func (e *endpoint) send(ctx context.Context, u string, body []byte, stream bool) (*models.Answer, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	hreq.Header = e.header.Clone()
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
		return providers.RelayStream(e.client, Name, hreq)
	}
	return providers.Relay(e.client, Name, hreq)
}
