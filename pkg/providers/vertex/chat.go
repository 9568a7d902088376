package vertex

import (
	"context"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Chat serves chat completions. One vertex_ai deployment kind holds two
// model families: Anthropic's Claude models (rawPredict with Anthropic's
// body) and Google's Gemini models (generateContent: gemini_chat.go).
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	if strings.HasPrefix(strings.ToLower(e.model), "claude") {
		return nil, api.InvalidValue("model", "Model '%s': chat completions on Anthropic models on Vertex AI are not built yet.", req.Model)
	}
	return e.geminiChat(ctx, req)
}
