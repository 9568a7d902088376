// Package vertex serves embeddings on Vertex AI's text-embedding models
// (gemini-embedding-001, text-embedding-005, text-multilingual-embedding-002,
// …) through their predict method:
//
//	POST {base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:predict
//	{"instances":[{"content":"…","task_type":"RETRIEVAL_QUERY"}],"parameters":{"outputDimensionality":256}}
//
// base is https://{location}-aiplatform.googleapis.com
// (https://aiplatform.googleapis.com for the global location) unless api_base
// replaces it. Calls carry an OAuth2 access token minted from the
// deployment's service account (pkg/providers/google), cached until shortly
// before it expires.
//
// Chat completions (chat.go) go to the model's publisher: Gemini models
// through generateContent, with the Gemini API's translator
// (gemini_chat.go).
package vertex

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
)

// Name is the litellm_params.model provider prefix this package serves.
const Name = "vertex_ai"

// Request limits of Vertex AI's text embeddings API.
const (
	// MaxInstances is the most texts one predict call takes.
	MaxInstances = 250
	// MaxBytes bounds the text of one call: the API refuses a request over
	// 20,000 tokens, so a call carries at most 40,000 bytes of text (a
	// pessimistic 2 bytes per token). A longer single text still goes,
	// alone (the API truncates it to the model's input length).
	MaxBytes = 40000
)

// instanceLimit is the most texts one call to model may carry: the Gemini
// embedding models take one instance per request, the legacy gecko models
// five.
func instanceLimit(model string) int {
	switch m := strings.ToLower(model); {
	case strings.HasPrefix(m, "gemini-embedding"):
		return 1
	case strings.HasPrefix(m, "textembedding-gecko"):
		return 5
	}
	return MaxInstances
}

// modelForm is how a deployment names its model; a full resource name's
// publisher prefix is the path's own.
var modelForm = models.ModelForm{What: "Vertex AI model", Form: "vertex_ai/<model>", Trim: "publishers/google/models/"}

// Provider opens Vertex AI deployments.
type Provider struct {
	client *http.Client

	mu     sync.Mutex
	tokens map[[sha256.Size]byte]*google.TokenSource // by credential, shared by deployments
}

// New returns the provider, calling out (and to the token endpoint) through
// client.
func New(client *http.Client) *Provider {
	return &Provider{client: client, tokens: map[[sha256.Size]byte]*google.TokenSource{}}
}

// Open resolves the deployment's credentials (vertex_credentials: the
// service-account JSON or a path to it), project (vertex_project, else the
// credential's project_id) and location (vertex_location, default
// us-central1), each falling back to its environment variable, and builds
// the predict URL.
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	alias := func(v, name string) string {
		if v == "" {
			v, _ = d.Params.Extra[name].(string)
		}
		return v
	}
	s := Settings{
		Credentials: d.Params.VertexCredentials,
		Project:     alias(d.Params.VertexProject, "vertex_ai_project"),
		Location:    alias(d.Params.VertexLocation, "vertex_ai_location"),
	}
	cred, err := Resolve(ctx, s, ModelEnv(), resolve, p.tokenSource)
	switch {
	case errors.Is(err, ErrNoCredentials):
		return nil, api.Unavailable("Model '%s' (provider vertex_ai) has no credentials configured: set litellm_params.vertex_credentials to a service-account JSON (or a path to one), or GOOGLE_APPLICATION_CREDENTIALS.", d.ModelName)
	case models.IsBadSetting(err):
		e := api.Unavailable("Model '%s' (provider vertex_ai): %v.", d.ModelName, err)
		e.Err = err
		return nil, e
	case err != nil:
		return nil, err
	}
	tokens, project, location := cred.Tokens, cred.Project, cred.Location
	if project == "" {
		return nil, api.Unavailable("Model '%s' (provider vertex_ai) has no project: set litellm_params.vertex_project or VERTEXAI_PROJECT.", d.ModelName)
	}
	base, err := resolve.Value(ctx, d.Params.APIBase)
	if err != nil {
		return nil, fmt.Errorf("vertex_ai: resolve api_base: %w", err)
	}
	if strings.TrimSpace(base) == "" {
		base = google.VertexEndpoint(location)
	}
	if base, err = models.CheckBase(base); err != nil {
		return nil, api.Unavailable("Model '%s' (provider vertex_ai): %v.", d.ModelName, err)
	}
	model, err := modelForm.Of(d)
	if err != nil {
		return nil, err
	}
	return &endpoint{
		client: p.client, tokens: tokens, base: base, model: model, taskType: embedbatch.DeploymentTaskType(d.Params.Extra),
		project: project, location: location, drop: providers.NewDropParams(Name, d),
		url: base + "/v1/projects/" + url.PathEscape(project) + "/locations/" + url.PathEscape(location) +
			"/publishers/google/models/" + url.PathEscape(model) + ":predict",
	}, nil
}

// tokenSource returns the token source of a credential, shared by every
// deployment using it: one token cache per service account.
func (p *Provider) tokenSource(creds string) (*google.TokenSource, error) {
	key := sha256.Sum256([]byte(creds))
	p.mu.Lock()
	defer p.mu.Unlock()
	if ts, ok := p.tokens[key]; ok {
		return ts, nil
	}
	ts, err := google.NewTokenSource(creds, google.Options{HTTPClient: p.client})
	if err != nil {
		return nil, err
	}
	p.tokens[key] = ts
	return ts, nil
}

var (
	_ models.Embedder  = (*endpoint)(nil)
	_ models.Chatter   = (*endpoint)(nil)
	_ models.Messenger = (*endpoint)(nil)
)

type endpoint struct {
	client   *http.Client
	tokens   *google.TokenSource
	base     string
	model    string
	project  string
	location string
	url      string
	taskType string // the deployment's input_type / task_type
	// drop is the deployment's drop_params policy.
	drop providers.DropParams
}

func (e *endpoint) APIBase() string { return e.base }

type instance struct {
	Content  string `json:"content"`
	TaskType string `json:"task_type,omitempty"`
}

type predictRequest struct {
	Instances  []instance  `json:"instances"`
	Parameters *parameters `json:"parameters,omitempty"`
}

type parameters struct {
	OutputDimensionality int `json:"outputDimensionality,omitempty"`
}

// Embed sends the texts in batches within the model's instance limit,
// concurrently. input_type (LiteLLM's name; task_type is accepted too)
// becomes each instance's task_type; dimensions becomes
// parameters.outputDimensionality.
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	texts, out, taskType, err := embedbatch.PrepareGoogle(req, Name, e.model, e.taskType)
	if err != nil {
		return nil, err
	}
	var params *parameters
	if req.Dimensions > 0 {
		params = &parameters{OutputDimensionality: req.Dimensions}
	}
	lim := embedbatch.Limits{MaxInputs: instanceLimit(e.model), MaxBytes: MaxBytes}
	ep := embedbatch.Endpoint{Provider: Name, Client: e.client, URL: e.url, Authorize: func(r *http.Request, _ []byte) error {
		return e.authorize(r.Context(), r.Header)
	}}
	return embedbatch.Run(ctx, texts, lim, out, embedbatch.Post(ep, func(b embedbatch.Batch) predictRequest {
		body := predictRequest{Instances: make([]instance, len(b.Texts)), Parameters: params}
		for i, t := range b.Texts {
			body.Instances[i] = instance{Content: t, TaskType: taskType}
		}
		return body
	}, ParsePredictions))
}

// authorize puts an access token of the deployment's service account on a
// call's headers.
func (e *endpoint) authorize(ctx context.Context, h http.Header) error {
	token, err := e.tokens.AccessToken(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("vertex_ai: %w", err)
		}
		return api.Upstream(err, "The gateway could not get a Google access token for Vertex AI model '%s' from its service account's token endpoint.", e.model)
	}
	h.Set("Authorization", "Bearer "+token)
	return nil
}

// ParsePredictions reads a text-embeddings predict answer: one prediction
// per instance, in order, each {"embeddings":{"values":[…],
// "statistics":{"token_count":N,"truncated":false}}}. Usage is the sum of
// token_count; it is known only when every prediction has one.
func ParsePredictions(body []byte, _ http.Header) (embedbatch.Result, error) {
	preds, err := embedbatch.Path(body, "predictions")
	var res embedbatch.Result
	if err == nil {
		res.Vectors, err = embedbatch.Vectors(preds, "prediction", "embeddings", "values")
	}
	if err != nil {
		return embedbatch.Result{}, fmt.Errorf("predict answer: %w", err)
	}
	res.Tokens, res.TokensKnown = embedbatch.Sum(preds, "embeddings", "statistics", "token_count")
	return res, nil
}
