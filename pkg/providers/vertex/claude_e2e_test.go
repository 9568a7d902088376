package vertex_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic/anthropictest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

func TestChatClaudeOnVertexEndToEnd(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	up := providertest.NewUpstream(t, anthropictest.Handler("", func(authorization string) bool {
		token, ok := strings.CutPrefix(authorization, "Bearer ")
		return ok && ts.Valid(token)
	}))
	cfg := fmt.Sprintf(`model_list:
  - model_name: claude
    litellm_params: {model: vertex_ai/claude-sonnet-4-5@20250929, api_base: %s, vertex_project: acme-prod, vertex_location: us-east5, vertex_credentials: os.environ/VERTEX_SA}
  - model_name: claude-overloaded
    litellm_params: {model: vertex_ai/%s, api_base: %s, vertex_project: acme-prod, vertex_location: us-east5, vertex_credentials: os.environ/VERTEX_SA}
`, up.URL, anthropictest.ModelOverloaded, up.URL)
	env := map[string]string{"VERTEX_SA": ts.ServiceAccountJSON("sa-project")}
	chattest.Run(t, chattest.Options{Config: cfg, Env: env}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := openai.ChatCompletionNewParams{Model: "claude", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}
		got, err := h.Client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != anthropictest.Text || got.Model != "claude-sonnet-4-5@20250929" || got.Usage.TotalTokens != 28 || got.Usage.PromptTokensDetails.CachedTokens != 5 {
			t.Errorf("answer %s", got.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Path: "/v1/projects/acme-prod/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			Body: `{"max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"Hello!"}]}],"anthropic_version":"vertex-2023-10-16"}`,
		})
		if ev := h.Event(t); ev.TotalTokens != 28 || ev.FinishReason != "stop" || ev.Model != "claude-sonnet-4-5@20250929" {
			t.Errorf("event %+v", ev)
		}

		p := params
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		last := s.Chunks[len(s.Chunks)-1]
		if s.Completion.Choices[0].Message.Content != anthropictest.Text || last.Usage.TotalTokens != 28 {
			t.Errorf("stream %+v, last chunk %s", s.Completion, last.RawJSON())
		}
		if path := up.Last(t).Path; !strings.HasSuffix(path, "claude-sonnet-4-5@20250929:streamRawPredict") {
			t.Errorf("path %s", path)
		}
		if ev := h.Event(t); !ev.Stream || ev.TotalTokens != 28 {
			t.Errorf("event %+v", ev)
		}

		p.Model = "claude-overloaded"
		if _, err := h.Stream(ctx, p); err == nil || !strings.Contains(err.Error(), "Overloaded") {
			t.Errorf("stream error %v", err)
		}
		if ev := h.Event(t); ev.Status != "failure" {
			t.Errorf("event %+v", ev)
		}
	})
}
