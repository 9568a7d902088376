package vertex

import (
	"context"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Chat serves chat completions on the deployment's model by its publisher:
// Anthropic's Claude models (claude-…) through the Messages API on Vertex
// AI (claudeChat).
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	if isClaude(e.model) {
		return e.claudeChat(ctx, req)
	}
	return nil, api.InvalidValue("model", "Model '%s' is Vertex AI's %s: sluice serves chat completions on Vertex AI for Claude models only.", req.Model, e.model)
}

// isClaude reports whether a Vertex AI model is one of Anthropic's.
func isClaude(model string) bool {
	m := strings.TrimPrefix(strings.ToLower(model), "publishers/anthropic/models/")
	return strings.HasPrefix(m, "claude")
}
