package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/models"
)

// Realistic Messages answers (the API reference's shapes).
const (
	textAnswer = `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
		"content":[{"type":"text","text":"Hello! "},{"type":"text","text":"How can I help?","citations":null}],
		"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":9,"service_tier":"standard"}}`
	toolAnswer = `{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
		"content":[{"type":"text","text":"I'll check the weather."},
			{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA","unit":"celsius"}},
			{"type":"tool_use","id":"toolu_01B","name":"get_time","input":{}}],
		"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":384,"output_tokens":92}}`
	thinkingAnswer = `{"id":"msg_01T","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
		"content":[{"type":"thinking","thinking":"Let me analyze this step by step.","signature":"WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL=="},
			{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
			{"type":"text","text":"The answer is 21."}],
		"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":50,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":120,"output_tokens_details":{"thinking_tokens":80}}}`
)

// answerJSON translates a Messages answer and returns the chat.completion
// decoded, id and created replaced by "*".
func answerJSON(t *testing.T, call *Call, body string) map[string]any {
	t.Helper()
	ans, err := call.Answer([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(ans.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ans.ContentLength != int64(len(b)) {
		t.Errorf("ContentLength %d, body %d bytes", ans.ContentLength, len(b))
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, b)
	}
	if id, _ := got["id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("id %v", got["id"])
	}
	if c, _ := got["created"].(float64); c < 1.7e9 {
		t.Errorf("created %v", got["created"])
	}
	got["id"], got["created"] = "*", "*"
	return got
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	return v
}

func TestAnswerTranslation(t *testing.T) {
	plain := &Call{provider: Name, model: "claude-sonnet-4-5"}
	jsonMode := &Call{provider: Name, model: "claude-sonnet-4-5", jsonMode: true}
	for _, tc := range []struct {
		name string
		call *Call
		body string
		want string
	}{
		{
			name: "text", call: plain, body: textAnswer,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5-20250929",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?","refusal":null},"finish_reason":"stop","logprobs":null}],
				"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`,
		},
		{
			name: "tool use", call: plain, body: toolAnswer,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5-20250929",
				"choices":[{"index":0,"message":{"role":"assistant","content":"I'll check the weather.","refusal":null,"tool_calls":[
					{"id":"toolu_01A09q90qw90lq917835lq9","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"San Francisco, CA\",\"unit\":\"celsius\"}"}},
					{"id":"toolu_01B","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":"tool_calls","logprobs":null}],
				"usage":{"prompt_tokens":384,"completion_tokens":92,"total_tokens":476}}`,
		},
		{
			name: "thinking, with signatures; usage with cache tokens", call: plain, body: thinkingAnswer,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5-20250929",
				"choices":[{"index":0,"message":{"role":"assistant","content":"The answer is 21.","refusal":null,
					"reasoning_content":"Let me analyze this step by step.",
					"thinking_blocks":[{"type":"thinking","thinking":"Let me analyze this step by step.","signature":"WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL=="},
						{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}]},
					"finish_reason":"stop","logprobs":null}],
				"usage":{"prompt_tokens":3050,"completion_tokens":120,"total_tokens":3170,"prompt_tokens_details":{"cached_tokens":2000},
					"completion_tokens_details":{"reasoning_tokens":80},"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000}}`,
		},
		{
			name: "reasoning tokens estimated without thinking_tokens",
			call: plain,
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-3-7-sonnet-20250219","content":[{"type":"thinking","thinking":"Sixteen bytes!!!","signature":"s"},{"type":"text","text":"Yes."}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{"input_tokens":5,"output_tokens":30}}`,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-3-7-sonnet-20250219",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Yes.","refusal":null,"reasoning_content":"Sixteen bytes!!!",
					"thinking_blocks":[{"type":"thinking","thinking":"Sixteen bytes!!!","signature":"s"}]},"finish_reason":"stop","logprobs":null}],
				"usage":{"prompt_tokens":5,"completion_tokens":30,"total_tokens":35,"completion_tokens_details":{"reasoning_tokens":4}}}`,
		},
		{
			name: "max_tokens is length", call: plain,
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Once upon"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Once upon","refusal":null},"finish_reason":"length","logprobs":null}],
				"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		},
		{
			name: "a refusal is content_filter", call: plain,
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber","explanation":null},"usage":{"input_tokens":15,"output_tokens":1}}`,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5",
				"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null},"finish_reason":"content_filter","logprobs":null}],
				"usage":{"prompt_tokens":15,"completion_tokens":1,"total_tokens":16}}`,
		},
		{
			name: "JSON mode: the format tool's input is the content", call: jsonMode,
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_9","name":"json_tool_call","input":{"name":"Ada","born":1815}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":20}}`,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5",
				"choices":[{"index":0,"message":{"role":"assistant","content":"{\"name\":\"Ada\",\"born\":1815}","refusal":null},"finish_reason":"stop","logprobs":null}],
				"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}`,
		},
		{
			name: "JSON mode: a client tool called instead stays a tool call", call: jsonMode, body: toolAnswer,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5-20250929",
				"choices":[{"index":0,"message":{"role":"assistant","content":"I'll check the weather.","refusal":null,"tool_calls":[
					{"id":"toolu_01A09q90qw90lq917835lq9","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"San Francisco, CA\",\"unit\":\"celsius\"}"}},
					{"id":"toolu_01B","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":"tool_calls","logprobs":null}],
				"usage":{"prompt_tokens":384,"completion_tokens":92,"total_tokens":476}}`,
		},
		{
			name: "no model in the answer: the deployment's", call: plain,
			body: `{"type":"message","role":"assistant","content":[{"type":"text","text":"Hi"},{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}],"stop_reason":"pause_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"finish_reason":"stop","logprobs":null}],
				"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
		},
		{
			name: "a model and stop_reason not strings are passed over", call: plain,
			body: `{"model":5,"content":[{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"web_search_tool_result_error"}},{"type":"text","text":"Hi","citations":7}],"stop_reason":7,"usage":{"input_tokens":2,"output_tokens":null,"service_tier":1}}`,
			want: `{"id":"*","object":"chat.completion","created":"*","model":"claude-sonnet-4-5",
				"choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"finish_reason":"stop","logprobs":null}],
				"usage":{"prompt_tokens":2,"total_tokens":2}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := answerJSON(t, tc.call, tc.body)
			if diff := cmp.Diff(decode(t, tc.want), got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnswerUnreadable(t *testing.T) {
	call := &Call{provider: "vertex_ai", model: "claude-sonnet-4-5"}
	for _, body := range []string{
		``,
		`[]`,
		`{"type":"message","content":"Hello"}`,
		`{"type":"message"}`,
		`{"type":"message","content":[{"type":"text","text":7}]}`,
		`{"type":"message","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}`,
		`{"type":"message","content":[{"type":"thinking"}]}`,
		`{"type":"message","content":[],"usage":{"input_tokens":-1}}`,
		`{"type":"message","content":[1]}`,
		`{"type":"message","content":null}`,
		`{"type":"message","content":[{"type":"tool_use","id":1,"name":"f","input":{}}]}`,
		`{"type":"message","content":[{"type":"tool_use","id":"t","input":{}}]}`,
		`{"type":"message","content":[{"type":"thinking","thinking":{}}]}`,
		`{"type":"message","content":[],"usage":"x"}`,
		`{"type":"message","content":[],"usage":{"output_tokens":1.5}}`,
		`{"type":"message","content":[],"usage":{"output_tokens_details":{"thinking_tokens":-2}}}`,
		`{"type":"message","content":[{"type":"text","text":"a"}]`,
		`{"model":5,"content":[{"type":"text","text":7}]}`,
	} {
		_, err := call.Answer([]byte(body))
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Provider != "vertex_ai" || !strings.HasPrefix(pe.Message, "unreadable answer") {
			t.Errorf("%s: %v, want an unreadable answer from vertex_ai", body, err)
		}
	}
}

func TestAnswerEscapes(t *testing.T) {
	// The answer's bytes as the client reads them: compact JSON, content
	// escaped as encoding/json escapes it.
	ans, err := (&Call{provider: Name, model: "m"}).Answer([]byte(`{"model":"m","content":[{"type":"text","text":"a \"quoted\" <b>\n"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ans.Body)
	if !strings.Contains(string(b), `"content":"a \"quoted\" \u003cb\u003e\n"`) {
		t.Errorf("%s", b)
	}
}
