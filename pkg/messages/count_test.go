package messages_test

import (
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/messages"
	"github.com/sluice-gateway/sluice/pkg/tokenizer"
)

// TestCountChat: what CountChat counts of a request and when it marks the
// count. The texts' o200k_base counts are tiktoken's: "You are terse." 4,
// "Why is the sky blue?" 6, "hello world" 2; a message is 3 tokens and its
// role's 1, the answer's priming 3.
func TestCountChat(t *testing.T) {
	enc := tokenizer.NewO200kBase()
	for _, tc := range []struct {
		name, body string
		want       int64
		estimated  bool
	}{
		{"system and a user turn", `{"system":"You are terse.","messages":[{"role":"user","content":"Why is the sky blue?"}]}`, 4 + 4 + 4 + 6 + 3, false},
		{"events/messages/count-tokens.json", `{"messages":[{"role":"user","content":"Name a river in Europe."}]}`, 4 + 6 + 3, false},
		{"system blocks", `{"system":[{"type":"text","text":"You are terse."}],"messages":[{"role":"user","content":[{"type":"text","text":"hello world"}]}]}`, 4 + 4 + 4 + 2 + 3, false},
		{"thinking is dropped", `{"messages":[{"role":"user","content":"hello world"},{"role":"assistant","content":[{"type":"thinking","thinking":"Why is the sky blue?","signature":"s"},{"type":"text","text":"hello world"}]},{"role":"user","content":"hello world"}]}`, 3*(4+2) + 3, false},
		{"two text parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"hello world"},{"type":"text","text":"hello world"}]}]}`, 4 + 2 + 2 + 3, true},
		{"an image", `{"messages":[{"role":"user","content":[{"type":"text","text":"hello world"},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`, 4 + 2 + 1600 + 3, true},
		{"a tool call and its result", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"hello","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"hello world"}]}]}`, 4 + 1 + 1 + 4 + 2 + 3, true},
		{"tools", `{"messages":[{"role":"user","content":"hello world"}],"tools":[{"name":"hello","input_schema":{}}]}`, 4 + 2 + 1 + 1 + 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := messages.Parse([]byte(`{"model":"m","max_tokens":1,` + tc.body[1:]))
			if err != nil {
				t.Fatal(err)
			}
			n, estimated, err := messages.CountChat(&p.Request, enc)
			if err != nil || n != tc.want || estimated != tc.estimated {
				t.Errorf("CountChat = %d, %v, %v; want %d, %v", n, estimated, err, tc.want, tc.estimated)
			}
		})
	}
}

// TestCountTokensWithTheModelsTokenizer: count_tokens counts with
// o200k_base when every deployment of the model is an OpenAI model of that
// encoding (by its model, or model_info.base_model), unmarked for text
// alone; other models, OpenAI's older ones and a group mixing vendors get
// the estimate, marked.
func TestCountTokensWithTheModelsTokenizer(t *testing.T) {
	cfg := `model_list:
  - model_name: gpt-4o-mini
    litellm_params: {model: openai/gpt-4o-mini, api_key: k}
  - model_name: house
    litellm_params: {model: openai/house-deployment, api_key: k}
    model_info: {base_model: gpt-4.1}
  - model_name: mixed
    litellm_params: {model: openai/gpt-4o, api_key: k}
  - model_name: mixed
    litellm_params: {model: anthropic/claude-sonnet-4-5, api_key: k}
  - model_name: old
    litellm_params: {model: openai/gpt-4-turbo, api_key: k}
`
	const prompt = `"system":"You are terse.","messages":[{"role":"user","content":"Why is the sky blue?"}]}`
	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
		for model, want := range map[string]string{
			"gpt-4o-mini": `{"input_tokens":21}`,
			"house":       `{"input_tokens":21}`,
			"mixed":       `{"input_tokens":12,"estimated":true}`, // 4 + 3 + 5 at 4 bytes a token
			"old":         `{"input_tokens":12,"estimated":true}`,
		} {
			res := h.Gateway.Do("POST", "/v1/messages/count_tokens", "", `{"model":"`+model+`",`+prompt, "X-Api-Key", h.Key)
			if res.Status != 200 || strings.TrimSpace(string(res.Body)) != want {
				t.Errorf("%s: %d %s, want %s", model, res.Status, res.Body, want)
			}
		}
	})
}
