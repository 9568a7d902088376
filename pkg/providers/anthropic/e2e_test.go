package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic/anthropictest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

const upstreamKey = "sk-ant-upstream"

// Usage every answer of the fake reports, as LiteLLM counts Anthropic's:
// the prompt is the input plus the cache reads and writes.
const (
	promptTokens = anthropictest.InputTokens + anthropictest.CacheRead + anthropictest.CacheCreation
	totalTokens  = promptTokens + anthropictest.OutputTokens
)

func TestChatAnthropicEndToEnd(t *testing.T) {
	up := providertest.NewUpstream(t, anthropictest.Handler(upstreamKey, nil))
	var cfg strings.Builder
	cfg.WriteString("model_list:\n")
	for _, m := range []string{"claude-sonnet-4-5", anthropictest.ModelTools, anthropictest.ModelThinking, anthropictest.ModelJSON, anthropictest.ModelRefuse, anthropictest.ModelOverloaded} {
		fmt.Fprintf(&cfg, "  - model_name: %s\n    litellm_params: {model: anthropic/%s, api_base: %s, api_key: os.environ/ANTHROPIC_KEY}\n", m, m, up.URL)
	}
	chattest.Run(t, chattest.Options{Config: cfg.String(), Env: map[string]string{"ANTHROPIC_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := func(model string) openai.ChatCompletionNewParams {
			return openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello!")},
			}
		}
		anthropicAnswers(t, ctx, h, up, params)
		anthropicToolsAndThinking(t, ctx, h, up, params)
		anthropicRefusals(t, ctx, h, up, params)
	})
}

// anthropicAnswers checks plain answers, streamed and not.
func anthropicAnswers(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params func(string) openai.ChatCompletionNewParams) {
	t.Run("not streamed", func(t *testing.T) {
		p := params("claude-sonnet-4-5")
		p.MaxCompletionTokens = openai.Int(100)
		p.Temperature = openai.Float(0.5)
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}}
		p.User = openai.String("user-42")
		got, err := h.Client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		u := got.Usage
		if got.Choices[0].Message.Content != anthropictest.Text || got.Choices[0].FinishReason != "stop" || got.Model != "claude-sonnet-4-5" ||
			u.PromptTokens != promptTokens || u.TotalTokens != totalTokens || u.PromptTokensDetails.CachedTokens != anthropictest.CacheRead {
			t.Errorf("answer %s", got.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Method: "POST", Path: "/v1/messages",
			Header: map[string]string{"X-Api-Key": upstreamKey, "Anthropic-Version": "2023-06-01", "Authorization": ""},
			Body: `{"model":"claude-sonnet-4-5","max_tokens":100,"system":[{"type":"text","text":"Be brief."}],
					"messages":[{"role":"user","content":[{"type":"text","text":"Hello!"}]}],
					"temperature":0.5,"stop_sequences":["END"],"metadata":{"user_id":"user-42"}}`,
		})
		ev := h.Event(t)
		if ev.CallType != "acompletion" || ev.Model != "claude-sonnet-4-5" || ev.ModelGroup != "claude-sonnet-4-5" || ev.PromptTokens != promptTokens ||
			ev.TotalTokens != totalTokens || ev.FinishReason != "stop" || ev.Status != "success" || ev.UsageEstimated || !strings.Contains(string(ev.Response), anthropictest.Text) {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("streamed, usage asked", func(t *testing.T) {
		p := params("claude-sonnet-4-5")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if s.Completion.Choices[0].Message.Content != anthropictest.Text || s.Completion.Choices[0].FinishReason != "stop" {
			t.Errorf("answer %+v", s.Completion)
		}
		last := s.Chunks[len(s.Chunks)-1]
		if len(last.Choices) != 0 || last.Usage.TotalTokens != totalTokens || last.Usage.PromptTokensDetails.CachedTokens != anthropictest.CacheRead {
			t.Errorf("last chunk %s", last.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Header: map[string]string{"Accept": "text/event-stream"},
			Body: `{"model":"claude-sonnet-4-5","max_tokens":8192,"system":[{"type":"text","text":"Be brief."}],
					"messages":[{"role":"user","content":[{"type":"text","text":"Hello!"}]}],"stream":true}`,
		})
		ev := h.Event(t)
		if !ev.Stream || ev.TotalTokens != totalTokens || ev.FinishReason != "stop" || ev.CompletionStartTime == 0 || !strings.Contains(string(ev.Response), anthropictest.Text) {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("streamed, usage not asked", func(t *testing.T) {
		s, err := h.Stream(ctx, params("claude-sonnet-4-5"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Chunks {
			if len(c.Choices) == 0 {
				t.Errorf("the usage chunk reached a client that did not ask for it: %s", c.RawJSON())
			}
		}
		if ev := h.Event(t); ev.TotalTokens != totalTokens {
			t.Errorf("event %+v", ev)
		}
	})
}

// anthropicToolsAndThinking checks tool calls and thinking blocks.
func anthropicToolsAndThinking(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params func(string) openai.ChatCompletionNewParams) {
	weather := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
	clock := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time"})
	t.Run("tool calls", func(t *testing.T) {
		p := params(anthropictest.ModelTools)
		p.Tools = []openai.ChatCompletionToolUnionParam{weather, clock}
		p.ParallelToolCalls = openai.Bool(true)
		got, err := h.Client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		calls := got.Choices[0].Message.ToolCalls
		if got.Choices[0].FinishReason != "tool_calls" || len(calls) != 2 || calls[0].ID != "toolu_01A" || calls[0].Function.Arguments != `{"city":"Paris"}` || calls[1].Function.Name != "get_time" {
			t.Errorf("answer %s", got.RawJSON())
		}
		h.Event(t)
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Completion.Choices[0]
		if c.FinishReason != "tool_calls" || c.Message.Content != "I'll check." || len(c.Message.ToolCalls) != 2 ||
			c.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || c.Message.ToolCalls[1].Function.Arguments != "{}" || c.Message.ToolCalls[1].ID != "toolu_01B" {
			t.Errorf("streamed answer %+v", c)
		}
		if ev := h.Event(t); ev.FinishReason != "tool_calls" || !strings.Contains(string(ev.Response), "get_weather") {
			t.Errorf("event %+v", ev)
		}
		// The answer goes back as the next turn.
		p.Messages = append(p.Messages, got.Choices[0].Message.ToParam(),
			openai.ToolMessage("18C", "toolu_01A"), openai.ToolMessage("noon", "toolu_01B"))
		if _, err := h.Client.Chat.Completions.New(ctx, p); err != nil {
			t.Fatal(err)
		}
		h.Event(t)
		providertest.AssertRequest(t, up.Last(t), providertest.Want{Body: `{"model":"claude-tools","max_tokens":8192,"system":[{"type":"text","text":"Be brief."}],
				"messages":[{"role":"user","content":[{"type":"text","text":"Hello!"}]},
					{"role":"assistant","content":[{"type":"text","text":"I'll check."},{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}}]},
					{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_01B","content":"noon"}]}],
				"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"get_time","input_schema":{"type":"object","properties":{}}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":false}}`})
	})
	t.Run("thinking", func(t *testing.T) {
		p := params(anthropictest.ModelThinking)
		p.ReasoningEffort = openai.ReasoningEffortLow
		got, err := h.Client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			ReasoningContent string            `json:"reasoning_content"`
			ThinkingBlocks   []json.RawMessage `json:"thinking_blocks"`
		}
		if err := json.Unmarshal([]byte(got.Choices[0].Message.RawJSON()), &msg); err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != anthropictest.Text || msg.ReasoningContent != "The user greets me." || len(msg.ThinkingBlocks) != 1 ||
			!strings.Contains(string(msg.ThinkingBlocks[0]), `"signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"`) {
			t.Errorf("answer %s", got.RawJSON())
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{Body: `{"model":"claude-thinking","max_tokens":9216,"system":[{"type":"text","text":"Be brief."}],
				"messages":[{"role":"user","content":[{"type":"text","text":"Hello!"}]}],"thinking":{"type":"enabled","budget_tokens":1024}}`})
		h.Event(t)
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var reasoning, signature strings.Builder
		for _, c := range s.Chunks {
			if len(c.Choices) == 0 {
				continue
			}
			var d struct {
				ReasoningContent string `json:"reasoning_content"`
				ThinkingBlocks   []struct {
					Signature string `json:"signature"`
				} `json:"thinking_blocks"`
			}
			json.Unmarshal([]byte(c.Choices[0].Delta.RawJSON()), &d)
			reasoning.WriteString(d.ReasoningContent)
			for _, b := range d.ThinkingBlocks {
				signature.WriteString(b.Signature)
			}
		}
		if s.Completion.Choices[0].Message.Content != anthropictest.Text || reasoning.String() != "The user greets me." || signature.String() != "EqQBCgIYAhIM1gbcDa9GJwZA2b3h" {
			t.Errorf("stream: content %q, reasoning %q, signature %q", s.Completion.Choices[0].Message.Content, reasoning.String(), signature.String())
		}
		h.Event(t)
	})
}

// anthropicRefusals checks response formats and what is refused, by Anthropic or by sluice.
func anthropicRefusals(t *testing.T, ctx context.Context, h *chattest.Harness, up *providertest.Upstream, params func(string) openai.ChatCompletionNewParams) {
	t.Run("response_format json_schema", func(t *testing.T) {
		p := params(anthropictest.ModelJSON)
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
			JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "greeting", Schema: map[string]any{"type": "object", "properties": map[string]any{"greeting": map[string]any{"type": "string"}}}}}}
		got, err := h.Client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != `{"greeting":"Hello"}` || got.Choices[0].FinishReason != "stop" || len(got.Choices[0].Message.ToolCalls) != 0 {
			t.Errorf("answer %s", got.RawJSON())
		}
		h.Event(t)
		s, err := h.Stream(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.Completion.Choices[0]; c.Message.Content != `{"greeting": "Hello"}` || c.FinishReason != "stop" {
			t.Errorf("streamed answer %+v", c)
		}
		h.Event(t)
	})
	t.Run("the provider's 400", func(t *testing.T) {
		_, err := h.Client.Chat.Completions.New(ctx, params(anthropictest.ModelRefuse))
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, "image exceeds 5 MB maximum") || ae.Type != "invalid_request_error" {
			t.Fatalf("error %v", err)
		}
		if ev := h.Event(t); ev.Status != "failure" {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("an error event mid-stream", func(t *testing.T) {
		s, err := h.Stream(ctx, params(anthropictest.ModelOverloaded))
		if err == nil || !strings.Contains(err.Error(), "Overloaded") {
			t.Fatalf("stream error %v", err)
		}
		if len(s.Chunks) != 2 || s.Chunks[1].Choices[0].Delta.Content != "Hello" {
			t.Errorf("chunks before the error: %+v", s.Chunks)
		}
		if ev := h.Event(t); ev.Status != "failure" || !strings.Contains(ev.ErrorStr, "Overloaded") {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("a parameter Anthropic cannot honour", func(t *testing.T) {
		n := up.Count()
		r := h.Post(t, "/v1/chat/completions", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"x"}],"logit_bias":{"1":1}}`)
		if r.Status != 400 || !strings.Contains(string(r.Body), `"param":"logit_bias"`) || !strings.Contains(string(r.Body), `"code":"unsupported_parameter"`) || up.Count() != n {
			t.Errorf("%d %s (%d upstream calls)", r.Status, r.Body, up.Count()-n)
		}
		h.Event(t)
		r = h.Post(t, "/v1/chat/completions", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"x"}],"logit_bias":{"1":1},"drop_params":true}`)
		if r.Status != 200 {
			t.Errorf("dropped: %d %s", r.Status, r.Body)
		}
		h.Event(t)
	})
}
