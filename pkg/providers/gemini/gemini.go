// Package gemini serves the Gemini API (Google AI Studio), with the key in
// x-goog-api-key. Embeddings:
//
//	POST {base}/v1beta/models/{model}:batchEmbedContents
//	{"requests":[{"model":"models/{model}","content":{"parts":[{"text":"…"}]},
//	              "taskType":"RETRIEVAL_QUERY","outputDimensionality":256}]}
//
// The answer carries no token counts, so sluice estimates them
// (embedbatch.EstimateTokens) and the log event says usage_estimated.
//
// Chat completions, translated from and to OpenAI's shapes (ChatEndpoint,
// which Vertex AI's Gemini models share):
//
//	POST {base}/v1beta/models/{model}:generateContent
//	POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse
//	{"contents":[{"role":"user","parts":[{"text":"…"}]}],"systemInstruction":{…},
//	 "tools":[{"functionDeclarations":[…]}],"toolConfig":{…},"generationConfig":{…}}
//
// base is https://generativelanguage.googleapis.com unless api_base replaces
// it.
package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
)

// Name is the litellm_params.model provider prefix this package serves.
const Name = "gemini"

// DefaultAPIBase is the Gemini API.
const DefaultAPIBase = "https://generativelanguage.googleapis.com"

// MaxBatch is the most requests one batchEmbedContents call takes.
const MaxBatch = 100

// Provider opens Gemini API deployments.
type Provider struct {
	client *http.Client
}

// New returns the provider, calling out through client.
func New(client *http.Client) *Provider { return &Provider{client: client} }

// Key is the Gemini API's credential: an API key sent as x-goog-api-key
// (GEMINI_API_KEY, GEMINI_API_BASE: LiteLLM's environment names).
// models.Resolver.Key resolves it for gemini/ deployments and the /gemini
// passthrough.
var Key = models.KeySpec{
	Vendor: Name, KeyEnv: []string{"GEMINI_API_KEY"}, BaseEnv: []string{"GEMINI_API_BASE"},
	DefaultBase: DefaultAPIBase, Header: "X-Goog-Api-Key",
	Model: models.ModelForm{What: "Gemini model", Form: "gemini/<model>", Trim: "models/"},
}

// refusedKey makes a 400 that names the API key a 401: the Gemini API
// refuses a bad or expired key with a 400 (INVALID_ARGUMENT,
// API_KEY_INVALID), but it is the gateway's credential, not the client's
// request (a refused credential, 502, not a 400 for the client).
func refusedKey(pe *models.ProviderError) {
	if pe.Status == http.StatusBadRequest && strings.Contains(pe.Message, "API key") {
		pe.Status = http.StatusUnauthorized
	}
}

// Open resolves the deployment's credential and model (Key; 503 without a
// key).
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	cred, model, err := resolve.OpenKey(ctx, Key, d)
	if err != nil {
		return nil, err
	}
	modelURL := cred.APIBase + "/v1beta/models/" + url.PathEscape(model)
	return &endpoint{
		client: p.client, model: model, cred: cred, taskType: embedbatch.DeploymentTaskType(d.Params.Extra),
		url:      modelURL + ":batchEmbedContents",
		resource: "models/" + model,
		chat: ChatEndpoint{
			Provider: Name, Model: model, URL: modelURL, Dialect: GeminiAPI,
			Drop: providers.NewDropParams(Name, d), Client: p.client,
			Authorize: func(_ context.Context, h http.Header) error { cred.Authorize(h); return nil },
		},
	}, nil
}

var (
	_ models.Embedder = (*endpoint)(nil)
	_ models.Chatter  = (*endpoint)(nil)
)

type endpoint struct {
	client   *http.Client
	model    string
	resource string // models/{model}, as each request names it
	url      string
	cred     models.Key
	taskType string // the deployment's input_type / task_type
	chat     ChatEndpoint
}

func (e *endpoint) APIBase() string { return e.cred.APIBase }

// Chat serves chat completions through generateContent (see ChatEndpoint).
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	return e.chat.Chat(ctx, req)
}

type batchRequest struct {
	Requests []embedRequest `json:"requests"`
}

// embedRequest is an EmbedContentRequest. Its content is a Content, as a
// chat turn is (inputs are never empty, so the text is always sent).
type embedRequest struct {
	Model                string `json:"model"`
	Content              turn   `json:"content"`
	TaskType             string `json:"taskType,omitempty"`
	OutputDimensionality int    `json:"outputDimensionality,omitempty"`
}

// Embed sends the texts in batches of up to 100, concurrently. input_type
// (or task_type) becomes taskType, dimensions outputDimensionality.
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	texts, out, task, err := embedbatch.PrepareGoogle(req, Name, e.model, e.taskType)
	if err != nil {
		return nil, err
	}
	ep := embedbatch.Endpoint{Provider: Name, Client: e.client, URL: e.url, Authorize: embedbatch.KeyAuth(e.cred)}
	call := embedbatch.Post(ep, func(b embedbatch.Batch) batchRequest {
		body := batchRequest{Requests: make([]embedRequest, len(b.Texts))}
		for i, t := range b.Texts {
			body.Requests[i] = embedRequest{
				Model: e.resource, Content: turn{Parts: []chatPart{{Text: t}}},
				TaskType: task, OutputDimensionality: req.Dimensions,
			}
		}
		return body
	}, func(body []byte, _ http.Header) (embedbatch.Result, error) {
		vecs, err := ParseBatch(body)
		// No usage in the answer: Run estimates it.
		return embedbatch.Result{Vectors: vecs}, err
	})
	return embedbatch.Run(ctx, texts, embedbatch.Limits{MaxInputs: MaxBatch}, out, func(ctx context.Context, b embedbatch.Batch) (embedbatch.Result, error) {
		res, err := call(ctx, b)
		var pe *models.ProviderError
		if errors.As(err, &pe) {
			refusedKey(pe) // as the chat path's ReadError does
		}
		return res, err
	})
}

// ParseBatch reads a batchEmbedContents answer: {"embeddings":[{"values":[…]},
// …]}, one per request, in order.
func ParseBatch(body []byte) ([]json.RawMessage, error) {
	list, err := embedbatch.Path(body, "embeddings")
	var vecs []json.RawMessage
	if err == nil {
		vecs, err = embedbatch.Vectors(list, "embedding", "values")
	}
	if err != nil {
		return nil, fmt.Errorf("batchEmbedContents answer: %w", err)
	}
	return vecs, nil
}
