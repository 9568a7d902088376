package chat_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
	"github.com/sluice-gateway/sluice/pkg/sse"
	"github.com/sluice-gateway/sluice/pkg/sse/ssetest"
)

// longEvents is how many text events each provider streams.
const longEvents = 10_000

func longStream(contentType string, head, delta, tail []byte) http.HandlerFunc {
	return ssetest.LongStream(longEvents, contentType, head, delta, tail)
}

func joined(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestLongStreamsRelayInFlatMemoryOnEveryProvider: a stream of 10,000 text
// events from each provider — OpenAI's chunks relayed, Anthropic's,
// Bedrock's and Gemini's events translated — reaches an HTTP client of the
// gateway whole, with its usage, while the heap in use stays flat
// (ssetest.ReadFlat). The log event keeps the text, a few bytes an event,
// within its own bound.
func TestLongStreamsRelayInFlatMemoryOnEveryProvider(t *testing.T) {
	const word = "word "
	oaChunk := func(delta, finish string) []byte {
		return []byte(`data: {"id":"chatcmpl-long","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n")
	}
	anthropicEvent := func(typ, data string) []byte { return []byte("event: " + typ + "\ndata: " + data + "\n\n") }
	geminiEvent := func(data string) []byte { return []byte("data: " + data + "\r\n\r\n") }
	providers := []struct {
		name, params string
		handler      http.HandlerFunc
	}{
		{"openai", "model: openai/gpt-4o-mini, api_base: %s/v1, api_key: k", longStream("text/event-stream",
			oaChunk(`{"role":"assistant","content":""}`, "null"),
			oaChunk(`{"content":"`+word+`"}`, "null"),
			joined(oaChunk(`{}`, `"stop"`), []byte(`data: {"id":"chatcmpl-long","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":10000,"total_tokens":10003}}`+"\n\ndata: [DONE]\n\n")))},
		{"anthropic", "model: anthropic/claude-sonnet-4-5, api_base: %s, api_key: k", longStream("text/event-stream",
			joined(anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_long","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`),
				anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)),
			anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+word+`"}}`),
			joined(anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
				anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10000}}`),
				anthropicEvent("message_stop", `{"type":"message_stop"}`)))},
		{"bedrock", "model: bedrock/anthropic.claude-3-5-haiku-20241022-v1:0, api_base: %s, aws_region_name: us-east-1, aws_access_key_id: AKIDEXAMPLE, aws_secret_access_key: secret", longStream("application/vnd.amazon.eventstream",
			converseEvent(t, "messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS","role":"assistant"}`),
			converseEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"`+word+`"},"p":"abcdefghijk"}`),
			joined(converseEvent(t, "contentBlockStop", `{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"}`),
				converseEvent(t, "messageStop", `{"p":"abcdefghijklmnopqrstuvwx","stopReason":"end_turn"}`),
				converseEvent(t, "metadata", `{"metrics":{"latencyMs":512},"p":"abcdef","usage":{"inputTokens":3,"outputTokens":10000,"totalTokens":10003}}`)))},
		{"gemini", "model: gemini/gemini-2.5-flash, api_base: %s, api_key: k", longStream("text/event-stream",
			nil,
			geminiEvent(`{"candidates": [{"content": {"parts": [{"text": "`+word+`"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "long"}`),
			geminiEvent(`{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 3,"candidatesTokenCount": 10000,"totalTokenCount": 10003},"modelVersion": "gemini-2.5-flash","responseId": "long"}`))},
	}
	var cfg strings.Builder
	cfg.WriteString("model_list:\n")
	for _, p := range providers {
		up := providertest.NewUpstream(t, p.handler)
		fmt.Fprintf(&cfg, "  - model_name: %s\n    litellm_params: {"+p.params+"}\n", p.name, up.URL)
	}
	chattest.Run(t, chattest.Options{Config: cfg.String()}, func(t *testing.T, h *chattest.Harness) {
		for _, p := range providers {
			t.Run(p.name, func(t *testing.T) {
				body := `{"model":"` + p.name + `","messages":[{"role":"user","content":"Count."}],"stream":true,"stream_options":{"include_usage":true}}`
				req, err := http.NewRequest("POST", h.Gateway.URL+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+h.Key)
				resp, err := h.Gateway.Client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var (
					last  []byte
					usage bool
				)
				texts := ssetest.ReadFlat(t, resp.Body, longEvents,
					func(ev sse.Event) bool { return bytes.Contains(ev.Data, []byte(`"content":"`+word+`"`)) },
					func(ev sse.Event) {
						last = append(last[:0], ev.Data...)
						usage = usage || bytes.Contains(ev.Data, []byte(`"usage":{"prompt_tokens":3,"completion_tokens":10000,"total_tokens":10003`))
					})
				if texts != longEvents || !usage || string(last) != "[DONE]" {
					t.Fatalf("%d text events, usage chunk %v, last %q", texts, usage, last)
				}
				if ev := h.Event(t); ev.TotalTokens != 10003 || ev.Status != "success" {
					t.Errorf("event %+v", ev)
				}
			})
		}
	})
}
