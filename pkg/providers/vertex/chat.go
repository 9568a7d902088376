package vertex

import (
	"context"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Chat serves chat completions. One vertex_ai deployment kind holds two
// model families: Anthropic's Claude models (rawPredict with Anthropic's
// body: claude.go) and Google's Gemini models (generateContent:
// gemini_chat.go).
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	if isClaude(e.model) {
		return e.claudeChat(ctx, req)
	}
	return e.geminiChat(ctx, req)
}

// isClaude reports whether a Vertex AI model is one of Anthropic's.
func isClaude(model string) bool {
	m := strings.TrimPrefix(strings.ToLower(model), "publishers/anthropic/models/")
	return strings.HasPrefix(m, "claude")
}
