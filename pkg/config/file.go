package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Config is the YAML file: LiteLLM's config.yaml form, plus sluice's own
// sections. Sections sluice does not use are kept as Warnings.
type Config struct {
	ModelList           []Deployment                `yaml:"model_list"`
	GeneralSettings     GeneralSettings             `yaml:"general_settings"`
	RouterSettings      RouterSettings              `yaml:"router_settings"`
	Passthrough         map[string]PassthroughEntry `yaml:"passthrough"`
	DefaultVertexConfig *VertexConfig               `yaml:"default_vertex_config"`
	CallbackSettings    CallbackSettings            `yaml:"callback_settings"`
	LiteLLMSettings     map[string]any              `yaml:"litellm_settings"`
	// EnvironmentVariables is LiteLLM's environment_variables: values that
	// stand in for the process environment where sluice reads LiteLLM's
	// variables (the gateway-wide logging callbacks' credentials); a value
	// may be a secretsmanager/ reference.
	EnvironmentVariables map[string]string `yaml:"environment_variables"`

	// Warnings lists what was ignored or could not be resolved; main logs each once.
	Warnings []string `yaml:"-"`
	secrets  *secretCache
	// refs are the secretsmanager/ references, for CheckDeployedSecrets.
	refs []secretRef
}

// Deployment is one model_list entry: a public model name served by one
// provider deployment.
type Deployment struct {
	ModelName string    `yaml:"model_name"`
	Params    Params    `yaml:"litellm_params"`
	ModelInfo ModelInfo `yaml:"model_info"`
}

// ID is the id of the deployment at index i of model_list: its
// model_info.id, else model_name#i.
func (d Deployment) ID(i int) string {
	if d.ModelInfo.ID != "" {
		return d.ModelInfo.ID
	}
	return fmt.Sprintf("%s#%d", d.ModelName, i)
}

// Params are a deployment's litellm_params. Fields sluice does not know are
// kept in Extra and passed to providers that understand them; its prices
// (LiteLLM's input_cost_per_token, ...) are there too, read by pkg/spend.
type Params struct {
	Model              string  `yaml:"model"` // provider/name
	APIKey             string  `yaml:"api_key"`
	APIBase            string  `yaml:"api_base"`
	APIVersion         string  `yaml:"api_version"`
	RPM                int64   `yaml:"rpm"`
	TPM                int64   `yaml:"tpm"`
	Timeout            float64 `yaml:"timeout"` // seconds
	MaxRetries         *int    `yaml:"max_retries"`
	Weight             float64 `yaml:"weight"`
	AWSRegionName      string  `yaml:"aws_region_name"`
	AWSAccessKeyID     string  `yaml:"aws_access_key_id"`
	AWSSecretAccessKey string  `yaml:"aws_secret_access_key"`
	AWSSessionToken    string  `yaml:"aws_session_token"`
	VertexProject      string  `yaml:"vertex_project"`
	VertexLocation     string  `yaml:"vertex_location"`
	VertexCredentials  string  `yaml:"vertex_credentials"`
	UseInPassThrough   bool    `yaml:"use_in_pass_through"`
	CustomLLMProvider  string  `yaml:"custom_llm_provider"`
	// MockResponse is LiteLLM's mock_response (a text or an embedding
	// vector): the deployment's calls are answered from it, never sent to
	// its provider.
	MockResponse *Mock `yaml:"mock_response"`
	// DropParams is LiteLLM's drop_params: request parameters the provider
	// cannot honour are dropped instead of refused. Unset here, it is
	// litellm_settings.drop_params (Parse fills it in).
	DropParams *bool          `yaml:"drop_params"`
	Extra      map[string]any `yaml:",inline"`
}

// Drops reports whether the deployment drops parameters its provider
// cannot honour (drop_params, its own or litellm_settings').
func (p Params) Drops() bool { return p.DropParams != nil && *p.DropParams }

// Provider is the provider part of Model ("openai" in "openai/gpt-4o"), or
// CustomLLMProvider when set.
func (p Params) Provider() string {
	if p.CustomLLMProvider != "" {
		return p.CustomLLMProvider
	}
	provider, _, ok := strings.Cut(p.Model, "/")
	if !ok {
		return ""
	}
	return provider
}

// ProviderModel is the model name the provider knows ("gpt-4o" in "openai/gpt-4o").
func (p Params) ProviderModel() string {
	if p.CustomLLMProvider != "" && !strings.HasPrefix(p.Model, p.CustomLLMProvider+"/") {
		return p.Model
	}
	_, name, ok := strings.Cut(p.Model, "/")
	if !ok {
		return p.Model
	}
	return name
}

// ModelInfo is a deployment's model_info.
type ModelInfo struct {
	ID    string         `yaml:"id"`
	Mode  string         `yaml:"mode"` // embedding, moderation, chat, ...
	Extra map[string]any `yaml:",inline"`
}

// GeneralSettings is general_settings.
type GeneralSettings struct {
	MasterKey string         `yaml:"master_key"`
	Extra     map[string]any `yaml:",inline"`
}

// RouterSettings is router_settings.
type RouterSettings struct {
	// Fallbacks lists, per model name, the model names to try when it fails.
	Fallbacks       []map[string][]string `yaml:"fallbacks"`
	NumRetries      *int                  `yaml:"num_retries"`
	Timeout         float64               `yaml:"timeout"`
	CooldownTime    float64               `yaml:"cooldown_time"` // seconds
	AllowedFails    int                   `yaml:"allowed_fails"`
	RetryAfter      float64               `yaml:"retry_after"`
	RoutingStrategy string                `yaml:"routing_strategy"`
	Extra           map[string]any        `yaml:",inline"`
}

// PassthroughEntry configures one passthrough prefix (anthropic, gemini,
// vertex_ai, bedrock).
type PassthroughEntry struct {
	APIBase            string `yaml:"api_base"`
	APIKey             string `yaml:"api_key"`
	VertexProject      string `yaml:"vertex_project"`
	VertexLocation     string `yaml:"vertex_location"`
	VertexCredentials  string `yaml:"vertex_credentials"`
	AWSRegionName      string `yaml:"aws_region_name"`
	AWSAccessKeyID     string `yaml:"aws_access_key_id"`
	AWSSecretAccessKey string `yaml:"aws_secret_access_key"`
	AWSSessionToken    string `yaml:"aws_session_token"`
}

// VertexConfig is LiteLLM's default_vertex_config.
type VertexConfig struct {
	VertexProject     string `yaml:"vertex_project"`
	VertexLocation    string `yaml:"vertex_location"`
	VertexCredentials string `yaml:"vertex_credentials"`
}

// CallbackSettings is callback_settings.
type CallbackSettings struct {
	// AllowHosts lists the logging destinations a team may point a callback
	// at although they are loopback, link-local, private or unspecified
	// addresses (refused otherwise), and that may be reached over plain
	// http. Each entry is a host name (matched against the URL's host,
	// case-insensitively), an IP address, or a CIDR prefix (matched against
	// the address actually dialled).
	AllowHosts []string `yaml:"allow_hosts"`
}

// validate checks each allow_hosts entry is a host name, an IP or a CIDR
// prefix: a typo must not silently allow nothing, or everything.
func (c CallbackSettings) validate() []error {
	var errs []error
	for i, h := range c.AllowHosts {
		if _, err := netip.ParsePrefix(h); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(h); err == nil {
			continue
		}
		if !isHostName(h) {
			errs = append(errs, fmt.Errorf("callback_settings.allow_hosts[%d] %q: want a host name, an IP address or a CIDR prefix (no scheme, port or path)", i, h))
		}
	}
	return errs
}

// isHostName reports whether s is a DNS name: dot-separated labels of
// letters, digits and hyphens, each 1 to 63 characters, not starting or
// ending with a hyphen, 253 characters at most.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// knownSections are the top-level sections sluice reads; others are warned about.
var knownSections = map[string]bool{
	"model_list": true, "general_settings": true, "router_settings": true, "passthrough": true,
	"default_vertex_config": true, "callback_settings": true, "litellm_settings": true,
	"environment_variables": true,
}

// Sources fetch the raw document for locations that are not plain paths
// (s3://, ssm:). A nil Source means only paths are accepted.
type Source func(ctx context.Context, location string) ([]byte, error)

// Secrets resolves secretsmanager/NAME[#json-key] references.
type Secrets interface {
	Secret(ctx context.Context, name, jsonKey string) (string, error)
}

// Load reads the config at location. Plain paths are read from disk; other
// schemes go through fetch. An empty location gives an empty config.
func Load(ctx context.Context, location string, fetch Source, getenv func(string) string) (*Config, error) {
	if location == "" {
		return Parse(nil, getenv)
	}
	var (
		data []byte
		err  error
	)
	if strings.HasPrefix(location, "s3://") || strings.HasPrefix(location, "ssm:") {
		if fetch == nil {
			return nil, fmt.Errorf("config %s: this backend cannot read %s locations; use a file path or SLUICE_BACKEND=aws", location, strings.SplitN(location, ":", 2)[0])
		}
		data, err = fetch(ctx, location)
	} else {
		data, err = os.ReadFile(location)
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", location, err)
	}
	cfg, err := Parse(data, getenv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", location, err)
	}
	return cfg, nil
}

// Parse decodes a config document. os.environ/VAR references anywhere are
// replaced by the variable's value (an unset one is a warning, and the value
// is empty); secretsmanager/ references are kept and resolved on use.
func Parse(data []byte, getenv func(string) string) (*Config, error) {
	cfg := &Config{secrets: &secretCache{values: map[string]string{}}}
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if len(root.Content) == 0 {
		return cfg, nil
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, errors.New("the config must be a YAML mapping of sections (model_list, general_settings, ...)")
	}
	var unknown []string
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if name := doc.Content[i].Value; !knownSections[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("config section %q is not used by sluice; ignored", name))
	}
	cfg.Warnings = append(cfg.Warnings, resolveEnv(doc, "", getenv)...)
	cfg.refs = secretRefs(doc, "")
	if err := doc.Decode(cfg); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	return cfg, nil
}

// applyDefaults fills in the deployment settings LiteLLM takes from
// litellm_settings when a deployment leaves them unset: drop_params.
func (c *Config) applyDefaults() {
	drop, ok := c.LiteLLMSettings["drop_params"].(bool)
	if !ok {
		return
	}
	for i := range c.ModelList {
		if c.ModelList[i].Params.DropParams == nil {
			c.ModelList[i].Params.DropParams = &drop
		}
	}
}

const (
	envPrefix    = "os.environ/"
	secretPrefix = "secretsmanager/"
)

// resolveEnv replaces os.environ/VAR scalars in place and returns warnings for
// unset variables, naming where they were used.
func resolveEnv(n *yaml.Node, path string, getenv func(string) string) []string {
	var warnings []string
	switch n.Kind {
	case yaml.ScalarNode:
		if name, ok := strings.CutPrefix(n.Value, envPrefix); ok {
			v := getenv(name)
			if v == "" {
				warnings = append(warnings, fmt.Sprintf("%s: environment variable %s is not set", path, name))
			}
			n.Value, n.Tag, n.Style = v, "!!str", yaml.DoubleQuotedStyle
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			warnings = append(warnings, resolveEnv(n.Content[i+1], joinPath(path, n.Content[i].Value), getenv)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			warnings = append(warnings, resolveEnv(c, fmt.Sprintf("%s[%d]", path, i), getenv)...)
		}
	}
	return warnings
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (c *Config) validate() error {
	var errs []error
	for i, d := range c.ModelList {
		where := fmt.Sprintf("model_list[%d]", i)
		if d.ModelName != "" {
			where += fmt.Sprintf(" (%s)", d.ModelName)
		}
		switch {
		case d.ModelName == "":
			errs = append(errs, fmt.Errorf("%s: model_name is required", where))
		case d.Params.Model == "":
			errs = append(errs, fmt.Errorf("%s: litellm_params.model is required (provider/model, e.g. openai/gpt-4o)", where))
		case d.Params.Provider() == "" && d.Params.Model != "*":
			errs = append(errs, fmt.Errorf("%s: litellm_params.model %q must name its provider (provider/model, e.g. openai/%s)", where, d.Params.Model, d.Params.Model))
		}
		if d.Params.RPM < 0 || d.Params.TPM < 0 || d.Params.Timeout < 0 {
			errs = append(errs, fmt.Errorf("%s: rpm, tpm and timeout must not be negative", where))
		}
	}
	for name := range c.Passthrough {
		switch name {
		case "anthropic", "gemini", "vertex_ai", "bedrock":
		default:
			errs = append(errs, fmt.Errorf("passthrough.%s: unknown prefix (want anthropic, gemini, vertex_ai or bedrock)", name))
		}
	}
	errs = append(errs, c.CallbackSettings.validate()...)
	return errors.Join(errs...)
}

// Resolve returns value with a secretsmanager/NAME[#json-key] reference
// resolved through secrets (once per process; later calls hit a cache).
// Other values are returned as they are.
func (c *Config) Resolve(ctx context.Context, secrets Secrets, value string) (string, error) {
	ref, ok := strings.CutPrefix(value, secretPrefix)
	if !ok {
		return value, nil
	}
	if secrets == nil {
		return "", fmt.Errorf("%s: no secret store is configured (Secrets Manager needs SLUICE_BACKEND=aws)", value)
	}
	return c.secrets.get(ctx, secrets, ref)
}

// secretCache keeps resolved secrets for the life of the process.
type secretCache struct {
	mu     sync.Mutex
	values map[string]string
}

func (s *secretCache) get(ctx context.Context, secrets Secrets, ref string) (string, error) {
	s.mu.Lock()
	v, ok := s.values[ref]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	name, key, _ := strings.Cut(ref, "#")
	v, err := secrets.Secret(ctx, name, key)
	if err != nil {
		return "", fmt.Errorf("resolve secret %s: %w", name, err)
	}
	s.mu.Lock()
	s.values[ref] = v
	s.mu.Unlock()
	return v, nil
}
