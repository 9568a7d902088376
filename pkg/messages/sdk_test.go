package messages_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// A 1×1 red PNG.
const redPixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

// world is a gateway with one deployment per wire format, each on its fake.
type world struct {
	cfg    string
	env    map[string]string
	antURL string // the Anthropic fake's

	mu     sync.Mutex
	native []http.Header // the headers of each natively forwarded call
	bodies [][]byte
}

func newWorld(t *testing.T) *world {
	w := &world{}
	oai := providertest.NewUpstream(t, openAIFake(t))
	gem := providertest.NewUpstream(t, geminiFake(t))
	bed := providertest.NewUpstream(t, bedrockFake(t))
	ant := providertest.NewUpstream(t, anthropicFake(t, func(h http.Header, body []byte) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.native = append(w.native, h.Clone())
		w.bodies = append(w.bodies, body)
	}))
	w.cfg = fmt.Sprintf(`model_list:
  - model_name: openai-model
    litellm_params: {model: openai/gpt-fake, api_base: %[1]s/v1, api_key: os.environ/OPENAI_KEY}
  - model_name: limited
    litellm_params: {model: openai/limited, api_base: %[1]s/v1, api_key: os.environ/OPENAI_KEY, max_retries: 0}
  - model_name: gemini-model
    litellm_params: {model: gemini/gemini-2.5-flash, api_base: %[2]s, api_key: os.environ/GEMINI_KEY}
  - model_name: bedrock-model
    litellm_params: {model: bedrock/amazon.nova-pro-v1:0, api_base: %[3]s, aws_region_name: us-east-1, aws_access_key_id: AKIDEXAMPLE, aws_secret_access_key: os.environ/AWS_SECRET}
  - model_name: claude-model
    litellm_params: {model: anthropic/claude-sonnet-4-5, api_base: %[4]s, api_key: os.environ/ANTHROPIC_KEY}
  - model_name: bedrock-claude
    litellm_params: {model: bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0, api_base: %[3]s, aws_region_name: us-east-1, aws_access_key_id: AKIDEXAMPLE, aws_secret_access_key: os.environ/AWS_SECRET}
`, oai.URL, gem.URL, bed.URL, ant.URL)
	w.antURL = ant.URL
	w.env = map[string]string{"OPENAI_KEY": "sk-openai", "GEMINI_KEY": "gemini-key", "AWS_SECRET": "secret", "ANTHROPIC_KEY": "anthropic-key"}
	return w
}

func client(h *chattest.Harness, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(h.Gateway.URL+"/"), option.WithAPIKey(key),
		option.WithHTTPClient(h.Gateway.Client), option.WithMaxRetries(0))
}

var weatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "get_weather", Description: anthropic.String("The weather of a city"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
}}

// TestAnthropicSDK: the official Go SDK creates messages and streams on an
// OpenAI-compatible, a Gemini, a Bedrock Converse and an Anthropic
// deployment, and Claude on Bedrock (InvokeModel, natively) — a text, an image, a tool call, its result and the final
// answer — streamed and not.
func TestAnthropicSDK(t *testing.T) {
	w := newWorld(t)
	chattest.Run(t, chattest.Options{Config: w.cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		c := client(h, h.Key)
		ctx := context.Background()
		for _, model := range []string{"openai-model", "gemini-model", "bedrock-model", "claude-model", "bedrock-claude"} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/stream=%v", model, stream), func(t *testing.T) {
					send := func(params anthropic.MessageNewParams) *anthropic.Message {
						t.Helper()
						params.Model, params.MaxTokens = anthropic.Model(model), 256
						if !stream {
							m, err := c.Messages.New(ctx, params)
							if err != nil {
								t.Fatal(err)
							}
							return m
						}
						s := c.Messages.NewStreaming(ctx, params)
						var m anthropic.Message
						for s.Next() {
							if err := m.Accumulate(s.Current()); err != nil {
								t.Fatal(err)
							}
						}
						if err := s.Err(); err != nil {
							t.Fatal(err)
						}
						return &m
					}
					// A greeting.
					m := send(anthropic.MessageNewParams{Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}})
					if got := text(m); !strings.HasPrefix(got, "Hello from ") || m.StopReason != anthropic.StopReasonEndTurn {
						t.Errorf("greeting: %q, stop %q", got, m.StopReason)
					}
					// A native answer names the provider's model; a translated one the client's.
					if native := model == "claude-model" || model == "bedrock-claude"; native == (string(m.Model) == model) {
						t.Errorf("answer's model %q: native %v", m.Model, native)
					}
					if m.Usage.OutputTokens != 7 || m.Usage.InputTokens+m.Usage.CacheReadInputTokens != 11 && m.Usage.InputTokens != 11 {
						t.Errorf("usage %+v", m.Usage)
					}
					// An image.
					m = send(anthropic.MessageNewParams{Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
						anthropic.NewImageBlockBase64("image/png", redPixel), anthropic.NewTextBlock("What is this?"))}})
					if got := text(m); got != "A red square." {
						t.Errorf("image: %q", got)
					}
					// A tool call, its result, the final answer.
					q := anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))
					m = send(anthropic.MessageNewParams{Messages: []anthropic.MessageParam{q}, Tools: []anthropic.ToolUnionParam{weatherTool}})
					if m.StopReason != anthropic.StopReasonToolUse || len(m.Content) != 1 || m.Content[0].Type != "tool_use" {
						t.Fatalf("tool call: stop %q, content %+v", m.StopReason, m.Content)
					}
					call := m.Content[0].AsToolUse()
					if call.Name != "get_weather" || string(call.Input) != `{"city":"Paris"}` || call.ID == "" {
						t.Errorf("tool call %s %s %s", call.ID, call.Name, call.Input)
					}
					m = send(anthropic.MessageNewParams{Messages: []anthropic.MessageParam{q, m.ToParam(),
						anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "21 degrees", false))}, Tools: []anthropic.ToolUnionParam{weatherTool}})
					if got := text(m); got != "It is 21 degrees in Paris." || m.StopReason != anthropic.StopReasonEndTurn {
						t.Errorf("final answer %q, stop %q", got, m.StopReason)
					}
				})
			}
		}
		ev := h.Event(t)
		if ev.CallType != "anthropic_messages" || ev.Model == "" || ev.TotalTokens == 0 {
			t.Errorf("log event: call type %q, model %q, tokens %d", ev.CallType, ev.Model, ev.TotalTokens)
		}
	})
}

func text(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// TestAnthropicSDKErrors: sluice's refusals and a provider's reach the SDK
// as Anthropic's errors, status and type: 401, 404 model, 429, 400.
func TestAnthropicSDKErrors(t *testing.T) {
	w := newWorld(t)
	chattest.Run(t, chattest.Options{Config: w.cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		ctx := context.Background()
		msg := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}
		for _, tc := range []struct {
			name   string
			key    string
			params anthropic.MessageNewParams
			status int
			typ    string
		}{
			{"bad key", "sk-wrong", anthropic.MessageNewParams{Model: "openai-model", MaxTokens: 10, Messages: msg}, 401, "authentication_error"},
			{"unknown model", h.Key, anthropic.MessageNewParams{Model: "nope", MaxTokens: 10, Messages: msg}, 404, "not_found_error"},
			{"provider rate limit", h.Key, anthropic.MessageNewParams{Model: "limited", MaxTokens: 10, Messages: msg}, 429, "rate_limit_error"},
			{"bad request", h.Key, anthropic.MessageNewParams{Model: "openai-model", MaxTokens: 10, Messages: msg, Temperature: anthropic.Float(3)}, 400, "invalid_request_error"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := client(h, tc.key)
				for _, stream := range []bool{false, true} {
					var err error
					if stream {
						s := c.Messages.NewStreaming(ctx, tc.params)
						for s.Next() {
						}
						err = s.Err()
					} else {
						_, err = c.Messages.New(ctx, tc.params)
					}
					var ae *anthropic.Error
					if !errors.As(err, &ae) {
						t.Fatalf("stream=%v: error %v (%T), want an *anthropic.Error", stream, err, err)
					}
					if ae.StatusCode != tc.status || !strings.Contains(ae.RawJSON(), `"type":"`+tc.typ+`"`) {
						t.Errorf("stream=%v: %d %s, want %d %s", stream, ae.StatusCode, ae.RawJSON(), tc.status, tc.typ)
					}
				}
			})
		}
	})
}

// TestNativeForwarding: an Anthropic deployment gets the client's body
// with its own model and key, and the client's anthropic-version and
// anthropic-beta headers; sluice's members never reach it.
func TestNativeForwarding(t *testing.T) {
	w := newWorld(t)
	chattest.Run(t, chattest.Options{Config: w.cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		w.mu.Lock()
		w.native, w.bodies = nil, nil
		w.mu.Unlock()
		body := `{"model":"claude-model","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}],"context_management":{"edits":[]},"drop_params":true}`
		res := h.Gateway.Do("POST", "/v1/messages", "", body, "X-Api-Key", h.Key, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "context-management-2025-06-27")
		if res.Status != 200 {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.bodies) != 1 {
			t.Fatalf("%d calls", len(w.bodies))
		}
		want := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}],"context_management":{"edits":[]}}`
		if d := providertest.DiffJSON(want, w.bodies[0]); d != "" {
			t.Errorf("forwarded body (-want +got):\n%s", d)
		}
		if got := w.native[0].Get("Anthropic-Beta"); got != "context-management-2025-06-27" {
			t.Errorf("anthropic-beta %q", got)
		}
		if got := w.native[0].Get("Anthropic-Version"); got != "2023-06-01" {
			t.Errorf("anthropic-version %q", got)
		}
		if !strings.Contains(string(res.Body), `"model":"claude-sonnet-4-5"`) {
			t.Errorf("the answer is not Anthropic's as it came: %s", res.Body)
		}
		ev := h.Event(t)
		if ev.CallType != "anthropic_messages" || ev.ModelGroup != "claude-model" || ev.Model != "claude-sonnet-4-5" ||
			!strings.Contains(string(ev.Messages), `"text":"Hi"`) || string(ev.ModelParameters) != `{"max_tokens":10}` ||
			ev.PromptTokens != 14 || ev.CompletionTokens != 7 || ev.FinishReason != "end_turn" || !strings.Contains(string(ev.Response), `"msg_fake1"`) {
			t.Errorf("log event: %+v", ev)
		}
	})
}

// TestNativeForwardingAsItCame: a body that names the deployment's model
// once, and nothing of sluice's, reaches Anthropic byte for byte as the
// client wrote it; one with a second model member or sluice's own is
// rebuilt.
func TestNativeForwardingAsItCame(t *testing.T) {
	w := newWorld(t)
	cfg := w.cfg + "  - model_name: claude-sonnet-4-5\n    litellm_params: {model: anthropic/claude-sonnet-4-5, api_base: " + w.antURL + ", api_key: os.environ/ANTHROPIC_KEY}\n"
	chattest.Run(t, chattest.Options{Config: cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		for _, c := range []struct{ body, want string }{
			{`{ "model" : "claude-sonnet-4-5", "max_tokens":10,"messages":[{"role":"user","content":"model"}] }`, ""},
			{`{"model":"claude-model","model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`,
				`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`},
			{`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"Hi"}],"mock_response":null}`,
				`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`},
		} {
			w.mu.Lock()
			w.bodies = nil
			w.mu.Unlock()
			res := h.Gateway.Do("POST", "/v1/messages", "", c.body, "X-Api-Key", h.Key)
			if res.Status != 200 {
				t.Fatalf("%d %s", res.Status, res.Body)
			}
			w.mu.Lock()
			got := w.bodies
			w.mu.Unlock()
			switch {
			case len(got) != 1:
				t.Fatalf("%d calls", len(got))
			case c.want == "" && string(got[0]) != c.body:
				t.Errorf("forwarded %s, not as it came: %s", got[0], c.body)
			case c.want != "" && string(got[0]) != c.want:
				t.Errorf("forwarded %s, want %s", got[0], c.want)
			}
			h.Event(t)
		}
	})
}

// TestCountTokens: count_tokens answers an estimate, marked, for a model
// the key may use; 404 for one the gateway does not serve.
func TestCountTokens(t *testing.T) {
	w := newWorld(t)
	chattest.Run(t, chattest.Options{Config: w.cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		c := client(h, h.Key)
		n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
			Model:    "gemini-model",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("word ", 100)))},
		})
		if err != nil {
			t.Fatal(err)
		}
		if n.InputTokens != 128 || !strings.Contains(n.RawJSON(), `"estimated":true`) {
			t.Errorf("count %d %s", n.InputTokens, n.RawJSON())
		}
		_, err = c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "nope",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 404 {
			t.Errorf("unknown model: %v", err)
		}
	})
}

// TestStreamFailingMidwayEndsWithAnthropicsErrorEvent: a translated stream
// the provider cuts after its first chunk ends with Anthropic's event:
// error, after the events already sent; the log event says it failed.
func TestStreamFailingMidwayEndsWithAnthropicsErrorEvent(t *testing.T) {
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, `data: {"id":"chatcmpl-cut","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Half"},"finish_reason":null}]}`+"\n\n")
	})
	cfg := fmt.Sprintf("model_list:\n  - model_name: cut\n    litellm_params: {model: openai/m, api_base: %s/v1, api_key: k, max_retries: 0}\n", up.URL)
	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
		req, err := http.NewRequest("POST", h.Gateway.URL+"/v1/messages", strings.NewReader(`{"model":"cut","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", h.Key)
		resp, err := h.Gateway.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// The gateway then cuts the connection, so the client sees a broken
		// answer, never a clean end: read what came before.
		b, _ := io.ReadAll(resp.Body)
		body := string(b)
		if resp.StatusCode != 200 || !strings.Contains(body, `"text":"Half"`) {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The provider's answer was cut off before it ended.\"}}\n\n"
		if !strings.HasSuffix(body, want) || strings.Contains(body, "message_stop") {
			t.Errorf("the stream does not end with Anthropic's error event:\n%s", body)
		}
		if ev := h.Event(t); ev.Status != "failure" {
			t.Errorf("log event status %q", ev.Status)
		}
	})
}

// TestMockDeployment: a mock deployment answers Messages calls from its
// text, streamed and not, with no provider.
func TestMockDeployment(t *testing.T) {
	cfg := "model_list:\n  - model_name: mock\n    litellm_params: {model: openai/gpt-4o, mock_response: \"A mock answer.\"}\n"
	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
		c := client(h, h.Key)
		params := anthropic.MessageNewParams{Model: "mock", MaxTokens: 50, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}}
		m, err := c.Messages.New(context.Background(), params)
		if err != nil || text(m) != "A mock answer." {
			t.Fatalf("%v %+v", err, m)
		}
		s := c.Messages.NewStreaming(context.Background(), params)
		var acc anthropic.Message
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if s.Err() != nil || text(&acc) != "A mock answer." || acc.StopReason != anthropic.StopReasonEndTurn {
			t.Errorf("%v %q %q", s.Err(), text(&acc), acc.StopReason)
		}
	})
}

// TestTranslatedAnswerLogEvent: a translated answer's log event has the
// answer as the client got it, its stop reason and its usage.
func TestTranslatedAnswerLogEvent(t *testing.T) {
	w := newWorld(t)
	chattest.Run(t, chattest.Options{Config: w.cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		res := h.Gateway.Do("POST", "/v1/messages", "", `{"model":"openai-model","max_tokens":10,"metadata":{"user_id":"u1"},"messages":[{"role":"user","content":"Hi"}]}`, "X-Api-Key", h.Key)
		if res.Status != 200 {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
		ev := h.Event(t)
		if string(ev.Response) != string(res.Body) || ev.FinishReason != "end_turn" || ev.EndUser != "u1" ||
			ev.PromptTokens != 11 || ev.CompletionTokens != 7 || ev.TotalTokens != 18 || ev.Status != "success" {
			t.Errorf("log event: response %s, finish %q, user %q, tokens %d+%d=%d, %s",
				ev.Response, ev.FinishReason, ev.EndUser, ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens, ev.Status)
		}
	})
}

// TestCostHeaderIsTheLogEventsCost: the cost header of an answer, native or
// translated, is the log event's cost: the cache's reads priced as the
// event prices them, not as input.
func TestCostHeaderIsTheLogEventsCost(t *testing.T) {
	w := newWorld(t)
	prices := "input_cost_per_token: 1e-6, output_cost_per_token: 2e-6, cache_read_input_token_cost: 1e-7"
	cfg := strings.ReplaceAll(w.cfg, "api_key: os.environ/ANTHROPIC_KEY}", "api_key: os.environ/ANTHROPIC_KEY, "+prices+"}")
	cfg = strings.Replace(cfg, "api_key: os.environ/OPENAI_KEY}", "api_key: os.environ/OPENAI_KEY, "+prices+"}", 1)
	chattest.Run(t, chattest.Options{Config: cfg, Env: w.env}, func(t *testing.T, h *chattest.Harness) {
		for _, model := range []string{"claude-model", "openai-model"} {
			res := h.Gateway.Do("POST", "/v1/messages", "", `{"model":"`+model+`","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`, "X-Api-Key", h.Key)
			if res.Status != 200 {
				t.Fatalf("%s: %d %s", model, res.Status, res.Body)
			}
			ev := h.Event(t)
			got, err := strconv.ParseFloat(res.Header.Get("X-Litellm-Response-Cost"), 64)
			if err != nil || ev.ResponseCost == 0 || math.Abs(got-ev.ResponseCost) > 1e-15 {
				t.Errorf("%s: cost header %q, the log event's cost %v (tokens %d, cached %d)", model,
					res.Header.Get("X-Litellm-Response-Cost"), ev.ResponseCost, ev.PromptTokens, ev.CachedTokens)
			}
		}
	})
}
