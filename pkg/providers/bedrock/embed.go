package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
)

// Name is the litellm_params.model provider prefix of Bedrock deployments.
const Name = "bedrock"

// Embedding limits of the Bedrock models this package translates.
const (
	// CohereMaxTexts is Cohere Embed's limit of texts per InvokeModel call.
	CohereMaxTexts = 96
	// DefaultCohereInputType is sent when neither the request nor the
	// deployment gives an input_type: Cohere's v3+ models require one, and
	// LiteLLM sends the same default.
	DefaultCohereInputType = "search_document"
)

// InputTokenHeader carries InvokeModel's input token count.
const InputTokenHeader = "X-Amzn-Bedrock-Input-Token-Count"

// family is a kind of Bedrock embedding model, by its request shape.
type family int

const (
	familyUnknown family = iota
	familyTitanV1
	familyTitanV2
	familyCohere
)

// familyOf reads the model family from a model id, an inference-profile id
// (us.cohere.embed-v4:0) or a foundation-model ARN.
func familyOf(model string) family {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "amazon.titan-embed-text-v1"), strings.Contains(m, "amazon.titan-embed-g1-text"):
		return familyTitanV1
	case strings.Contains(m, "amazon.titan-embed-text-v2"):
		return familyTitanV2
	case strings.Contains(m, "cohere.embed"):
		return familyCohere
	}
	return familyUnknown
}

// cohereDimensions reports whether a Cohere model takes output_dimension:
// embed v4 and later; the v3 models (english, multilingual, light) do not.
func cohereDimensions(model string) bool {
	return !strings.Contains(strings.ToLower(model), "-v3")
}

// titanV2Dimensions are the output sizes Titan Text Embeddings v2 accepts.
var titanV2Dimensions = []int{256, 512, 1024}

// Provider opens Bedrock deployments: for embeddings, Amazon Titan Text
// Embeddings v1 and v2 (one text per InvokeModel call, fanned out
// concurrently) and Cohere Embed (up to 96 texts per call); for chat, every
// model Converse serves (converse.go).
type Provider struct {
	client *http.Client
	chain  DefaultChain
}

// NewProvider returns the Bedrock provider, calling out through client.
// chain (nil: none) is the AWS SDK's default credential chain, for a Lambda
// role or a profile.
func NewProvider(client *http.Client, chain DefaultChain) *Provider {
	return &Provider{client: client, chain: chain}
}

// Environment fallbacks of a deployment's endpoints and batch role.
const (
	RuntimeEndpointEnv = "AWS_BEDROCK_RUNTIME_ENDPOINT"
	ControlEndpointEnv = "AWS_ENDPOINT_URL_BEDROCK"
	BatchRoleEnv       = "AWS_BATCH_ROLE_ARN"
)

// Open resolves the deployment's AWS credentials and region (aws_* params,
// then the environment, then the default chain) and its runtime endpoint:
// api_base (or LiteLLM's aws_bedrock_runtime_endpoint, or
// AWS_BEDROCK_RUNTIME_ENDPOINT), else bedrock-runtime.{region}.amazonaws.com.
// The model id sent is litellm_params.model_id when set (an ARN of a
// provisioned model or an application inference profile, whose family
// litellm_params.model names), else the model part of litellm_params.model
// without LiteLLM's route prefix (ModelID).
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	str := func(name, v string, envs ...string) (string, error) {
		out, err := resolve.Setting(ctx, v, envs...)
		if err != nil {
			return "", fmt.Errorf("bedrock: resolve %s: %w", name, err)
		}
		return out, nil
	}
	keys := Keys{Region: d.Params.AWSRegionName, AccessKeyID: d.Params.AWSAccessKeyID, SecretAccessKey: d.Params.AWSSecretAccessKey, SessionToken: d.Params.AWSSessionToken}
	auth, err := Resolve(ctx, keys, resolve, p.chain)
	if err != nil && !errors.Is(err, ErrNoCredentials) {
		return nil, err
	}
	if err != nil {
		// NewAuth's messages name settings, never secret values.
		e := api.Unavailable("Model '%s' (provider bedrock) has no usable AWS credentials: %v. Set aws_region_name with aws_access_key_id and aws_secret_access_key, or give the gateway AWS credentials (environment, profile, role).", d.ModelName, err)
		e.Err = err
		return nil, e
	}
	base, err := str("api_base", d.Params.APIBase)
	if err != nil {
		return nil, err
	}
	if base == "" {
		v, _ := d.Params.Extra["aws_bedrock_runtime_endpoint"].(string)
		if base, err = str("aws_bedrock_runtime_endpoint", v, RuntimeEndpointEnv); err != nil {
			return nil, err
		}
	}
	if base == "" {
		base = RuntimeEndpoint(auth.Region)
	}
	if base, err = models.CheckBase(base); err != nil {
		return nil, api.Unavailable("Model '%s' (provider bedrock): %v.", d.ModelName, err)
	}
	model := ModelID(d.Params.ProviderModel())
	id := model
	if v, ok := d.Params.Extra["model_id"].(string); ok && strings.TrimSpace(v) != "" {
		id = strings.TrimSpace(v)
	}
	if id == "" {
		return nil, api.Unavailable("Model '%s' names no Bedrock model: litellm_params.model must be bedrock/<model id>.", d.ModelName)
	}
	e := &endpoint{
		client: p.client, auth: auth, base: base, model: model, id: id, family: familyOf(model),
		chat: chatFamilyOf(model), drop: providers.NewDropParams(Name, d),
		invokeURL:   base + ModelPath(id, "invoke"),
		converseURL: base + ModelPath(id, ActionConverse),
		streamURL:   base + ModelPath(id, ActionConverseStream),
	}
	// Batch inference runs on the control plane, as a service role.
	if e.controlBase, err = str("control endpoint", "", ControlEndpointEnv); err != nil {
		return nil, err
	}
	if e.controlBase = strings.TrimRight(e.controlBase, "/"); e.controlBase == "" {
		e.controlBase = ControlEndpoint(auth.Region)
	}
	role, _ := d.Params.Extra["aws_batch_role_arn"].(string)
	if e.roleARN, err = str("aws_batch_role_arn", role, BatchRoleEnv); err != nil {
		return nil, err
	}
	if e.defaults, err = deploymentDefaults(d); err != nil {
		return nil, api.Unavailable("Model '%s' (provider bedrock): %v.", d.ModelName, err)
	}
	if g, ok := d.Params.Extra["guardrailConfig"]; ok && g != nil {
		m, isMap := g.(map[string]any)
		if !isMap {
			return nil, api.Unavailable("Model '%s' (provider bedrock): litellm_params.guardrailConfig must be a mapping (guardrailIdentifier, guardrailVersion).", d.ModelName)
		}
		if e.guardrail, err = json.Marshal(m); err != nil {
			return nil, api.Unavailable("Model '%s' (provider bedrock): litellm_params.guardrailConfig: %v.", d.ModelName, err)
		}
	}
	return e, nil
}

// routePrefixes are the route names LiteLLM allows before a Bedrock model
// id (bedrock/converse/…, bedrock/invoke/…) to choose between its APIs.
// sluice chats through Converse and embeds through InvokeModel whatever the
// prefix, so it only strips them.
var routePrefixes = []string{"converse/", "invoke/"}

// ModelID is the Bedrock model id of the model part of a deployment's
// litellm_params.model: a foundation model id, an inference profile id
// (us.anthropic.claude-…) or an ARN, without LiteLLM's route prefix.
func ModelID(model string) string {
	for _, p := range routePrefixes {
		if rest, ok := strings.CutPrefix(model, p); ok {
			return rest
		}
	}
	return model
}

// defaults are request parameters a deployment sets in litellm_params, as
// LiteLLM passes them on; a request's own value wins.
type defaults struct {
	inputType string
	truncate  string
	normalize *bool
}

func deploymentDefaults(d config.Deployment) (defaults, error) {
	var out defaults
	for _, name := range []string{"input_type", "truncate"} {
		v, ok := d.Params.Extra[name]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return out, fmt.Errorf("litellm_params.%s must be a string", name)
		}
		if name == "input_type" {
			out.inputType = s
		} else {
			out.truncate = s
		}
	}
	if v, ok := d.Params.Extra["normalize"]; ok && v != nil {
		b, ok := v.(bool)
		if !ok {
			return out, errors.New("litellm_params.normalize must be true or false")
		}
		out.normalize = &b
	}
	return out, nil
}

var (
	_ models.Embedder     = (*endpoint)(nil)
	_ models.Chatter      = (*endpoint)(nil)
	_ models.Batcher      = (*endpoint)(nil)
	_ models.BatchCleaner = (*endpoint)(nil)
	_ models.Messenger    = (*endpoint)(nil)
)

type endpoint struct {
	client    *http.Client
	auth      *Auth
	base      string
	model     string // as configured: names the family
	id        string // sent in the path
	family    family
	chat      chatFamily
	drop      providers.DropParams
	guardrail json.RawMessage // litellm_params.guardrailConfig; nil: none
	invokeURL string
	// converseURL and streamURL are Converse's and ConverseStream's.
	converseURL string
	streamURL   string
	defaults    defaults
	// controlBase is the control plane (batch inference); roleARN the
	// service role its jobs run as.
	controlBase string
	roleARN     string
	// answers keeps the buffers embedding answers are read into.
	answers embedbatch.Buffers
}

func (e *endpoint) APIBase() string { return e.base }

// Embed translates the request to the model family's InvokeModel calls.
func (e *endpoint) Embed(ctx context.Context, req *oai.EmbeddingRequest) (*models.Answer, error) {
	if e.family == familyUnknown {
		return nil, embedbatch.Unsupported("model", "Model '%s' is Bedrock model '%s', which sluice does not translate for embeddings: Amazon Titan Text Embeddings (v1, v2) and Cohere Embed are supported. For an ARN or inference profile, name the base model in litellm_params.model and the ARN in litellm_params.model_id.", req.Model, e.model)
	}
	texts, out, err := embedbatch.Prepare(req, Name, e.model)
	if err != nil {
		return nil, err
	}
	x, err := req.Extras("input_type", "normalize", "truncate")
	if err != nil {
		return nil, err
	}
	if e.family == familyCohere {
		return e.embedCohere(ctx, req, texts, x, out)
	}
	return e.embedTitan(ctx, req, texts, x, out)
}

// titanRequest is Titan Text Embeddings' InvokeModel body.
type titanRequest struct {
	InputText      string   `json:"inputText"`
	Dimensions     int      `json:"dimensions,omitempty"`
	Normalize      *bool    `json:"normalize,omitempty"`
	EmbeddingTypes []string `json:"embeddingTypes,omitempty"`
}

// embedTitan sends one InvokeModel call per text (Titan takes one), all
// concurrently within embedbatch's bound: never one after another.
func (e *endpoint) embedTitan(ctx context.Context, req *oai.EmbeddingRequest, texts []string, x oai.Extras, out embedbatch.Output) (*models.Answer, error) {
	v2 := e.family == familyTitanV2
	for _, name := range []string{"input_type", "truncate"} {
		if _, given := x[name]; given {
			return nil, embedbatch.Unsupported(name, "Model '%s' (Bedrock %s) does not take '%s'.", req.Model, e.model, name)
		}
	}
	normalize := e.defaults.normalize
	if v, given, err := x.Bool("normalize"); err != nil {
		return nil, err
	} else if given {
		normalize = &v
	}
	var tmpl titanRequest
	if v2 {
		if req.Dimensions > 0 && !slices.Contains(titanV2Dimensions, req.Dimensions) {
			return nil, embedbatch.Unsupported("dimensions", "Model '%s' (Bedrock %s) takes 'dimensions' of 256, 512 or 1024, not %d.", req.Model, e.model, req.Dimensions)
		}
		// Always float: Titan's "binary" type is one bit per dimension,
		// not OpenAI's base64 of float32, which sluice encodes itself.
		tmpl = titanRequest{Dimensions: req.Dimensions, Normalize: normalize, EmbeddingTypes: []string{"float"}}
	} else {
		switch {
		case req.Dimensions > 0:
			return nil, embedbatch.Unsupported("dimensions", "Model '%s' (Bedrock %s, Titan Text Embeddings v1) does not take 'dimensions': its vectors always have 1536.", req.Model, e.model)
		case x["normalize"] != nil:
			return nil, embedbatch.Unsupported("normalize", "Model '%s' (Bedrock %s, Titan Text Embeddings v1) does not take 'normalize'.", req.Model, e.model)
		}
	}
	return embedbatch.Run(ctx, texts, embedbatch.Limits{MaxInputs: 1}, out, embedbatch.Post(e.embedEndpoint(), func(b embedbatch.Batch) titanRequest {
		body := tmpl
		body.InputText = b.Texts[0]
		return body
	}, func(body []byte, h http.Header) (embedbatch.Result, error) {
		vec, tokens, known, err := parseTitan(body)
		if err != nil {
			return embedbatch.Result{}, err
		}
		if !known {
			tokens, known = headerTokens(h)
		}
		return embedbatch.Result{Vectors: []json.RawMessage{vec}, Tokens: tokens, TokensKnown: known}, nil
	}))
}

// parseTitan reads a Titan answer, {"embedding":[…],"inputTextTokenCount":N,
// "embeddingsByType":{"float":[…]}}: the vector (embedding; v2's copy in
// embeddingsByType.float is read only when embedding is absent) and, when
// present, the token count.
func parseTitan(body []byte) (vec json.RawMessage, tokens int64, known bool, err error) {
	var byType []byte
	err = jsonscan.Members(body, func(key, v []byte) error {
		switch string(key) {
		case "embedding":
			vec = v
		case "inputTextTokenCount":
			tokens, known = jsonscan.Count(v)
		case "embeddingsByType":
			byType = v
		}
		return nil
	})
	if err != nil {
		return nil, 0, false, fmt.Errorf("titan answer: %w", err)
	}
	if jsonscan.Null(vec) && !jsonscan.Null(byType) {
		err := jsonscan.Members(byType, func(key, v []byte) error {
			if string(key) == "float" {
				vec = v
			}
			return nil
		})
		if err != nil {
			return nil, 0, false, fmt.Errorf("titan embeddingsByType: %w", err)
		}
	}
	if jsonscan.Null(vec) {
		return nil, 0, false, errors.New("titan answer has no embedding")
	}
	if !known {
		tokens = 0
	}
	return vec, tokens, known, nil
}

// cohereRequest is Cohere Embed's InvokeModel body on Bedrock.
type cohereRequest struct {
	Texts           []string `json:"texts"`
	InputType       string   `json:"input_type"`
	EmbeddingTypes  []string `json:"embedding_types"`
	OutputDimension int      `json:"output_dimension,omitempty"`
	Truncate        string   `json:"truncate,omitempty"`
}

// embedCohere sends the texts in batches of up to 96, concurrently.
func (e *endpoint) embedCohere(ctx context.Context, req *oai.EmbeddingRequest, texts []string, x oai.Extras, out embedbatch.Output) (*models.Answer, error) {
	if _, given := x["normalize"]; given {
		return nil, embedbatch.Unsupported("normalize", "Model '%s' (Bedrock %s) does not take 'normalize'.", req.Model, e.model)
	}
	if req.Dimensions > 0 && !cohereDimensions(e.model) {
		return nil, embedbatch.Unsupported("dimensions", "Model '%s' (Bedrock %s) does not take 'dimensions': Cohere Embed v3 models have a fixed size; Cohere Embed v4 takes it.", req.Model, e.model)
	}
	tmpl := cohereRequest{EmbeddingTypes: []string{"float"}, OutputDimension: req.Dimensions}
	var err error
	if tmpl.InputType, tmpl.Truncate, err = embedbatch.CohereOptions(x, e.defaults.inputType, e.defaults.truncate, DefaultCohereInputType); err != nil {
		return nil, err
	}
	return embedbatch.Run(ctx, texts, embedbatch.Limits{MaxInputs: CohereMaxTexts}, out, embedbatch.Post(e.embedEndpoint(), func(b embedbatch.Batch) cohereRequest {
		body := tmpl
		body.Texts = b.Texts
		return body
	}, func(body []byte, h http.Header) (embedbatch.Result, error) {
		vecs, err := parseCohere(body)
		tokens, known := headerTokens(h)
		return embedbatch.Result{Vectors: vecs, Tokens: tokens, TokensKnown: known}, err
	}))
}

// parseCohere reads Cohere Embed's answer on Bedrock: embeddings is the list
// of float vectors ("embeddings_floats"), or, when embedding_types was sent,
// an object of lists by type ("embeddings_by_type") whose float list is used.
func parseCohere(body []byte) ([]json.RawMessage, error) {
	list, err := embedbatch.Path(body, "embeddings")
	if err == nil && list != nil && list[0] == '{' {
		list, err = embedbatch.Path(list, "float")
	}
	var vecs []json.RawMessage
	if err == nil {
		vecs, err = embedbatch.Vectors(list, "embedding")
	}
	if err != nil {
		return nil, fmt.Errorf("cohere answer: %w", err)
	}
	return vecs, nil
}

// headerTokens reads InvokeModel's input token count header.
func headerTokens(h http.Header) (int64, bool) {
	n, err := strconv.ParseInt(h.Get(InputTokenHeader), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// embedEndpoint is where the embed calls go: InvokeModel, SigV4-signed over
// the exact body.
func (e *endpoint) embedEndpoint() embedbatch.Endpoint {
	return embedbatch.Endpoint{Provider: Name, Client: e.client, URL: e.invokeURL, Buffers: &e.answers, Authorize: func(r *http.Request, body []byte) error {
		ctx := r.Context()
		err := e.auth.Sign(ctx, r, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bedrock invoke: %w", err)
		}
		u := api.Unavailable("The gateway has no usable AWS credentials for Bedrock model '%s' (%s).", e.model, e.auth.Source)
		u.Err = err
		return u
	}}
}
