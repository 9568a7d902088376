package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini/geminitest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

const geminiKey = "AIza-e2e-key"

// TestChatEndToEnd runs chat completions on a gemini/ deployment through
// the gateway with the official openai-go client, streamed and not, on both
// storage backends.
func TestChatEndToEnd(t *testing.T) {
	up := providertest.NewUpstream(t, geminitest.Handler(func(r *http.Request) bool { return r.Header.Get("X-Goog-Api-Key") == geminiKey }))
	cfg := fmt.Sprintf(`model_list:
  - model_name: flash
    litellm_params: {model: gemini/gemini-2.5-flash, api_base: %s, api_key: os.environ/GEMINI_KEY}
`, up.URL)
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"GEMINI_KEY": geminiKey}}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := openai.ChatCompletionNewParams{
			Model:    "flash",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello!")},
		}
		geminiAnswers(t, ctx, h, up, params)
		geminiToolsAndRefusals(t, ctx, h, up, params)
	})
}

// geminiAnswers checks plain answers, streamed and not.
func geminiAnswers(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params openai.ChatCompletionNewParams) {
	t.Run("not streamed", func(t *testing.T) {
		got, err := h.Client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != geminitest.Hello || got.Choices[0].FinishReason != "stop" ||
			got.Usage.PromptTokens != 10 || got.Usage.CompletionTokens != 10 || got.Usage.TotalTokens != 20 ||
			got.Usage.CompletionTokensDetails.ReasoningTokens != 4 || got.Model != "gemini-2.5-flash" {
			t.Errorf("answer %s", got.RawJSON())
		}
		if !strings.Contains(got.RawJSON(), `"reasoning_content":"**Answering**\n"`) {
			t.Errorf("answer without its thoughts: %s", got.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Method: "POST", Path: "/v1beta/models/gemini-2.5-flash:generateContent",
			Header: map[string]string{"X-Goog-Api-Key": geminiKey, "Authorization": ""},
			Body:   `{"contents":[{"role":"user","parts":[{"text":"Hello!"}]}],"systemInstruction":{"parts":[{"text":"Be brief."}]}}`,
		})
		ev := h.Event(t)
		if ev.CallType != "acompletion" || ev.Model != "gemini-2.5-flash" || ev.ModelGroup != "flash" || ev.TotalTokens != 20 ||
			ev.FinishReason != "stop" || ev.Stream || ev.Status != "success" || ev.UsageEstimated ||
			!strings.Contains(string(ev.Response), geminitest.Hello) {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("streamed, usage asked", func(t *testing.T) {
		p := params
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if s.Completion.Choices[0].Message.Content != geminitest.Hello || s.Completion.Choices[0].FinishReason != "stop" {
			t.Errorf("answer %+v", s.Completion)
		}
		last := s.Chunks[len(s.Chunks)-1]
		if len(last.Choices) != 0 || last.Usage.TotalTokens != 20 || last.Usage.CompletionTokensDetails.ReasoningTokens != 4 {
			t.Errorf("last chunk %s", last.RawJSON())
		}
		if r := up.Last(t); r.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || r.Query != "alt=sse" {
			t.Errorf("streamed call to %s?%s", r.Path, r.Query)
		}
		ev := h.Event(t)
		if !ev.Stream || ev.TotalTokens != 20 || ev.FinishReason != "stop" || ev.UsageEstimated || ev.CompletionStartTime == 0 ||
			!strings.Contains(string(ev.Response), geminitest.Hello) {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("streamed, usage not asked", func(t *testing.T) {
		s, err := h.Stream(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Chunks {
			if len(c.Choices) == 0 {
				t.Errorf("the usage chunk reached a client that did not ask for it: %s", c.RawJSON())
			}
		}
		if ev := h.Event(t); ev.TotalTokens != 20 {
			t.Errorf("event tokens %d", ev.TotalTokens)
		}
	})
}

// geminiToolsAndRefusals checks a tool call round trip and what is refused, by Google or by sluice.
func geminiToolsAndRefusals(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params openai.ChatCompletionNewParams) {
	t.Run("a tool call and its result", func(t *testing.T) {
		p := params
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})}
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		h.Event(t)
		msg := s.Completion.Choices[0].Message
		if len(msg.ToolCalls) != 1 || s.Completion.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("answer %+v", s.Completion)
		}
		call := msg.ToolCalls[0]
		if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city": "Paris"}` ||
			!strings.HasPrefix(call.ID, "call_") || !strings.HasSuffix(call.ID, "__thought__"+geminitest.Signature) {
			t.Fatalf("tool call %+v", call)
		}
		p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage(`{"temp_c": 18}`, call.ID))
		got, err := h.Client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		h.Event(t)
		if got.Choices[0].Message.Content != geminitest.Weather {
			t.Errorf("answer %s", got.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{Body: `{
				"contents":[
					{"role":"user","parts":[{"text":"Hello!"}]},
					{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"` + geminitest.Signature + `"}]},
					{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp_c":18}}}]}],
				"systemInstruction":{"parts":[{"text":"Be brief."}]},
				"tools":[{"functionDeclarations":[{"name":"get_weather","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}}}}]}]}`})
	})
	t.Run("a blocked prompt", func(t *testing.T) {
		p := params
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(geminitest.Blocked)}
		got, err := h.Client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if c := got.Choices[0]; c.FinishReason != "content_filter" || c.Message.Refusal != "Gemini blocked the prompt (SAFETY)." || c.Message.Content != "" {
			t.Errorf("answer %s", got.RawJSON())
		}
		if ev := h.Event(t); ev.FinishReason != "content_filter" || ev.PromptTokens != 10 {
			t.Errorf("event %+v", ev)
		}
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.Completion.Choices[0]; c.FinishReason != "content_filter" || c.Message.Refusal != "Gemini blocked the prompt (SAFETY)." {
			t.Errorf("streamed answer %+v", s.Completion)
		}
		h.Event(t)
	})
	t.Run("refused by Google", func(t *testing.T) {
		p := params
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(geminitest.Invalid)}
		_, err := h.Client.Chat.Completions.New(ctx, p)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Message != "Request contains an invalid argument." || oe.Code != "INVALID_ARGUMENT" {
			t.Fatalf("error %v", err)
		}
		if ev := h.Event(t); ev.Status != "failure" {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("a parameter Gemini cannot honour", func(t *testing.T) {
		p := params
		p.Logprobs = openai.Bool(true)
		_, err := h.Client.Chat.Completions.New(ctx, p)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "logprobs" || oe.Code != "unsupported_parameter" {
			t.Fatalf("error %v", err)
		}
		h.Event(t)
	})
}
