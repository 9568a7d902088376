package bedrock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// bedrockChat is a fake bedrock-runtime serving Converse and
// ConverseStream; the last user text picks the answer: "weather" a tool
// call, "refuse" Bedrock's 400, "break" a stream that fails midway,
// anything else a greeting.
func bedrockChat(t *testing.T) *providertest.Upstream {
	return converseUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		stream := strings.HasSuffix(r.URL.Path, "/converse-stream")
		var frames [][]byte
		switch {
		case bytes.Contains(body, []byte("refuse")):
			bedrockError(w, http.StatusBadRequest, "ValidationException", "Input is too long for requested model.")
			return
		case bytes.Contains(body, []byte("weather")) && !stream:
			answerJSON(`{"metrics":{"latencyMs":900},"output":{"message":{"content":[{"toolUse":{"input":{"city":"Paris"},"name":"get_weather","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":400,"outputTokens":50,"totalTokens":450}}`)(w, r)
			return
		case !stream:
			answerJSON(textAnswer)(w, r)
			return
		case bytes.Contains(body, []byte("weather")):
			frames = [][]byte{evStart, evToolStart(0, "tooluse_1", "get_weather"), evToolInput(0, `{"city": `), evToolInput(0, `"Paris"}`), evBlockStop(0), evMessageStop("tool_use"), evMetadata}
		case bytes.Contains(body, []byte("break")):
			frames = [][]byte{evStart, evText(0, "Hello"), esException("modelStreamErrorException", `{"message":"Model stream error","originalStatusCode":500}`)}
		default:
			frames = textStream()
		}
		w.Header().Set("Content-Type", bedrock.EventStreamType)
		for _, f := range frames {
			w.Write(f)
			w.(http.Flusher).Flush()
		}
	})
}

func TestChatBedrockEndToEnd(t *testing.T) {
	up := bedrockChat(t)
	cfg := fmt.Sprintf(`model_list:
  - model_name: claude
    litellm_params: {model: bedrock/%s, api_base: %s, aws_region_name: us-east-1, aws_access_key_id: %s, aws_secret_access_key: os.environ/BEDROCK_SECRET}
`, claude, up.URL, testKeyID)
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"BEDROCK_SECRET": testSecret}}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := openai.ChatCompletionNewParams{
			Model:    "claude",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello!")},
		}
		weather := params
		weather.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
		weather.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})}

		bedrockAnswers(t, ctx, h, up, params, weather)
		bedrockRefusals(t, ctx, h, up, params, weather)
	})
}

// bedrockAnswers checks answers and tool calls, streamed and not.
func bedrockAnswers(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params, weather openai.ChatCompletionNewParams) {
	t.Run("not streamed", func(t *testing.T) {
		got, err := h.Client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != "Hello! How can I help you today?" || got.Usage.TotalTokens != 23 || got.Choices[0].FinishReason != "stop" || got.Model != claude {
			t.Errorf("answer %s", got.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Path: claudePath,
			Body: `{"messages":[{"role":"user","content":[{"text":"Hello!"}]}],"system":[{"text":"Be brief."}]}`,
		})
		ev := h.Event(t)
		if ev.Model != claude || ev.ModelGroup != "claude" || ev.TotalTokens != 23 || ev.PromptTokens != 12 || ev.FinishReason != "stop" ||
			ev.Status != "success" || ev.UsageEstimated || !strings.Contains(string(ev.Response), "How can I help") {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("a tool call", func(t *testing.T) {
		got, err := h.Client.Chat.Completions.New(ctx, weather)
		if err != nil {
			t.Fatal(err)
		}
		c := got.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" ||
			c.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || c.Message.ToolCalls[0].ID != "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q" {
			t.Errorf("answer %s", got.RawJSON())
		}
		if ev := h.Event(t); ev.FinishReason != "tool_calls" || ev.TotalTokens != 450 {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("streamed, usage not asked", func(t *testing.T) {
		s, err := h.Stream(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if s.Completion.Choices[0].Message.Content != "Hello! How can I help?" || s.Completion.Choices[0].FinishReason != "stop" {
			t.Errorf("answer %+v", s.Completion)
		}
		for _, c := range s.Chunks {
			if len(c.Choices) == 0 {
				t.Errorf("the usage chunk reached a client that did not ask for it: %s", c.RawJSON())
			}
		}
		if ev := h.Event(t); !ev.Stream || ev.TotalTokens != 21 || ev.FinishReason != "stop" || ev.UsageEstimated || ev.CompletionStartTime == 0 {
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
		if last := s.Chunks[len(s.Chunks)-1]; len(last.Choices) != 0 || last.Usage.TotalTokens != 21 || last.Usage.PromptTokens != 12 {
			t.Errorf("last chunk %s", last.RawJSON())
		}
		if ev := h.Event(t); ev.TotalTokens != 21 {
			t.Errorf("event tokens %d", ev.TotalTokens)
		}
	})
	t.Run("a streamed tool call", func(t *testing.T) {
		s, err := h.Stream(ctx, weather)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Completion.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" ||
			c.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || c.Message.ToolCalls[0].ID != "tooluse_1" {
			t.Errorf("answer %+v", c)
		}
		if ev := h.Event(t); ev.FinishReason != "tool_calls" {
			t.Errorf("event %+v", ev)
		}
	})
}

// bedrockRefusals checks what is refused, by Bedrock or by sluice, and a stream that fails.
func bedrockRefusals(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params, weather openai.ChatCompletionNewParams) {
	t.Run("Bedrock refuses", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			r := h.Post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":"claude","messages":[{"role":"user","content":"refuse"}],"stream":%v}`, stream))
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			if json.Unmarshal(r.Body, &e) != nil || r.Status != 400 || e.Error.Message != "Input is too long for requested model." ||
				e.Error.Type != "invalid_request_error" || e.Error.Code != "ValidationException" {
				t.Errorf("stream %v: %d %s", stream, r.Status, r.Body)
			}
			if ev := h.Event(t); ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != "400" {
				t.Errorf("event %+v", ev)
			}
		}
	})
	t.Run("sluice refuses an image URL", func(t *testing.T) {
		before := up.Count()
		r := h.Post(t, "/v1/chat/completions", `{"model":"claude","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/latest/meta-data/"}}]}]}`)
		if r.Status != 400 || !bytes.Contains(r.Body, []byte(`"param":"messages[0].content[0].image_url.url"`)) || up.Count() != before {
			t.Errorf("%d %s", r.Status, r.Body)
		}
		h.Event(t)
	})
	t.Run("a stream that fails midway ends with an error event", func(t *testing.T) {
		r := h.Post(t, "/v1/chat/completions", `{"model":"claude","stream":true,"messages":[{"role":"user","content":"break"}]}`)
		data := providertest.Data(t, r.Body)
		if r.Status != 200 || len(data) != 3 || !strings.Contains(data[2], `"error":{`) || !strings.Contains(data[2], "modelStreamErrorException") {
			t.Fatalf("%d %q", r.Status, data)
		}
		if ev := h.Event(t); ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != "502" {
			t.Errorf("event %+v", ev)
		}
		p := params
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("break")}
		s, err := h.Stream(ctx, p)
		if err == nil || !strings.Contains(err.Error(), "Model stream error") || len(s.Chunks) != 2 {
			t.Errorf("openai-go read %d chunks and %v", len(s.Chunks), err)
		}
		h.Event(t)
	})
}
