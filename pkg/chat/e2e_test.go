package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

const upstreamKey = "sk-upstream-chat"

// openAIChat answers chat completions as OpenAI does: a chat.completion, or
// (stream: true) chunks with "usage": null in each and the usage chunk last
// when stream_options.include_usage is true, then [DONE]. Its model names
// select misbehaviour: "refuse" (OpenAI's 400), "overloaded" (a 500),
// "cut" (a stream whose connection breaks after two chunks).
func openAIChat() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			providertest.WriteJSON(w, 400, `{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+upstreamKey && r.Header.Get("Api-Key") != upstreamKey {
			providertest.WriteJSON(w, 401, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			return
		}
		switch req.Model {
		case "refuse":
			providertest.WriteJSON(w, 400, `{"error":{"message":"Invalid 'messages[0].content': string too long.","type":"invalid_request_error","param":"messages[0].content","code":"string_above_max_length"}}`)
			return
		case "overloaded":
			providertest.WriteJSON(w, 500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
			return
		}
		if !req.Stream {
			providertest.WriteJSON(w, 200, fmt.Sprintf(`{"id":"chatcmpl-abc123","object":"chat.completion","created":1741569952,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":7,"total_tokens":26,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`, req.Model))
			return
		}
		usage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		events := chatChunks(req.Model, usage)
		switch req.Model {
		case "cut":
			providertest.WriteSSE(w, events[:2]...)
			panic(http.ErrAbortHandler) // the connection breaks mid-stream
		}
		providertest.WriteSSE(w, events...)
	}
}

// chatChunks is OpenAI's stream of "Hello! How can I help?".
func chatChunks(model string, usage bool) []providertest.Event {
	null := ""
	if usage {
		null = `,"usage":null`
	}
	head := fmt.Sprintf(`{"id":"chatcmpl-abc123","object":"chat.completion.chunk","created":1741569952,"model":%q,"system_fingerprint":"fp_fc9f1d7035","choices":[`, model)
	events := []providertest.Event{
		{Data: head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]` + null + `}`},
		{Data: head + `{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]` + null + `}`},
		{Data: head + `{"index":0,"delta":{"content":"! How can I help?"},"logprobs":null,"finish_reason":null}]` + null + `}`},
		{Data: head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]` + null + `}`},
	}
	if usage {
		events = append(events, providertest.Event{Data: head + `],"usage":{"prompt_tokens":19,"completion_tokens":7,"total_tokens":26,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`})
	}
	return append(events, providertest.Event{Data: "[DONE]"})
}

func TestChatOpenAIEndToEnd(t *testing.T) {
	up := providertest.NewUpstream(t, openAIChat())
	cfg := fmt.Sprintf(`model_list:
  - model_name: gpt-4o
    litellm_params: {model: openai/gpt-4o-2024-08-06, api_base: %s/v1, api_key: os.environ/UPSTREAM_KEY}
`, up.URL)
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := openai.ChatCompletionNewParams{
			Model:    "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello!")},
		}
		t.Run("not streamed", func(t *testing.T) {
			got, err := h.Client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Message.Content != "Hello! How can I help?" || got.Usage.TotalTokens != 26 || got.Choices[0].FinishReason != "stop" {
				t.Errorf("answer %+v", got)
			}
			providertest.AssertRequest(t, up.Last(t), providertest.Want{
				Method: "POST", Path: "/v1/chat/completions",
				Header: map[string]string{"Authorization": "Bearer " + upstreamKey},
				Body:   `{"model":"gpt-4o-2024-08-06","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello!"}]}`,
			})
			ev := h.Event(t)
			if ev.CallType != "acompletion" || ev.Model != "gpt-4o-2024-08-06" || ev.ModelGroup != "gpt-4o" || ev.TotalTokens != 26 ||
				ev.FinishReason != "stop" || ev.Stream || ev.Status != "success" || !strings.Contains(string(ev.Response), "How can I help") {
				t.Errorf("event %+v", ev)
			}
		})
		t.Run("streamed, usage not asked", func(t *testing.T) {
			s, err := h.Stream(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if s.Completion.Choices[0].Message.Content != "Hello! How can I help?" {
				t.Errorf("answer %+v", s.Completion)
			}
			for _, c := range s.Chunks {
				if len(c.Choices) == 0 {
					t.Errorf("the usage chunk reached a client that did not ask for it: %s", c.RawJSON())
				}
			}
			last := up.Last(t).JSON(t).(map[string]any)
			if diff := cmp.Diff(map[string]any{"include_usage": true}, last["stream_options"]); diff != "" {
				t.Errorf("stream_options sent upstream (-want +got):\n%s", diff)
			}
			ev := h.Event(t)
			if !ev.Stream || ev.TotalTokens != 26 || ev.FinishReason != "stop" || ev.UsageEstimated || ev.CompletionStartTime == 0 {
				t.Errorf("event %+v", ev)
			}
			if !strings.Contains(string(ev.Response), `"content":"Hello! How can I help?"`) {
				t.Errorf("event response %s", ev.Response)
			}
		})
		t.Run("streamed, usage asked", func(t *testing.T) {
			p := params
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			s, err := h.Stream(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			last := s.Chunks[len(s.Chunks)-1]
			if len(last.Choices) != 0 || last.Usage.TotalTokens != 26 {
				t.Errorf("last chunk %s", last.RawJSON())
			}
			if ev := h.Event(t); ev.TotalTokens != 26 {
				t.Errorf("event tokens %d", ev.TotalTokens)
			}
		})
	})
}

func TestChatMockEndToEnd(t *testing.T) {
	cfg := `model_list:
  - model_name: mock
    litellm_params: {model: openai/gpt-4o, mock_response: "This is a mock answer from sluice."}
  - model_name: keyless
    litellm_params: {model: openai/gpt-4o}
`
	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		params := openai.ChatCompletionNewParams{Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi there")}}
		got, err := h.Client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != "This is a mock answer from sluice." || got.Usage.CompletionTokens != 9 || got.Usage.PromptTokens != 2 {
			t.Errorf("answer %s", got.RawJSON())
		}
		if ev := h.Event(t); !ev.UsageEstimated || ev.TotalTokens != 11 {
			t.Errorf("event %+v", ev)
		}
		s, err := h.Stream(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if s.Completion.Choices[0].Message.Content != "This is a mock answer from sluice." || len(s.Chunks) < 4 {
			t.Errorf("stream %d chunks, %+v", len(s.Chunks), s.Completion)
		}
		if ev := h.Event(t); !ev.UsageEstimated || ev.TotalTokens != 11 || !ev.Stream {
			t.Errorf("event %+v", ev)
		}
		// The request's own mock_response: the deployment is routed to
		// but never opened (it has no key) nor called.
		r := h.Post(t, "/v1/chat/completions", `{"model":"keyless","messages":[{"role":"user","content":"Hi"}],"mock_response":"Mocked.","stream":true,"stream_options":{"include_usage":true}}`)
		data := providertest.Data(t, r.Body)
		if r.Status != 200 || len(data) < 5 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"usage":{"prompt_tokens":1,"completion_tokens":2`) {
			t.Errorf("%d %q", r.Status, data)
		}
		if ev := h.Event(t); ev.ModelGroup != "keyless" || ev.Status != "success" || !ev.UsageEstimated {
			t.Errorf("event %+v", ev)
		}
	})
}
