// Package cohere serves embeddings on Cohere's API, v2:
//
//	POST {base}/v2/embed   (Authorization: Bearer {api_key})
//	{"model":"embed-v4.0","texts":["…"],"input_type":"search_document","embedding_types":["float"]}
//
// base is https://api.cohere.com unless api_base replaces it. v2 requires
// input_type for every v3+ model; when neither the request nor the
// deployment gives one, sluice sends search_document (as LiteLLM does).
package cohere

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
)

// Name is the litellm_params.model provider prefix this package serves.
const Name = "cohere"

// DefaultAPIBase is Cohere's API.
const DefaultAPIBase = "https://api.cohere.com"

// MaxTexts is the most texts one embed call takes.
const MaxTexts = 96

// DefaultInputType is sent when neither the request nor the deployment
// names an input_type (v2 requires one).
const DefaultInputType = "search_document"

// Provider opens Cohere deployments.
type Provider struct {
	client *http.Client
}

// New returns the provider, calling out through client.
func New(client *http.Client) *Provider { return &Provider{client: client} }

// Key is Cohere's credential: an API key sent as a bearer token.
var Key = models.KeySpec{
	Vendor: Name, KeyEnv: []string{"COHERE_API_KEY", "CO_API_KEY"}, BaseEnv: []string{"COHERE_API_BASE"},
	DefaultBase: DefaultAPIBase, Header: "Authorization", Scheme: "Bearer ",
	Model: models.ModelForm{What: "Cohere model", Form: "cohere/<model>"},
}

var _ models.Embedder = (*endpoint)(nil)

// Open resolves the deployment's api_key (503 without one), api_base and
// model (Key), and its input_type and truncate defaults.
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	cred, model, err := resolve.OpenKey(ctx, Key, d)
	if err != nil {
		return nil, err
	}
	e := &endpoint{client: p.client, model: model, url: cred.APIBase + "/v2/embed", cred: cred}
	for name, dst := range map[string]*string{"input_type": &e.inputType, "truncate": &e.truncate} {
		if v, ok := d.Params.Extra[name]; ok && v != nil {
			s, ok := v.(string)
			if !ok {
				return nil, api.Unavailable("Model '%s' (provider cohere): litellm_params.%s must be a string.", d.ModelName, name)
			}
			*dst = s
		}
	}
	return e, nil
}

type endpoint struct {
	client    *http.Client
	model     string
	url       string
	cred      models.Key
	inputType string // the deployment's defaults
	truncate  string
}

func (e *endpoint) APIBase() string { return e.cred.APIBase }

// embedRequest is the /v2/embed body.
type embedRequest struct {
	Model           string   `json:"model"`
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension int      `json:"output_dimension,omitempty"`
	Truncate        string   `json:"truncate,omitempty"`
}

// SupportsDimensions reports whether a Cohere model takes output_dimension:
// embed v4 and later; the v2 and v3 models have a fixed size.
func SupportsDimensions(model string) bool {
	m := strings.ToLower(model)
	return !strings.Contains(m, "-v3") && !strings.Contains(m, "-v2")
}

// Embed sends the texts in batches of up to 96, concurrently, always asking
// for float embeddings (sluice encodes base64 itself, as OpenAI defines it).
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	texts, out, err := embedbatch.Prepare(req, Name, e.model)
	if err != nil {
		return nil, err
	}
	if req.Dimensions > 0 && !SupportsDimensions(e.model) {
		return nil, embedbatch.Unsupported("dimensions", "Model '%s' (Cohere %s) does not take 'dimensions': its vectors have a fixed size; Cohere Embed v4 takes it.", req.Model, e.model)
	}
	x, err := req.Extras("input_type", "truncate")
	if err != nil {
		return nil, err
	}
	tmpl := embedRequest{Model: e.model, EmbeddingTypes: []string{"float"}, OutputDimension: req.Dimensions}
	if tmpl.InputType, tmpl.Truncate, err = embedbatch.CohereOptions(x, e.inputType, e.truncate, DefaultInputType); err != nil {
		return nil, err
	}
	ep := embedbatch.Endpoint{Provider: Name, Client: e.client, URL: e.url, Authorize: embedbatch.KeyAuth(e.cred)}
	return embedbatch.Run(ctx, texts, embedbatch.Limits{MaxInputs: MaxTexts}, out, embedbatch.Post(ep, func(b embedbatch.Batch) embedRequest {
		body := tmpl
		body.Texts = b.Texts
		return body
	}, ParseEmbed))
}

// ParseEmbed reads a /v2/embed answer: embeddings.float (one vector per
// text, in order) and meta.billed_units.input_tokens.
func ParseEmbed(body []byte, _ http.Header) (embedbatch.Result, error) {
	var res embedbatch.Result
	top, err := embedbatch.Pick(body, "embeddings", "meta")
	if err != nil {
		return res, fmt.Errorf("embed answer: %w", err)
	}
	list, err := embedbatch.Path(top[0], "float")
	if err == nil && list == nil {
		err = errors.New("no embeddings.float")
	}
	if err == nil {
		res.Vectors, err = embedbatch.Vectors(list, "embedding")
	}
	if err != nil {
		return res, fmt.Errorf("embed answer: %w", err)
	}
	res.Tokens, res.TokensKnown = embedbatch.Count(top[1], "billed_units", "input_tokens")
	return res, nil
}
