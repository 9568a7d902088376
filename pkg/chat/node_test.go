package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic/anthropictest"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini/geminitest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// nodeCase is one model the Node script calls (testdata/node/chat.mjs):
// the text it answers and the usage it reports (nil: estimated).
type nodeCase struct {
	Model string     `json:"model"`
	Text  string     `json:"text"`
	Usage *nodeUsage `json:"usage"`
}

type nodeUsage struct {
	Prompt     int `json:"prompt_tokens"`
	Completion int `json:"completion_tokens"`
}

// TestOpenAINodeClient: the official openai Node client (the version
// testdata/node/package-lock.json pins; `make node-deps` installs it) calls
// chat completions on both backends, on an OpenAI deployment (forwarded),
// Anthropic and Gemini ones (translated) and a mock: answers, streams with
// and without the usage chunk (raw and through the client's accumulating
// helper), tool calls whole and streamed, errors before a stream and an
// error event in the middle of one.
func TestOpenAINodeClient(t *testing.T) {
	dir := gatewaytest.NodeClient(t, filepath.Join("testdata", "node"))
	oa := providertest.NewUpstream(t, openAIChat())
	an := providertest.NewUpstream(t, anthropictest.Handler(upstreamKey, nil))
	ge := providertest.NewUpstream(t, geminitest.Handler(func(r *http.Request) bool { return r.Header.Get("X-Goog-Api-Key") == upstreamKey }))
	cfg := fmt.Sprintf(`model_list:
  - model_name: gpt
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
  - model_name: claude
    litellm_params: {model: anthropic/claude-sonnet-4-5, api_base: %[2]s, api_key: os.environ/UPSTREAM_KEY}
  - model_name: claude-tools
    litellm_params: {model: anthropic/%[4]s, api_base: %[2]s, api_key: os.environ/UPSTREAM_KEY}
  - model_name: claude-overloaded
    litellm_params: {model: anthropic/%[5]s, api_base: %[2]s, api_key: os.environ/UPSTREAM_KEY}
  - model_name: gemini
    litellm_params: {model: gemini/gemini-2.5-flash, api_base: %[3]s, api_key: os.environ/UPSTREAM_KEY}
  - model_name: mock
    litellm_params: {model: openai/gpt-4o, mock_response: "A mock answer."}
`, oa.URL, an.URL, ge.URL, anthropictest.ModelTools, anthropictest.ModelOverloaded)
	cases, err := json.Marshal([]nodeCase{
		{"gpt", "Hello! How can I help?", &nodeUsage{19, 7}},
		{"claude", anthropictest.Text, &nodeUsage{anthropictest.InputTokens + anthropictest.CacheRead + anthropictest.CacheCreation, anthropictest.OutputTokens}},
		{"gemini", geminitest.Hello, &nodeUsage{10, 10}},
		{"mock", "A mock answer.", nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		gatewaytest.RunNode(ctx, t, dir, "chat.mjs", "SLUICE_URL="+h.Gateway.URL, "SLUICE_KEY="+h.Key, "SLUICE_CASES="+string(cases),
			"SLUICE_TOOL_MODEL=claude-tools", "SLUICE_BROKEN_MODEL=claude-overloaded")
	})
}
