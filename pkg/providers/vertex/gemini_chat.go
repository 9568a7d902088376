package vertex

import (
	"context"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini"
)

// geminiVersion is the API version of Gemini calls: v1beta1, the version
// the Google Gen AI SDKs call (it takes JSON Schema as it is, in
// parametersJsonSchema and responseJsonSchema).
const geminiVersion = "/v1beta1"

// geminiChat serves a Gemini model's chat completions through Vertex AI's
// generateContent, with the Gemini API's translator:
//
//	POST {base}/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
//	POST {base}/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{model}:streamGenerateContent?alt=sse
//
// A model named by a number is a tuned model's endpoint
// (…/locations/{l}/endpoints/{id}:generateContent), as in LiteLLM.
func (e *endpoint) geminiChat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	c := gemini.ChatEndpoint{
		Provider: Name, Model: e.model, URL: e.geminiURL(), Dialect: gemini.VertexAI,
		Drop: e.drop, Client: e.client, Authorize: e.authorize,
	}
	return c.Chat(ctx, req)
}

// geminiURL is the model's resource URL, to which generateContent's method
// is appended.
func (e *endpoint) geminiURL() string {
	loc := e.base + geminiVersion + "/projects/" + url.PathEscape(e.project) + "/locations/" + url.PathEscape(e.location)
	if tuned(e.model) {
		return loc + "/endpoints/" + e.model
	}
	return loc + "/publishers/google/models/" + url.PathEscape(e.model)
}

// tuned reports whether model is a tuned model's endpoint id (all digits).
func tuned(model string) bool {
	return model != "" && strings.Trim(model, "0123456789") == ""
}
