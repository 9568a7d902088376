// Package anthropic speaks Anthropic's Messages API. It holds the
// credential as data (Key), its usage decoder and error parser, and the chat
// completions translation: an OpenAI chat request into a Messages call
// (NewCall), and its answer or event stream back into OpenAI's shapes
// (Call.Answer, Call.Stream). Claude on Vertex AI (pkg/providers/vertex)
// uses the same translation with Vertex's body.
package anthropic

import (
	"github.com/sluice-gateway/sluice/pkg/models"
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

// Key is Anthropic's credential: an API key sent as x-api-key to
// DefaultAPIBase, or to an api_base that replaces it. models.Resolver.Key
// resolves it for anthropic/ deployments and the /anthropic passthrough.
var Key = models.KeySpec{
	Vendor: Name, KeyEnv: []string{KeyEnv}, BaseEnv: []string{BaseEnv},
	DefaultBase: DefaultAPIBase, Header: "X-Api-Key",
	Model: models.ModelForm{What: "Anthropic model", Form: "anthropic/<model>"},
}

// Credential is a resolved Anthropic credential.
type Credential = models.Key
