package anthropic

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// translate parses an OpenAI chat body and translates it for model
// claude-sonnet-4-5 (opts may change it).
func translate(t *testing.T, body string, opts ...func(*Options)) (*Call, error) {
	t.Helper()
	req, err := oai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	o := Options{Model: "claude-sonnet-4-5", Drop: providers.NewDropParams(Name, config.Deployment{ModelName: "claude"})}
	for _, f := range opts {
		f(&o)
	}
	return NewCall(req, o)
}

func dropping(o *Options) {
	drop := true
	o.Drop = providers.NewDropParams(Name, config.Deployment{ModelName: "claude", Params: config.Params{DropParams: &drop}})
}

type translationCase struct {
	name string
	body string
	opts []func(*Options)
	want string
}

// translationCases are TestRequestTranslation's cases.
var translationCases = []translationCase{
	{
		name: "system and developer messages become system blocks; default max_tokens",
		body: `{"model":"claude","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"developer","content":[{"type":"text","text":"Answer in French."}]}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,
				"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Answer in French."}],
				"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
	},
	{
		name: "consecutive turns of one role are merged; empty texts left out",
		body: `{"model":"claude","messages":[{"role":"user","content":"One"},{"role":"user","content":[{"type":"text","text":"Two"},{"type":"text","text":""}]},{"role":"assistant","content":"A"},{"role":"assistant","content":""},{"role":"assistant","content":"B"},{"role":"user","content":"Three"}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[
				{"role":"user","content":[{"type":"text","text":"One"},{"type":"text","text":"Two"}]},
				{"role":"assistant","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},
				{"role":"user","content":[{"type":"text","text":"Three"}]}]}`,
	},
	{
		name: "images by URL and by data URI; a PDF file",
		body: `{"model":"claude","messages":[{"role":"user","content":[
				{"type":"text","text":"What is this?"},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"high"}},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
				{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0x","filename":"a.pdf"}},
				{"type":"file","file":{"file_data":"JVBERi0y","filename":"b.PDF"}}]}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[
				{"type":"text","text":"What is this?"},
				{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}},
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0y"}}]}]}`,
	},
	{
		name: "tool calls become tool_use, tool results one user turn with the next user text",
		body: `{"model":"claude","messages":[
				{"role":"user","content":"Weather in Paris and Rome?"},
				{"role":"assistant","content":"Let me look.","tool_calls":[
					{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":""}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"18C"},
				{"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"21C"}]},
				{"role":"user","content":"Thanks"}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
					{"type":"function","function":{"name":"now","strict":true}}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[
				{"role":"user","content":[{"type":"text","text":"Weather in Paris and Rome?"}]},
				{"role":"assistant","content":[{"type":"text","text":"Let me look."},
					{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
					{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},
					{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"21C"}]},
					{"type":"text","text":"Thanks"}]}],
				"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
					{"name":"now","input_schema":{"type":"object","properties":{}},"strict":true}]}`,
	},
	{
		name: "tool_choice required is any; parallel_tool_calls false disables parallel use",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":false}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
	},
	{
		name: "a named function is a tool choice",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"f"}}`,
	},
	{
		name: "tool_choice none; parallel_tool_calls alone is auto",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","parallel_tool_calls":true}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`,
	},
	{
		name: "parallel_tool_calls alone",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":true}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":false}}`,
	},
	{
		name: "no tools, no tool choice",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"tool_choice":"auto","parallel_tool_calls":false}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	},
	{
		name: "sampling, stop sequences, user, stream",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"max_tokens":100,"max_completion_tokens":300,"temperature":0.2,"top_p":0.9,"top_k":40,"stop":["\n\nHuman:","END"],"user":"user-7f3a","stream":true,"stream_options":{"include_usage":true},"metadata":{"tags":["a"]}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":300,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"stream":true,"temperature":0.2,"top_p":0.9,"top_k":40,"stop_sequences":["\n\nHuman:","END"],"metadata":{"user_id":"user-7f3a"}}`,
	},
	{
		name: "a stop string; a user that is an e-mail address is not sent; Claude 3's default",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"stop":"END","user":"ann@example.com"}`,
		opts: []func(*Options){func(o *Options) { o.Model = "claude-3-haiku-20240307" }},
		want: `{"model":"claude-3-haiku-20240307","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stop_sequences":["END"]}`,
	},
	{
		name: "response_format json_schema is a forced tool",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"person","description":"A person","schema":{"type":"object","properties":{"name":{"type":"string"}}},"strict":true}}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"json_tool_call","description":"A person","input_schema":{"type":"object","properties":{"name":{"type":"string"}}}}],
				"tool_choice":{"type":"tool","name":"json_tool_call"}}`,
	},
	{
		name: "response_format json_object is a forced tool taking any object, beside the client's tools",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","response_format":{"type":"json_object"}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}},{"name":"json_tool_call","input_schema":{"type":"object","additionalProperties":true,"properties":{}}}],
				"tool_choice":{"type":"tool","name":"json_tool_call"}}`,
	},
	{
		name: "response_format text is nothing",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	},
	{
		name: "reasoning_effort is a thinking budget, added to the default max_tokens; JSON mode is not forced with thinking",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"reasoning_effort":"medium","response_format":{"type":"json_object"}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":10240,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
				"tools":[{"name":"json_tool_call","input_schema":{"type":"object","additionalProperties":true,"properties":{}}}],
				"thinking":{"type":"enabled","budget_tokens":2048}}`,
	},
	{
		name: "reasoning_effort with max_completion_tokens",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","max_completion_tokens":5000}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":5000,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"thinking":{"type":"enabled","budget_tokens":4096}}`,
	},
	{
		name: "reasoning_effort low and minimal are Anthropic's smallest budget; none is no thinking",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"reasoning_effort":"minimal"}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":9216,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
	},
	{
		name: "the client's own thinking wins over reasoning_effort",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"reasoning_effort":"low","thinking":{"type":"enabled","budget_tokens":3000}}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":11192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"thinking":{"type":"enabled","budget_tokens":3000}}`,
	},
	{
		name: "the client's thinking turned off: no budget, a small max_tokens",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"thinking":{"type":"disabled"},"max_tokens":10}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"thinking":{"type":"disabled"}}`,
	},
	{
		name: "thinking blocks are sent back first; a reasoning_content alone is not",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"},
				{"role":"assistant","content":"I'll check.","reasoning_content":"Let me think","thinking_blocks":[{"type":"thinking","thinking":"Let me think","signature":"EqQBCgIYAhIM"},{"type":"redacted_thinking","data":"EmwKAhgBEgy3"}],
				 "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"done"},
				{"role":"assistant","content":"Done.","reasoning_content":"unsigned"}],
				"tools":[{"type":"function","function":{"name":"f"}}],"reasoning_effort":"low"}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":9216,"messages":[
				{"role":"user","content":[{"type":"text","text":"x"}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"Let me think","signature":"EqQBCgIYAhIM"},{"type":"redacted_thinking","data":"EmwKAhgBEgy3"},
					{"type":"text","text":"I'll check."},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"done"}]},
				{"role":"assistant","content":[{"type":"text","text":"Done."}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
	},
	{
		name: "cache_control on a system message, a part, a tool message and a tool",
		body: `{"model":"claude","messages":[
				{"role":"system","content":"Long instructions","cache_control":{"type":"ephemeral"}},
				{"role":"user","content":[{"type":"text","text":"Long document","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"Question"}]},
				{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"t1","content":"result","cache_control":{"type":"ephemeral"}}],
				"tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,
				"system":[{"type":"text","text":"Long instructions","cache_control":{"type":"ephemeral"}}],
				"messages":[
				{"role":"user","content":[{"type":"text","text":"Long document","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"Question"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"result","cache_control":{"type":"ephemeral"}}]}],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}]}`,
	},
	{
		name: "an assistant refusal is its text",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"refusal":"I can't help with that."},{"role":"user","content":"ok"}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},
				{"role":"assistant","content":[{"type":"text","text":"I can't help with that."}]},{"role":"user","content":[{"type":"text","text":"ok"}]}]}`,
	},
	{
		name: "Claude on Vertex AI: anthropic_version in the body, no model",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"stream":true}`,
		opts: []func(*Options){func(o *Options) { o.Model, o.Version = "claude-sonnet-4-5@20250929", VertexVersion }},
		want: `{"max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"anthropic_version":"vertex-2023-10-16"}`,
	},
	{
		name: "drop_params drops what Anthropic cannot honour",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"n":2,"seed":7,"logprobs":true,"top_logprobs":2,"frequency_penalty":0.5,"presence_penalty":0.5,"logit_bias":{"50256":-100},"stop":["  ","END"],
				"tools":[{"type":"custom","custom":{"name":"grammar"}},{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`,
		opts: []func(*Options){dropping},
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stop_sequences":["END"],
				"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}]}`,
	},
	{
		name: "a tool result without content keeps its empty content",
		body: `{"model":"claude","messages":[{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":""},{"role":"tool","tool_call_id":"t1","content":[{"type":"text","text":""}]}]}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":""},{"type":"tool_result","tool_use_id":"t1","content":[]}]}]}`,
	},
	{
		name: "the request's own drop_params",
		body: `{"model":"claude","messages":[{"role":"user","content":"x"}],"seed":7,"drop_params":true}`,
		want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	},
}

func TestRequestTranslation(t *testing.T) {
	for _, tc := range translationCases {
		t.Run(tc.name, func(t *testing.T) {
			call, err := translate(t, tc.body, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := providertest.DiffJSON(tc.want, call.Body); diff != "" {
				t.Errorf("body (-want +got):\n%s\n%s", diff, call.Body)
			}
		})
	}
}

func TestRequestKeepsTextAsWritten(t *testing.T) {
	call, err := translate(t, `{"model":"claude","messages":[{"role":"user","content":"a <b> & \"c\""}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"text":"a <b> & \"c\""`; !strings.Contains(string(call.Body), want) {
		t.Errorf("body %s, want %s in it", call.Body, want)
	}
	if call.Body[len(call.Body)-1] != '}' {
		t.Errorf("body %q does not end with its object", call.Body)
	}
}

func TestRequestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, body, param, code, message string
	}{
		{"n", `{"model":"claude","messages":[{"role":"user","content":"x"}],"n":2,"seed":1}`, "n", "unsupported_parameter", "Neither are: 'seed'"},
		{"logprobs", `{"model":"claude","messages":[{"role":"user","content":"x"}],"logprobs":true}`, "logprobs", "unsupported_parameter", "drop_params"},
		{"a member sluice does not model", `{"model":"claude","messages":[{"role":"user","content":"x"}],"logit_bias":{"1":2}}`, "logit_bias", "unsupported_parameter", "provider anthropic"},
		{"a custom tool", `{"model":"claude","messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"g"}}]}`, "tools[0]", "unsupported_parameter", ""},
		{"a white-space stop", `{"model":"claude","messages":[{"role":"user","content":"x"}],"stop":"\n"}`, "stop", "unsupported_parameter", ""},
		{"temperature above 1", `{"model":"claude","messages":[{"role":"user","content":"x"}],"temperature":1.5}`, "temperature", "invalid_value", "0 to 1"},
		{"unknown reasoning effort", `{"model":"claude","messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"}`, "reasoning_effort", "invalid_value", "'high'"},
		{"max tokens within the thinking budget", `{"model":"claude","messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","max_tokens":4096}`, "max_tokens", "invalid_value", "thinking budget of 4096"},
		{"thinking not an object", `{"model":"claude","messages":[{"role":"user","content":"x"}],"thinking":true}`, "thinking", "invalid_value", ""},
		{"top_k not a count", `{"model":"claude","messages":[{"role":"user","content":"x"}],"top_k":-1}`, "top_k", "invalid_value", ""},
		{"a thinking budget below 0", `{"model":"claude","messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":-5}}`, "thinking.budget_tokens", "invalid_value", ""},
		{"a redacted thinking block without data", `{"model":"claude","messages":[{"role":"assistant","content":"a","thinking_blocks":[{"type":"redacted_thinking","data":5}]}]}`, "messages[0].thinking_blocks[0]", "invalid_value", "data"},
		{"a thinking block of another type", `{"model":"claude","messages":[{"role":"assistant","content":"a","thinking_blocks":[{"type":7}]}]}`, "messages[0].thinking_blocks[0].type", "invalid_value", ""},
		{"arguments not an object", `{"model":"claude","messages":[{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments", "invalid_value", "JSON object"},
		{"arguments not JSON", `{"model":"claude","messages":[{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{city"}}]}]}`, "messages[0].tool_calls[0].function.arguments", "invalid_value", ""},
		{"an image of an unknown type", `{"model":"claude","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url", "invalid_value", "image/tiff"},
		{"an image data URI not base64", `{"model":"claude","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url", "invalid_value", "base64"},
		{"audio", `{"model":"claude","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages[0].content[0].type", "invalid_value", "input_audio"},
		{"a file by id", `{"model":"claude","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[0].file.file_id", "invalid_value", "file_data"},
		{"a file that is not a PDF", `{"model":"claude","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/csv;base64,YQ==","filename":"a.csv"}}]}]}`, "messages[0].content[0].file.file_data", "invalid_value", "PDF"},
		{"a function message", `{"model":"claude","messages":[{"role":"function","name":"f","content":"x"}]}`, "messages[0].role", "invalid_value", "tool"},
		{"a thinking block without signature", `{"model":"claude","messages":[{"role":"assistant","content":"a","thinking_blocks":[{"type":"thinking","thinking":"t"}]}]}`, "messages[0].thinking_blocks[0]", "invalid_value", "signature"},
		{"thinking blocks not an array", `{"model":"claude","messages":[{"role":"assistant","content":"a","thinking_blocks":{}}]}`, "messages[0].thinking_blocks", "invalid_value", ""},
		{"a cache_control not an object", `{"model":"claude","messages":[{"role":"user","content":"a","cache_control":"ephemeral"}]}`, "messages[0].cache_control", "invalid_value", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := translate(t, tc.body)
			var ae *api.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v, want an *api.Error", err)
			}
			if ae.Status != http.StatusBadRequest || ae.Param != tc.param || ae.Code != tc.code || !strings.Contains(ae.Message, tc.message) {
				t.Errorf("error %d %s param %q: %s; want 400 %s param %q containing %q", ae.Status, ae.Code, ae.Param, ae.Message, tc.code, tc.param, tc.message)
			}
		})
	}
}

func TestDefaultMaxTokens(t *testing.T) {
	for model, want := range map[string]int64{
		"claude-3-haiku-20240307":    4096,
		"claude-3-opus-20240229":     4096,
		"claude-3-5-haiku-20241022":  8192,
		"claude-3-7-sonnet-20250219": 8192,
		"claude-sonnet-4-5@20250929": 8192,
		"claude-opus-4-1":            8192,
		"Claude-3-Sonnet-20240229":   4096,
	} {
		if got := DefaultMaxTokens(model); got != want {
			t.Errorf("%s: %d, want %d", model, got, want)
		}
	}
}
