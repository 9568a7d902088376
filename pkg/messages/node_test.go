package messages_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// TestAnthropicNodeClient: the official @anthropic-ai/sdk Node client (the
// version testdata/node/package-lock.json pins; `make node-deps` installs
// it) creates messages and streams on an OpenAI-compatible, a Gemini, a
// Bedrock Converse and an Anthropic deployment — a greeting, an image, a
// tool call, its result and the final answer — and gets its error classes
// for 401, 404, 429 and 400, streamed and not; count_tokens answers.
func TestAnthropicNodeClient(t *testing.T) {
	dir := gatewaytest.NodeClient(t, filepath.Join("testdata", "node"))
	w := newWorld(t)
	chattest.Run(t, chattest.Options{Config: w.cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		gatewaytest.RunNode(ctx, t, dir, "messages.mjs", "SLUICE_URL="+h.Gateway.URL, "SLUICE_KEY="+h.Key,
			`SLUICE_MODELS=["openai-model","gemini-model","bedrock-model","claude-model","bedrock-claude"]`, "SLUICE_LIMITED_MODEL=limited")
	})
}
