package passthrough

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
	"github.com/sluice-gateway/sluice/pkg/providers/vendors"
	"github.com/sluice-gateway/sluice/pkg/providers/vertex"
)

// Provider names a passthrough prefix. The values are the keys of the
// config's passthrough section and the provider names of model_list entries.
type Provider string

// The four passthrough providers.
const (
	Anthropic Provider = "anthropic"
	Gemini    Provider = "gemini"
	VertexAI  Provider = "vertex_ai"
	Bedrock   Provider = "bedrock"
)

// providerList lists every passthrough provider.
var providerList = []Provider{Anthropic, Gemini, VertexAI, Bedrock}

// prefixes are the route prefixes of each provider (first segment of the path).
var prefixes = map[Provider][]string{
	Anthropic: {"anthropic"},
	Gemini:    {"gemini"},
	VertexAI:  {"vertex-ai", "vertex_ai"},
	Bedrock:   {"bedrock"},
}

// sources are one provider's settings as configured, before secretsmanager/
// references are resolved: merged field by field from, in order, the
// passthrough section, the first model_list entry of that provider with
// use_in_pass_through: true, and default_vertex_config (Vertex AI). The
// environment fallbacks, and everything after — resolving, checking,
// building the credential — are models.Resolver's over the vendor table's
// key (Anthropic, Gemini), or vertex.Resolve and bedrock.Resolve: shared
// with model calls.
type sources struct {
	apiBase           string
	apiKey            string
	vertexProject     string
	vertexLocation    string
	vertexCredentials string
	aws               bedrock.Keys
	// where names where each credential came from, for messages.
	where string
}

// gather collects the settings of p from cfg.
func gather(cfg *config.Config, p Provider) sources {
	var s sources
	set := func(dst *string, v, where string) {
		if *dst == "" && strings.TrimSpace(v) != "" {
			*dst = strings.TrimSpace(v)
			if s.where == "" {
				s.where = where
			}
		}
	}
	setAWS := func(k bedrock.Keys, where string) {
		if s.aws.Region == "" {
			s.aws.Region = strings.TrimSpace(k.Region)
		}
		// The key pair (and its session token) come from one place, never mixed.
		if s.aws.AccessKeyID == "" && s.aws.SecretAccessKey == "" && (k.AccessKeyID != "" || k.SecretAccessKey != "") {
			s.aws.AccessKeyID, s.aws.SecretAccessKey, s.aws.SessionToken = k.AccessKeyID, k.SecretAccessKey, k.SessionToken
			if s.where == "" {
				s.where = where
			}
		}
	}
	if e, ok := cfg.Passthrough[string(p)]; ok {
		where := "passthrough." + string(p)
		set(&s.apiBase, e.APIBase, where)
		set(&s.apiKey, e.APIKey, where)
		set(&s.vertexProject, e.VertexProject, where)
		set(&s.vertexLocation, e.VertexLocation, where)
		set(&s.vertexCredentials, e.VertexCredentials, where)
		setAWS(bedrock.Keys{Region: e.AWSRegionName, AccessKeyID: e.AWSAccessKeyID, SecretAccessKey: e.AWSSecretAccessKey, SessionToken: e.AWSSessionToken}, where)
	}
	for i, d := range cfg.ModelList {
		if !d.Params.UseInPassThrough || Provider(d.Params.Provider()) != p {
			continue
		}
		where := fmt.Sprintf("model_list[%d] (%s, use_in_pass_through)", i, d.ModelName)
		set(&s.apiBase, d.Params.APIBase, where)
		set(&s.apiKey, d.Params.APIKey, where)
		set(&s.vertexProject, d.Params.VertexProject, where)
		set(&s.vertexLocation, d.Params.VertexLocation, where)
		set(&s.vertexCredentials, d.Params.VertexCredentials, where)
		setAWS(bedrock.Keys{Region: d.Params.AWSRegionName, AccessKeyID: d.Params.AWSAccessKeyID, SecretAccessKey: d.Params.AWSSecretAccessKey, SessionToken: d.Params.AWSSessionToken}, where)
		break
	}
	if v := cfg.DefaultVertexConfig; v != nil && p == VertexAI {
		set(&s.vertexProject, v.VertexProject, "default_vertex_config")
		set(&s.vertexLocation, v.VertexLocation, "default_vertex_config")
		set(&s.vertexCredentials, v.VertexCredentials, "default_vertex_config")
	}
	return s
}

// howToConfigure tells an operator how to give a prefix credentials.
var howToConfigure = map[Provider]string{
	Anthropic: "set passthrough.anthropic.api_key, a model_list entry anthropic/... with use_in_pass_through: true, or ANTHROPIC_API_KEY",
	Gemini:    "set passthrough.gemini.api_key, a model_list entry gemini/... with use_in_pass_through: true, or GEMINI_API_KEY",
	VertexAI:  "set passthrough.vertex_ai.vertex_credentials (a service-account JSON or a path to one), default_vertex_config, or GOOGLE_APPLICATION_CREDENTIALS",
	Bedrock:   "set passthrough.bedrock.aws_region_name with aws_access_key_id and aws_secret_access_key, or give the process AWS credentials (AWS_ACCESS_KEY_ID, a profile, a role)",
}

// upstream is a provider's resolved upstream: base URL and credential.
type upstream struct {
	provider Provider
	base     *url.URL // nil: chosen per request (Vertex by location, Bedrock by region and path)
	origin   string   // base's scheme://host: a call's api_base, made once
	join     urlBase  // base's parts, read once (Anthropic and Gemini have a base)
	// setKey puts an API-key credential (Anthropic, Gemini) on a request;
	// keyEchoes is its echo set.
	setKey    func(http.Header)
	keyEchoes *echoSet
	tokens    *google.TokenSource
	project   string // Vertex AI defaults
	location  string
	aws       *bedrock.Auth
}

// resolver resolves a provider's upstream once, on first use (resolution may
// read Secrets Manager or a credentials file), and keeps it. A failure is not
// kept: the next request tries again.
type resolver struct {
	provider Provider
	src      sources
	resolve  models.Resolver
	chain    bedrock.DefaultChain
	tokenOpt google.Options

	ready atomic.Pointer[upstream]
	mu    sync.Mutex
}

func (r *resolver) get(ctx context.Context) (*upstream, error) {
	if u := r.ready.Load(); u != nil {
		return u, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if u := r.ready.Load(); u != nil {
		return u, nil
	}
	u, err := r.build(ctx)
	if err != nil {
		return nil, err
	}
	r.ready.Store(u)
	return u, nil
}

// errNotConfigured marks a provider with no credential at all.
var errNotConfigured = errors.New("no credentials configured")

func (r *resolver) unavailable(err error) *api.Error {
	p := r.provider
	var e *api.Error
	switch {
	case errors.Is(err, errNotConfigured) || errors.Is(err, bedrock.ErrNoCredentials) && r.src.aws.AccessKeyID == "" && r.src.aws.Region == "":
		e = api.Unavailable("The /%s passthrough has no provider credentials configured: %s.", prefixes[p][0], howToConfigure[p])
	case errors.Is(err, bedrock.ErrNoCredentials):
		// These messages name settings, never secret values.
		e = api.Unavailable("The /%s passthrough has no usable AWS credentials: %v.", prefixes[p][0], err)
	case models.IsBadSetting(err):
		e = api.Unavailable("The /%s passthrough is not usable: %v.", prefixes[p][0], err)
	default:
		e = api.Unavailable("The /%s passthrough is not usable: its configuration could not be loaded. See the gateway log.", prefixes[p][0])
	}
	e.Err = err
	return e
}

func (r *resolver) build(ctx context.Context) (*upstream, error) {
	src := r.src
	u := &upstream{provider: r.provider}
	setBase := func(base string) error {
		var err error
		u.base, err = parseBase(base)
		return err
	}
	var err error
	switch r.provider {
	case Anthropic, Gemini:
		v, _ := vendors.Lookup(string(r.provider))
		var c models.Key
		if c, err = r.resolve.Key(ctx, *v.Key, src.apiKey, src.apiBase); err == nil {
			u.setKey, u.keyEchoes, err = c.Authorize, keyEchoes(c.Authorize), setBase(c.APIBase)
		} else if errors.Is(err, models.ErrNoKey) {
			err = errNotConfigured
		}
	case VertexAI:
		var c vertex.Credential
		s := vertex.Settings{Credentials: src.vertexCredentials, Project: src.vertexProject, Location: src.vertexLocation}
		newTokens := func(creds string) (*google.TokenSource, error) { return google.NewTokenSource(creds, r.tokenOpt) }
		if c, err = vertex.Resolve(ctx, s, vertex.PassthroughEnv(), r.resolve, newTokens); err == nil {
			u.tokens, u.project, u.location = c.Tokens, c.Project, c.Location
			err = r.optionalBase(ctx, u)
		} else if errors.Is(err, vertex.ErrNoCredentials) {
			err = errNotConfigured
		}
	case Bedrock:
		if u.aws, err = bedrock.Resolve(ctx, src.aws, r.resolve, r.chain); err == nil {
			err = r.optionalBase(ctx, u)
		}
	}
	if err != nil {
		return nil, r.unavailable(err)
	}
	if u.base != nil {
		u.origin = u.base.Scheme + "://" + u.base.Host
		u.join = newURLBase(u.base)
	}
	return u, nil
}

// optionalBase sets the api_base of a provider whose base is otherwise chosen
// per request (Vertex AI, Bedrock), when one is configured.
func (r *resolver) optionalBase(ctx context.Context, u *upstream) error {
	base, err := r.resolve.Value(ctx, r.src.apiBase)
	if err != nil {
		return fmt.Errorf("api_base: %w", err)
	}
	if base = strings.TrimSpace(base); base == "" {
		return nil
	}
	u.base, err = parseBase(base)
	return err
}

// parseBase checks an api_base: an absolute http(s) URL with a host, no
// credentials, query or fragment. A path is allowed and prefixes every
// forwarded path.
func parseBase(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil {
		return nil, fmt.Errorf("api_base %q: %w", s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("api_base %q: want an http:// or https:// URL", s)
	case u.Host == "":
		return nil, fmt.Errorf("api_base %q: no host", s)
	case u.User != nil:
		return nil, fmt.Errorf("api_base %q: credentials in the URL are not allowed", s)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("api_base %q: no query or fragment allowed", s)
	}
	if _, err := parseEndpointOrEmpty(u.EscapedPath()); err != nil {
		return nil, fmt.Errorf("api_base %q: bad path", s)
	}
	return u, nil
}

func parseEndpointOrEmpty(p string) (endpoint, error) {
	if p == "" || p == "/" {
		return endpoint{}, nil
	}
	return parseEndpoint(p)
}
