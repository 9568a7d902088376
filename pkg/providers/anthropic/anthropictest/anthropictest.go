// Package anthropictest is a fake Messages API for the chat tests of
// Anthropic and of Claude on Vertex AI: it answers as Anthropic does (a
// message, or its event stream), after checking what each API requires of
// the call, and the model named selects the answer.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// Models the fake answers differently; any other model answers Text.
const (
	ModelTools      = "claude-tools"      // two tool calls
	ModelThinking   = "claude-thinking"   // a thinking block, then text
	ModelJSON       = "claude-json"       // a call of the response format's tool
	ModelRefuse     = "claude-refuse"     // a 400
	ModelOverloaded = "claude-overloaded" // a 529; streamed, an error event after the first text
)

// Text is the answer's text.
const Text = "Hello! How can I help?"

// Usage of every answer: 19 input tokens, 5 of them read from the cache and
// 2 written to it (besides input_tokens, as Anthropic counts), 9 output.
const (
	InputTokens   = 12
	CacheRead     = 5
	CacheCreation = 2
	OutputTokens  = 9
)

// Handler serves POST /v1/messages (Anthropic: x-api-key key, an
// anthropic-version header, the model in the body) and, when vertex, the
// Vertex AI publisher paths …/publishers/anthropic/models/{model}:rawPredict
// and :streamRawPredict (auth checks the Authorization header;
// anthropic_version vertex-2023-10-16 in the body, no model).
func Handler(key string, auth func(authorization string) bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model            *string         `json:"model"`
			MaxTokens        int             `json:"max_tokens"`
			Messages         json.RawMessage `json:"messages"`
			Stream           bool            `json:"stream"`
			AnthropicVersion string          `json:"anthropic_version"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			errorJSON(w, 400, "invalid_request_error", "The request body is not valid JSON.")
			return
		}
		model, stream := "", req.Stream
		switch p := r.URL.Path; {
		case p == "/v1/messages":
			if r.Header.Get("X-Api-Key") != key {
				errorJSON(w, 401, "authentication_error", "invalid x-api-key")
				return
			}
			if r.Header.Get("Anthropic-Version") != "2023-06-01" {
				errorJSON(w, 400, "invalid_request_error", "anthropic-version: header is required")
				return
			}
			if req.Model == nil {
				errorJSON(w, 400, "invalid_request_error", "model: Field required")
				return
			}
			model = *req.Model
		case auth != nil && strings.Contains(p, "/publishers/anthropic/models/"):
			if !auth(r.Header.Get("Authorization")) {
				errorJSON(w, 401, "authentication_error", "Request had invalid authentication credentials.")
				return
			}
			_, rest, _ := strings.Cut(p, "/publishers/anthropic/models/")
			var method string
			model, method, _ = strings.Cut(rest, ":")
			if method != "rawPredict" && method != "streamRawPredict" || stream != (method == "streamRawPredict") {
				errorJSON(w, 400, "invalid_request_error", fmt.Sprintf("method %s with stream %v", method, stream))
				return
			}
			if req.AnthropicVersion != "vertex-2023-10-16" || req.Model != nil {
				errorJSON(w, 400, "invalid_request_error", "anthropic_version: vertex-2023-10-16 is required, and model is not allowed")
				return
			}
		default:
			errorJSON(w, 404, "not_found_error", "Not found: "+p)
			return
		}
		if req.MaxTokens <= 0 || len(req.Messages) == 0 {
			errorJSON(w, 400, "invalid_request_error", "max_tokens: Field required")
			return
		}
		base, _, _ := strings.Cut(model, "@")
		switch base {
		case ModelRefuse:
			errorJSON(w, 400, "invalid_request_error", "messages.0.content.0.image.source.base64: image exceeds 5 MB maximum")
			return
		case ModelOverloaded:
			if !stream {
				errorJSON(w, 529, "overloaded_error", "Overloaded")
				return
			}
		}
		if stream {
			providertest.WriteSSE(w, Stream(model)...)
			return
		}
		providertest.WriteJSON(w, 200, Message(model))
	}
}

func errorJSON(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
	providertest.WriteJSON(w, status, string(b))
}

const usageJSON = `{"input_tokens":12,"cache_creation_input_tokens":2,"cache_read_input_tokens":5,"output_tokens":9,"service_tier":"standard"}`

// Message is the model's (non-streamed) answer.
func Message(model string) string {
	content, stop := `[{"type":"text","text":"Hello! How can I help?"}]`, "end_turn"
	switch base, _, _ := strings.Cut(model, "@"); base {
	case ModelTools:
		content, stop = `[{"type":"text","text":"I'll check."},{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}}]`, "tool_use"
	case ModelThinking:
		content = `[{"type":"thinking","thinking":"The user greets me.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},{"type":"text","text":"Hello! How can I help?"}]`
	case ModelJSON:
		content, stop = `[{"type":"tool_use","id":"toolu_01J","name":"json_tool_call","input":{"greeting":"Hello"}}]`, "tool_use"
	}
	return `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":` + quote(model) +
		`,"content":` + content + `,"stop_reason":"` + stop + `","stop_sequence":null,"usage":` + usageJSON + `}`
}

// Stream is the model's streamed answer, as Anthropic's events.
func Stream(model string) []providertest.Event {
	ev := func(typ, data string) providertest.Event { return providertest.Event{Type: typ, Data: data} }
	start := ev("message_start", `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":`+quote(model)+
		`,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":2,"cache_read_input_tokens":5,"output_tokens":1,"service_tier":"standard"}}}`)
	blockStart := func(i int, block string) providertest.Event {
		return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, block))
	}
	delta := func(i int, d string) providertest.Event {
		return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, d))
	}
	stop := func(i int) providertest.Event {
		return ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	end := func(reason string) []providertest.Event {
		return []providertest.Event{
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+reason+`","stop_sequence":null},"usage":{"output_tokens":9}}`),
			ev("message_stop", `{"type":"message_stop"}`),
		}
	}
	text := func(i int) []providertest.Event {
		return []providertest.Event{blockStart(i, `{"type":"text","text":""}`), ev("ping", `{"type": "ping"}`),
			delta(i, `{"type":"text_delta","text":"Hello"}`), delta(i, `{"type":"text_delta","text":"! How can I help?"}`), stop(i)}
	}
	events := []providertest.Event{start}
	switch base, _, _ := strings.Cut(model, "@"); base {
	case ModelTools:
		events = append(events,
			blockStart(0, `{"type":"text","text":""}`), delta(0, `{"type":"text_delta","text":"I'll check."}`), stop(0),
			blockStart(1, `{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{}}`),
			delta(1, `{"type":"input_json_delta","partial_json":""}`),
			delta(1, `{"type":"input_json_delta","partial_json":"{\"city\": "}`),
			delta(1, `{"type":"input_json_delta","partial_json":"\"Paris\"}"}`), stop(1),
			blockStart(2, `{"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}}`), stop(2))
		return append(events, end("tool_use")...)
	case ModelThinking:
		events = append(events, blockStart(0, `{"type":"thinking","thinking":""}`),
			delta(0, `{"type":"thinking_delta","thinking":"The user greets me."}`),
			delta(0, `{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}`), stop(0))
		events = append(events, text(1)...)
	case ModelJSON:
		events = append(events, blockStart(0, `{"type":"tool_use","id":"toolu_01J","name":"json_tool_call","input":{}}`),
			delta(0, `{"type":"input_json_delta","partial_json":"{\"greeting\": "}`),
			delta(0, `{"type":"input_json_delta","partial_json":"\"Hello\"}"}`), stop(0))
		return append(events, end("tool_use")...)
	case ModelOverloaded:
		return append(events, blockStart(0, `{"type":"text","text":""}`), delta(0, `{"type":"text_delta","text":"Hello"}`),
			ev("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`))
	default:
		events = append(events, text(0)...)
	}
	return append(events, end("end_turn")...)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
