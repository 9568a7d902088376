package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// openAIFamily is an OpenAI (and Azure OpenAI) stand-in: chat completions
// (openAIChat), text completions and responses, in OpenAI's wire format.
func openAIFamily() http.HandlerFunc {
	chat := openAIChat()
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			chat(w, r)
		case strings.HasSuffix(r.URL.Path, "/completions"):
			textCompletions(w, r)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			responsesAPI(w, r)
		default:
			providertest.WriteJSON(w, 404, `{"error":{"message":"Invalid URL","type":"invalid_request_error","param":null,"code":null}}`)
		}
	}
}

func textCompletions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	const usage = `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`
	if !req.Stream {
		providertest.WriteJSON(w, 200, `{"id":"cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7","object":"text_completion","created":1589478378,"model":"gpt-3.5-turbo-instruct","system_fingerprint":"fp_44709d6fcb","choices":[{"text":"\n\nThis is indeed a test","index":0,"logprobs":null,"finish_reason":"length"}],"usage":`+usage+`}`)
		return
	}
	head := `{"id":"cmpl-7iA7iJjj8V2zOkCGvWF2hAkDWBQZe","object":"text_completion","created":1690759702,"choices":[`
	events := []providertest.Event{
		{Data: head + `{"text":"This","index":0,"logprobs":null,"finish_reason":null}],"model":"gpt-3.5-turbo-instruct"}`},
		{Data: head + `{"text":" is a test","index":0,"logprobs":null,"finish_reason":"stop"}],"model":"gpt-3.5-turbo-instruct"}`},
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		events = append(events, providertest.Event{Data: head + `],"model":"gpt-3.5-turbo-instruct","usage":` + usage + `}`})
	}
	providertest.WriteSSE(w, append(events, providertest.Event{Data: "[DONE]"})...)
}

func responsesAPI(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	response := func(status, text, usage string) string {
		output := `[]`
		if text != "" {
			output = `[{"type":"message","id":"msg_67ccd3acc8d48190","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}]`
		}
		return `{"id":"resp_67ccd3a9da748190","object":"response","created_at":1741476777,"status":"` + status + `","error":null,"incomplete_details":null,"model":"gpt-4o-2024-08-06","output":` + output + `,"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":` + usage + `}`
	}
	const usage = `{"input_tokens":36,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":123}`
	if !req.Stream {
		providertest.WriteJSON(w, 200, response("completed", "In a peaceful grove", usage))
		return
	}
	providertest.WriteSSE(w,
		providertest.Event{Type: "response.created", Data: `{"type":"response.created","sequence_number":0,"response":` + response("in_progress", "", "null") + `}`},
		providertest.Event{Type: "response.output_text.delta", Data: `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_67ccd3acc8d48190","output_index":0,"content_index":0,"delta":"In a peaceful grove"}`},
		providertest.Event{Type: "response.completed", Data: `{"type":"response.completed","sequence_number":2,"response":` + response("completed", "In a peaceful grove", usage) + `}`},
	)
}

// TestChatForwardsToEachOpenAIFamilyProvider: the request goes to each
// kind of deployment's URL with its credential, the client's bytes but the
// model (and LiteLLM's drop_params) as they came.
func TestChatForwardsToEachOpenAIFamilyProvider(t *testing.T) {
	up := providertest.NewUpstream(t, openAIFamily())
	cfg := fmt.Sprintf(`model_list:
  - model_name: vllm
    litellm_params: {model: hosted_vllm/meta-llama/Llama-3.1-8B-Instruct, api_base: %[1]s/proxy/v1, api_key: os.environ/UPSTREAM_KEY}
  - model_name: azure-gpt
    litellm_params: {model: azure/chat-dep, api_base: %[1]s, api_key: os.environ/UPSTREAM_KEY, api_version: 2025-01-01-preview}
  - model_name: openai
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
`, up.URL)
	// The body's members are copied as they came, but for model and
	// drop_params, LiteLLM's own (rebuilt with compact separators).
	body := `{"messages":[{"role":"user", "content":"Hi"}], "model":"%s", "logit_bias":{"50256": -100},"metadata":{"team":"x"}, "drop_params":true}`
	forwarded := `{"messages":[{"role":"user", "content":"Hi"}],"model":"%s","logit_bias":{"50256": -100},"metadata":{"team":"x"}}`
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		for _, tc := range []struct {
			model string
			want  providertest.Want
			sent  string // the model the provider gets
		}{
			{"vllm", providertest.Want{Path: "/proxy/v1/chat/completions", Header: map[string]string{"Authorization": "Bearer " + upstreamKey, "Api-Key": ""}}, "meta-llama/Llama-3.1-8B-Instruct"},
			{"azure-gpt", providertest.Want{Path: "/openai/deployments/chat-dep/chat/completions", Query: "api-version=2025-01-01-preview", Header: map[string]string{"Api-Key": upstreamKey, "Authorization": ""}}, "chat-dep"},
			{"openai", providertest.Want{Path: "/v1/chat/completions", Header: map[string]string{"Authorization": "Bearer " + upstreamKey}}, "gpt-4o-mini"},
		} {
			t.Run(tc.model, func(t *testing.T) {
				r := h.Post(t, "/v1/chat/completions", fmt.Sprintf(body, tc.model))
				if r.Status != 200 || !strings.Contains(string(r.Body), "How can I help") || r.Header.Get("X-Sluice-Overhead-Ms") == "" {
					t.Fatalf("%d %s %v", r.Status, r.Body, r.Header)
				}
				got := up.Last(t)
				tc.want.Method = "POST"
				providertest.AssertRequest(t, got, tc.want)
				if want := fmt.Sprintf(forwarded, tc.sent); string(got.Body) != want {
					t.Errorf("forwarded\n%s\nwant\n%s", got.Body, want)
				}
				h.Event(t)

				// The official client, not streamed and streamed.
				params := openai.ChatCompletionNewParams{Model: tc.model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}
				c, err := h.Client.Chat.Completions.New(context.Background(), params)
				if err != nil || c.Choices[0].Message.Content != "Hello! How can I help?" || c.Usage.TotalTokens != 26 {
					t.Fatalf("answer: %v %+v", err, c)
				}
				providertest.AssertRequest(t, up.Last(t), tc.want)
				h.Event(t)
				s, err := h.Stream(context.Background(), params)
				if err != nil || s.Completion.Choices[0].Message.Content != "Hello! How can I help?" {
					t.Fatalf("stream: %v %+v", err, s.Completion)
				}
				providertest.AssertRequest(t, up.Last(t), tc.want)
				if ev := h.Event(t); ev.TotalTokens != 26 || ev.ModelGroup != tc.model || ev.Model != tc.sent || ev.CustomLLMProvider == "" {
					t.Errorf("event %+v", ev)
				}
			})
		}
	})
}

// TestChatErrors: each failure is OpenAI's error shape with the status of
// ARCHITECTURE §3, before a stream began and after.
func TestChatErrors(t *testing.T) {
	up := providertest.NewUpstream(t, openAIFamily())
	cfg := fmt.Sprintf(`model_list:
  - model_name: refuse
    litellm_params: {model: openai/refuse, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
  - model_name: overloaded
    litellm_params: {model: openai/overloaded, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY, max_retries: 0}
  - model_name: cut
    litellm_params: {model: openai/cut, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
  - model_name: wrong-key
    litellm_params: {model: openai/gpt-4o, api_base: %[1]s/v1, api_key: sk-wrong}
  - model_name: embed-only
    litellm_params: {model: cohere/embed-english-v3.0, api_base: %[1]s, api_key: k}
  - model_name: keyless
    litellm_params: {model: openai/gpt-4o}
`, up.URL)
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		for _, tc := range []struct {
			name, body   string
			status       int
			code, param  string
			upstreamCall bool
		}{
			{"bad request body", `{"model":"refuse","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "missing_required_parameter", "messages[0].content[0].image_url", false},
			{"unknown model", `{"model":"nope",` + msgs + `}`, 404, "model_not_found", "", false},
			{"the provider refuses", `{"model":"refuse",` + msgs + `}`, 400, "string_above_max_length", "messages[0].content", true},
			{"the provider refuses a stream", `{"model":"refuse","stream":true,` + msgs + `}`, 400, "string_above_max_length", "messages[0].content", true},
			{"the provider fails", `{"model":"overloaded",` + msgs + `}`, 502, "upstream_error", "", true},
			{"the provider fails a stream before it began", `{"model":"overloaded","stream":true,` + msgs + `}`, 502, "upstream_error", "", true},
			{"the provider refuses the gateway's key", `{"model":"wrong-key",` + msgs + `}`, 502, "upstream_error", "", true},
			{"a provider that does not chat", `{"model":"embed-only",` + msgs + `}`, 400, "invalid_value", "model", false},
			{"no credential", `{"model":"keyless",` + msgs + `}`, 503, "unavailable", "", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := up.Count()
				r := h.Post(t, "/v1/chat/completions", tc.body)
				var e struct {
					Error struct {
						Message string  `json:"message"`
						Type    string  `json:"type"`
						Code    *string `json:"code"`
						Param   *string `json:"param"`
					} `json:"error"`
				}
				if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != tc.status || e.Error.Message == "" || e.Error.Code == nil || *e.Error.Code != tc.code ||
					(tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param)) || r.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("%d %s %s, want %d code %q param %q", r.Status, r.Header.Get("Content-Type"), r.Body, tc.status, tc.code, tc.param)
				}
				if called := up.Count() > before; called != tc.upstreamCall {
					t.Errorf("upstream called: %v", called)
				}
				if ev := h.Event(t); ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != fmt.Sprint(tc.status) {
					t.Errorf("event %+v", ev)
				}
			})
		}
		t.Run("a stream cut after it began ends with an error event", func(t *testing.T) {
			r := h.Post(t, "/v1/chat/completions", `{"model":"cut","stream":true,`+msgs+`}`)
			data := providertest.Data(t, r.Body)
			if r.Status != 200 || len(data) != 3 || !strings.Contains(data[len(data)-1], `"error":{`) || r.ReadErr == nil {
				t.Fatalf("%d %q, read error %v", r.Status, data, r.ReadErr)
			}
			if ev := h.Event(t); ev.Status != "failure" || ev.ErrorInformation.ErrorCode != "502" {
				t.Errorf("event %+v", ev)
			}
			// openai-go reports the error event as the stream's error.
			_, err := h.Stream(context.Background(), openai.ChatCompletionNewParams{Model: "cut", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
			if err == nil || !strings.Contains(err.Error(), "cut off") {
				t.Errorf("stream error %v", err)
			}
			h.Event(t)
		})
	})
}

// TestCompletionsAndResponsesForwarded: /v1/completions and /v1/responses
// reach OpenAI and Azure deployments, streamed or not; other providers
// answer 400 saying so.
func TestCompletionsAndResponsesForwarded(t *testing.T) {
	up := providertest.NewUpstream(t, openAIFamily())
	cfg := fmt.Sprintf(`model_list:
  - model_name: instruct
    litellm_params: {model: openai/gpt-3.5-turbo-instruct, api_base: %[1]s/v1, api_key: os.environ/UPSTREAM_KEY}
  - model_name: azure-instruct
    litellm_params: {model: azure/instruct-dep, api_base: %[1]s, api_key: os.environ/UPSTREAM_KEY}
  - model_name: mock
    litellm_params: {model: openai/gpt-4o, mock_response: "hi"}
  - model_name: gemini
    litellm_params: {model: gemini/gemini-2.0-flash, api_key: k, api_base: %[1]s}
`, up.URL)
	chattest.Run(t, chattest.Options{Config: cfg, Env: map[string]string{"UPSTREAM_KEY": upstreamKey}}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		for _, tc := range []struct {
			model           string
			completionsPath string
			responsesPath   string
			query           string
			sent            string
		}{
			{"instruct", "/v1/completions", "/v1/responses", "", "gpt-3.5-turbo-instruct"},
			{"azure-instruct", "/openai/deployments/instruct-dep/completions", "/openai/responses", "api-version=2024-10-21", "instruct-dep"},
		} {
			t.Run(tc.model, func(t *testing.T) {
				prompt := openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say this is a test")}
				c, err := h.Client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(tc.model), Prompt: prompt})
				if err != nil || c.Choices[0].Text != "\n\nThis is indeed a test" || c.Usage.TotalTokens != 12 {
					t.Fatalf("completion %v %+v", err, c)
				}
				providertest.AssertRequest(t, up.Last(t), providertest.Want{Path: tc.completionsPath, Query: tc.query, Body: `{"model":"` + tc.sent + `","prompt":"Say this is a test"}`})
				if ev := h.Event(t); ev.CallType != "atext_completion" || ev.TotalTokens != 12 || ev.FinishReason != "length" {
					t.Errorf("event %+v", ev)
				}

				st := h.Client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(tc.model), Prompt: prompt})
				var text strings.Builder
				for st.Next() {
					ch := st.Current()
					if len(ch.Choices) == 0 {
						t.Errorf("the usage chunk reached a client that did not ask: %s", ch.RawJSON())
						continue
					}
					text.WriteString(ch.Choices[0].Text)
				}
				if st.Err() != nil || text.String() != "This is a test" {
					t.Errorf("stream %v %q", st.Err(), text.String())
				}
				if ev := h.Event(t); ev.TotalTokens != 12 || ev.FinishReason != "stop" || !strings.Contains(string(ev.Response), `"text":"This is a test"`) {
					t.Errorf("event %+v", ev)
				}

				input := responses.ResponseNewParamsInputUnion{OfString: openai.String("Write a haiku")}
				resp, err := h.Client.Responses.New(ctx, responses.ResponseNewParams{Model: tc.model, Input: input})
				if err != nil || resp.OutputText() != "In a peaceful grove" {
					t.Fatalf("response %v %+v", err, resp)
				}
				providertest.AssertRequest(t, up.Last(t), providertest.Want{Path: tc.responsesPath, Query: tc.query, Body: `{"input":"Write a haiku","model":"` + tc.sent + `"}`})
				if ev := h.Event(t); ev.CallType != "aresponses" || ev.TotalTokens != 123 || ev.FinishReason != "completed" {
					t.Errorf("event %+v", ev)
				}
				rs := h.Client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: tc.model, Input: input})
				var kinds []string
				for rs.Next() {
					kinds = append(kinds, rs.Current().Type)
				}
				if rs.Err() != nil || strings.Join(kinds, " ") != "response.created response.output_text.delta response.completed" {
					t.Errorf("response stream %v %v", rs.Err(), kinds)
				}
				if ev := h.Event(t); ev.TotalTokens != 123 || ev.PromptTokens != 36 || ev.FinishReason != "completed" || !strings.Contains(string(ev.Response), "peaceful") {
					t.Errorf("event %+v", ev)
				}
			})
		}
		for _, model := range []string{"mock", "gemini"} {
			for _, path := range []string{"/v1/completions", "/v1/responses"} {
				r := h.Post(t, path, `{"model":"`+model+`","prompt":"x","input":"x"}`)
				if r.Status != 400 || !strings.Contains(string(r.Body), "OpenAI") || !strings.Contains(string(r.Body), `"param":"model"`) {
					t.Errorf("%s on %s: %d %s", path, model, r.Status, r.Body)
				}
				h.Event(t)
			}
		}
	})
}
