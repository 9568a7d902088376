package messages_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// The fakes below speak four wire formats — OpenAI chat, Gemini
// generateContent, Bedrock Converse and Anthropic Messages — and answer a
// conversation the same way: a tool call when tools are offered and no
// result came back yet, the final answer once a result has, a description
// of an image when one is sent, else a greeting.
const (
	finalText = "It is 21 degrees in Paris."
	imageText = "A red square."
	toolName  = "get_weather"
	toolArgs  = `{"city":"Paris"}`
)

// conversation is what a fake reads of a request.
type conversation struct {
	tools, result, image bool
}

func (c conversation) answer(provider string) (text string, tool bool) {
	switch {
	case c.result:
		return finalText, false
	case c.tools:
		return "", true
	case c.image:
		return imageText, false
	}
	return "Hello from " + provider + ".", false
}

// readJSON decodes a request body the fakes read loosely.
func readJSON(t testing.TB, r *http.Request) (map[string]any, []byte) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("fake: read the request: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Errorf("fake: the request is not JSON: %v: %s", err, b)
	}
	return m, b
}

func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range events {
		io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
}

func jsonAnswer(w http.ResponseWriter, status int, v string) {
	providertest.WriteJSON(w, status, v)
}

// openAIFake serves /v1/chat/completions. Model "limited" answers 429.
func openAIFake(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-openai" {
			jsonAnswer(w, 401, `{"error":{"message":"bad key or path","type":"invalid_request_error"}}`)
			return
		}
		m, body := readJSON(t, r)
		if m["model"] == "limited" {
			w.Header().Set("Retry-After", "60")
			jsonAnswer(w, 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		c := conversation{tools: m["tools"] != nil, result: bytes.Contains(body, []byte(`"role":"tool"`)), image: bytes.Contains(body, []byte(`"image_url"`))}
		text, tool := c.answer("openai")
		id := `"id":"chatcmpl-fake1","object":"chat.completion.chunk","created":1,"model":"gpt-fake"`
		if m["stream"] == true {
			var evs []string
			ev := func(s string) { evs = append(evs, "data: {"+id+`,"choices":[`+s+"]}\n\n") }
			ev(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`)
			finish := "stop"
			if tool {
				ev(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"` + toolName + `","arguments":""}}]},"finish_reason":null}`)
				ev(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + quote(toolArgs[:8]) + `}}]},"finish_reason":null}`)
				ev(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + quote(toolArgs[8:]) + `}}]},"finish_reason":null}`)
				finish = "tool_calls"
			} else {
				ev(`{"index":0,"delta":{"content":` + quote(text[:5]) + `},"finish_reason":null}`)
				ev(`{"index":0,"delta":{"content":` + quote(text[5:]) + `},"finish_reason":null}`)
			}
			ev(`{"index":0,"delta":{},"finish_reason":"` + finish + `"}`)
			evs = append(evs, "data: {"+id+`,"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`+"\n\n", "data: [DONE]\n\n")
			writeSSE(w, evs...)
			return
		}
		msg := `{"role":"assistant","content":` + quote(text) + `}`
		finish := "stop"
		if tool {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"` + toolName + `","arguments":` + quote(toolArgs) + `}}]}`
			finish = "tool_calls"
		}
		jsonAnswer(w, 200, `{"id":"chatcmpl-fake1","object":"chat.completion","created":1,"model":"gpt-fake","choices":[{"index":0,"message":`+msg+`,"finish_reason":"`+finish+`"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
	}
}

// geminiFake serves …:generateContent and …:streamGenerateContent?alt=sse.
func geminiFake(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Goog-Api-Key") != "gemini-key" {
			jsonAnswer(w, 400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}`)
			return
		}
		m, body := readJSON(t, r)
		c := conversation{tools: m["tools"] != nil, result: bytes.Contains(body, []byte(`"functionResponse"`)), image: bytes.Contains(body, []byte(`"inlineData"`)) || bytes.Contains(body, []byte(`"fileData"`))}
		text, tool := c.answer("gemini")
		part := `{"text":` + quote(text) + `}`
		if tool {
			part = `{"functionCall":{"name":"` + toolName + `","args":` + toolArgs + `}}`
		}
		usage := `"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":7,"totalTokenCount":18}`
		answer := `{"candidates":[{"content":{"role":"model","parts":[` + part + `]},"finishReason":"STOP","index":0}],` + usage + `,"modelVersion":"gemini-fake"}`
		if strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
			writeSSE(w, "data: "+answer+"\n\n")
			return
		}
		jsonAnswer(w, 200, answer)
	}
}

// bedrockFake serves /model/{id}/converse and /converse-stream (AWS event
// stream). Its signature is not checked: pkg/providers/bedrock's tests do.
func bedrockFake(t testing.TB) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			w.Header().Set("X-Amzn-Errortype", "UnrecognizedClientException")
			jsonAnswer(w, 403, `{"message":"The security token included in the request is invalid."}`)
			return
		}
		m, body := readJSON(t, r)
		if p := r.URL.EscapedPath(); strings.HasSuffix(p, "/invoke") || strings.HasSuffix(p, "/invoke-with-response-stream") {
			if m["anthropic_version"] != "bedrock-2023-05-31" || m["model"] != nil || m["stream"] != nil {
				t.Errorf("fake: an InvokeModel body for Claude without Bedrock's anthropic_version, or with a model or stream: %s", body)
			}
			message, events := anthropicReply("claude-on-bedrock", body)
			if strings.HasSuffix(p, "/invoke") {
				jsonAnswer(w, 200, message)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			enc := eventstream.NewEncoder()
			for _, e := range events {
				var hs eventstream.Headers
				hs.Set(":message-type", eventstream.StringValue("event"))
				hs.Set(":event-type", eventstream.StringValue("chunk"))
				hs.Set(":content-type", eventstream.StringValue("application/json"))
				payload := `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(e[1])) + `"}`
				if err := enc.Encode(w, eventstream.Message{Headers: hs, Payload: []byte(payload)}); err != nil {
					t.Errorf("fake: encode: %v", err)
				}
				w.(http.Flusher).Flush()
			}
			return
		}
		c := conversation{tools: m["toolConfig"] != nil, result: bytes.Contains(body, []byte(`"toolResult"`)), image: bytes.Contains(body, []byte(`"image"`))}
		text, tool := c.answer("bedrock")
		if strings.HasSuffix(r.URL.Path, "/converse-stream") {
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			enc := eventstream.NewEncoder()
			send := func(typ, payload string) {
				var hs eventstream.Headers
				hs.Set(":message-type", eventstream.StringValue("event"))
				hs.Set(":event-type", eventstream.StringValue(typ))
				hs.Set(":content-type", eventstream.StringValue("application/json"))
				if err := enc.Encode(w, eventstream.Message{Headers: hs, Payload: []byte(payload)}); err != nil {
					t.Errorf("fake: encode: %v", err)
				}
				w.(http.Flusher).Flush()
			}
			send("messageStart", `{"role":"assistant"}`)
			stop := "end_turn"
			if tool {
				send("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"`+toolName+`"}}}`)
				send("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":`+quote(toolArgs)+`}}}`)
				stop = "tool_use"
			} else {
				send("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":`+quote(text)+`}}`)
			}
			send("contentBlockStop", `{"contentBlockIndex":0}`)
			send("messageStop", `{"stopReason":"`+stop+`"}`)
			send("metadata", `{"usage":{"inputTokens":11,"outputTokens":7,"totalTokens":18},"metrics":{"latencyMs":5}}`)
			return
		}
		content, stop := `{"text":`+quote(text)+`}`, "end_turn"
		if tool {
			content, stop = `{"toolUse":{"toolUseId":"tooluse_1","name":"`+toolName+`","input":`+toolArgs+`}}`, "tool_use"
		}
		jsonAnswer(w, 200, `{"output":{"message":{"role":"assistant","content":[`+content+`]}},"stopReason":"`+stop+`","usage":{"inputTokens":11,"outputTokens":7,"totalTokens":18},"metrics":{"latencyMs":5}}`)
	}
}

// anthropicFake serves /v1/messages, and records the headers and body of
// each call (natively forwarded: they must arrive as the client sent them).
func anthropicFake(t testing.TB, seen func(h http.Header, body []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "anthropic-key" {
			jsonAnswer(w, 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		m, body := readJSON(t, r)
		if seen != nil {
			seen(r.Header, body)
		}
		model, _ := m["model"].(string)
		message, events := anthropicReply(model, body)
		if m["stream"] != true {
			jsonAnswer(w, 200, message)
			return
		}
		var evs []string
		for _, e := range events {
			evs = append(evs, "event: "+e[0]+"\ndata: "+e[1]+"\n\n")
		}
		writeSSE(w, evs...)
	}
}

// anthropicReply is a Messages answer to body, whole and as its events
// (type, data).
func anthropicReply(model string, body []byte) (string, [][2]string) {
	var m map[string]any
	json.Unmarshal(body, &m)
	c := conversation{tools: m["tools"] != nil, result: bytes.Contains(body, []byte(`"tool_result"`)), image: bytes.Contains(body, []byte(`"type":"image"`))}
	text, tool := c.answer("anthropic")
	usage := `{"input_tokens":11,"output_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":3}`
	content, stop := `{"type":"text","text":`+quote(text)+`}`, "end_turn"
	if tool {
		content, stop = `{"type":"tool_use","id":"toolu_1","name":"`+toolName+`","input":`+toolArgs+`}`, "tool_use"
	}
	message := `{"id":"msg_fake1","type":"message","role":"assistant","model":"` + model + `","content":[` + content + `],"stop_reason":"` + stop + `","stop_sequence":null,"usage":` + usage + `}`
	events := [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"msg_fake1","type":"message","role":"assistant","model":"` + model + `","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":3}}}`},
		{"ping", `{"type":"ping"}`},
	}
	if tool {
		events = append(events,
			[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"` + toolName + `","input":{}}}`},
			[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + quote(toolArgs) + `}}`})
	} else {
		events = append(events,
			[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + quote(text) + `}}`})
	}
	events = append(events,
		[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		[2]string{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{"output_tokens":7}}`},
		[2]string{"message_stop", `{"type":"message_stop"}`})
	return message, events
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
