package chat

import (
	"encoding/json"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

// TestChatParametersMatchEncodingJSON: the event's parameters, written
// member by member, are what encoding/json writes for them as a map (the
// form the event carried before): every parameter, HTML characters and a
// raw tool_choice with spaces included, and none.
func TestChatParametersMatchEncodingJSON(t *testing.T) {
	for name, body := range map[string]string{
		"every parameter": `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"n":2,"max_tokens":50,` +
			`"max_completion_tokens":60,"stop":["<end>","&"],"reasoning_effort":"low","user":"u<7>","logprobs":true,` +
			`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{ "type" : "function", "function" : {"name":"f"} },` +
			`"temperature":0.2,"top_p":1e-7,"frequency_penalty":-0.5,"presence_penalty":1,"response_format":{"type":"json_object"},"seed":-5}`,
		"empty stop": `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":[],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}]}`,
		"none":       `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			req, err := oai.ParseChatRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			got := chatParameters(req)
			want := referenceChatParameters(req)
			if want == nil {
				if got != nil {
					t.Fatalf("no parameters: %s, want none", got)
				}
				return
			}
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wantJSON) {
				t.Errorf("parameters:\n got %s\nwant %s", got, wantJSON)
			}
		})
	}
}

// referenceChatParameters is the parameters as a map, as the event held
// them before it kept their JSON.
func referenceChatParameters(r *oai.ChatRequest) map[string]any {
	m := map[string]any{}
	set := func(name string, given bool, v any) {
		if given {
			m[name] = v
		}
	}
	set("stream", r.Stream, r.Stream)
	set("n", r.N > 0, r.N)
	set("max_tokens", r.MaxTokens > 0, r.MaxTokens)
	set("max_completion_tokens", r.MaxCompletionTokens > 0, r.MaxCompletionTokens)
	set("stop", r.Stop != nil, r.Stop)
	set("reasoning_effort", r.ReasoningEffort != "", r.ReasoningEffort)
	set("user", r.User != "", r.User)
	set("logprobs", r.Logprobs, r.Logprobs)
	set("tools", len(r.Tools) > 0, len(r.Tools))
	for name, v := range map[string]*float64{"temperature": r.Temperature, "top_p": r.TopP, "frequency_penalty": r.FrequencyPenalty, "presence_penalty": r.PresencePenalty} {
		if v != nil {
			m[name] = *v
		}
	}
	if r.ToolChoice != nil {
		m["tool_choice"] = json.RawMessage(r.ToolChoice.Raw)
	}
	if r.ResponseFormat != nil {
		m["response_format"] = r.ResponseFormat.Type
	}
	if r.Seed != nil {
		m["seed"] = *r.Seed
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
