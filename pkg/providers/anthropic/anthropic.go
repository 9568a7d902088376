// Package anthropic speaks Anthropic's Messages API. It holds the
// credential — an API key sent as x-api-key to https://api.anthropic.com, or
// to an api_base that replaces it — resolved in one place for the
// /anthropic passthrough and for anthropic/ deployments, and the chat
// completions translation: an OpenAI chat request into a Messages call
// (NewCall), and its answer or event stream back into OpenAI's shapes
// (Call.Answer, Call.Stream). Claude on Vertex AI (pkg/providers/vertex)
// uses the same translation with Vertex's body.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// Name is the litellm_params.model provider prefix (and passthrough
// provider) this package serves.
const Name = "anthropic"

// DefaultAPIBase is Anthropic's API.
const DefaultAPIBase = "https://api.anthropic.com"

// Environment fallbacks, LiteLLM's names.
const (
	KeyEnv  = "ANTHROPIC_API_KEY"
	BaseEnv = "ANTHROPIC_API_BASE"
)

// ErrNoKey is Resolve's error when no API key is configured anywhere.
var ErrNoKey = errors.New("anthropic: no API key configured")

// Settings are a credential as configured; each may be a secretsmanager/
// reference.
type Settings struct {
	APIKey  string
	APIBase string
}

// Credential is a resolved credential.
type Credential struct {
	APIKey string
	// APIBase is the base URL calls go to, without a trailing slash.
	APIBase string
}

// Resolve resolves s: the api_key, else ANTHROPIC_API_KEY (none is
// ErrNoKey); the api_base, else ANTHROPIC_API_BASE, else DefaultAPIBase,
// checked by providers.Base. Errors name settings, never secret values.
func Resolve(ctx context.Context, s Settings, resolve models.Resolver, getenv func(string) string) (Credential, error) {
	key, err := resolve.Setting(ctx, s.APIKey, getenv, KeyEnv)
	if err != nil {
		return Credential{}, fmt.Errorf("anthropic: resolve api_key: %w", err)
	}
	if key == "" {
		return Credential{}, ErrNoKey
	}
	base, err := resolve.Setting(ctx, s.APIBase, getenv, BaseEnv)
	if err != nil {
		return Credential{}, fmt.Errorf("anthropic: resolve api_base: %w", err)
	}
	if base == "" {
		base = DefaultAPIBase
	}
	if base, err = providers.Base(base); err != nil {
		return Credential{}, fmt.Errorf("anthropic: %w", err)
	}
	return Credential{APIKey: key, APIBase: base}, nil
}

// Authorize puts the credential on an outgoing request: the only
// credential Anthropic receives.
func (c Credential) Authorize(h http.Header) { h.Set("X-Api-Key", c.APIKey) }
