package vertex_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini/geminitest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// TestGeminiChatEndToEnd runs chat completions on a vertex_ai/gemini-…
// deployment through the gateway with the official openai-go client,
// streamed and not, on both storage backends: the service account's signed
// JWT goes to a local token endpoint, its access token to a fake Vertex AI.
func TestGeminiChatEndToEnd(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	up := providertest.NewUpstream(t, geminitest.Handler(func(r *http.Request) bool {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return ok && ts.Valid(token)
	}))
	cfg := fmt.Sprintf(`model_list:
  - model_name: vertex-flash
    litellm_params: {model: vertex_ai/gemini-2.5-flash, api_base: %s, vertex_project: acme-prod, vertex_location: us-east5, vertex_credentials: os.environ/VERTEX_SA}
`, up.URL)
	env := map[string]string{"VERTEX_SA": ts.ServiceAccountJSON("sa-project")}
	const path = "/v1beta1/projects/acme-prod/locations/us-east5/publishers/google/models/gemini-2.5-flash"
	chattest.Run(t, chattest.Options{Config: cfg, Env: env}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := openai.ChatCompletionNewParams{
			Model:    "vertex-flash",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.DeveloperMessage("Be brief."), openai.UserMessage("Hello!")},
		}
		t.Run("not streamed", func(t *testing.T) {
			got, err := h.Client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Message.Content != geminitest.Hello || got.Usage.TotalTokens != 20 || got.Choices[0].FinishReason != "stop" {
				t.Errorf("answer %s", got.RawJSON())
			}
			providertest.AssertRequest(t, up.Last(t), providertest.Want{
				Method: "POST", Path: path + ":generateContent",
				Body: `{"contents":[{"role":"user","parts":[{"text":"Hello!"}]}],"systemInstruction":{"parts":[{"text":"Be brief."}]}}`,
			})
			ev := h.Event(t)
			if ev.Model != "gemini-2.5-flash" || ev.ModelGroup != "vertex-flash" || ev.TotalTokens != 20 || ev.FinishReason != "stop" || ev.Status != "success" {
				t.Errorf("event %+v", ev)
			}
		})
		t.Run("streamed", func(t *testing.T) {
			p := params
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			p.ReasoningEffort = openai.ReasoningEffortLow
			s, err := h.Stream(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if s.Completion.Choices[0].Message.Content != geminitest.Hello || s.Completion.Usage.TotalTokens != 20 {
				t.Errorf("answer %+v", s.Completion)
			}
			providertest.AssertRequest(t, up.Last(t), providertest.Want{
				Path: path + ":streamGenerateContent", Query: "alt=sse",
				Body: `{"contents":[{"role":"user","parts":[{"text":"Hello!"}]}],"systemInstruction":{"parts":[{"text":"Be brief."}]},
					"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1024}}}`,
			})
			if ev := h.Event(t); !ev.Stream || ev.TotalTokens != 20 || ev.FinishReason != "stop" || ev.CompletionStartTime == 0 {
				t.Errorf("event %+v", ev)
			}
		})
	})
}
