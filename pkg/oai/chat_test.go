package oai

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/api"
)

func ptr[T any](v T) *T { return &v }

func TestParseChatRequestTypedView(t *testing.T) {
	body := `{
	  "model": "gpt-4o",
	  "messages": [
	    {"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
	    {"role": "user", "name": "ann", "content": [
	      {"type": "text", "text": "What is this?"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "low"}},
	      {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
	      {"type": "file", "file": {"file_data": "JVBERi0", "filename": "a.pdf"}}
	    ]},
	    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"q\":1}"}}]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
	    {"role": "assistant", "content": "A cat.", "reasoning_content": "It purrs."}
	  ],
	  "stream": true, "stream_options": {"include_usage": true},
	  "n": 2, "max_tokens": 100, "max_completion_tokens": 50, "stop": "END",
	  "temperature": 0.5, "top_p": 1, "frequency_penalty": -1.5, "presence_penalty": 0, "seed": -7,
	  "logprobs": true, "top_logprobs": 3, "reasoning_effort": "low", "user": "u-1",
	  "tools": [{"type": "function", "function": {"name": "look", "description": "Looks.", "parameters": {"type": "object"}, "strict": true}}],
	  "tool_choice": {"type": "function", "function": {"name": "look"}},
	  "parallel_tool_calls": false,
	  "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": true}},
	  "logit_bias": {"50256": -100}, "top_k": 5, "metadata": null
	}`
	r, err := ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	wantMessages := []Message{
		{Role: "developer", Parts: []Part{{Type: "text", Text: "Be terse."}}},
		{Role: "user", Name: "ann", Parts: []Part{
			{Type: "text", Text: "What is this?"},
			{Type: "image_url", ImageURL: "data:image/png;base64,iVBOR", ImageDetail: "low"},
			{Type: "input_audio", Audio: &InputAudio{Data: "UklGR", Format: "wav"}},
			{Type: "file", File: &File{Data: "JVBERi0", Name: "a.pdf"}},
		}},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "look", Arguments: `{"q":1}`}}}},
		{Role: "tool", ToolCallID: "call_1", Content: "a cat"},
		{Role: "assistant", Content: "A cat.", ReasoningContent: "It purrs."},
	}
	want := &ChatRequest{
		Model:  "gpt-4o",
		Stream: true, IncludeUsage: true, N: 2, MaxTokens: 100, MaxCompletionTokens: 50, Stop: []string{"END"},
		Temperature: ptr(0.5), TopP: ptr(1.0), FrequencyPenalty: ptr(-1.5), PresencePenalty: ptr(0.0), Seed: ptr(int64(-7)),
		Logprobs: true, TopLogprobs: ptr(3), ReasoningEffort: "low", User: "u-1",
		Tools:             []Tool{{Type: "function", Function: Function{Name: "look", Description: "Looks.", Parameters: json.RawMessage(`{"type": "object"}`), Strict: ptr(true)}}},
		ToolChoice:        &ToolChoice{Mode: ToolChoiceFunction, Function: "look"},
		ParallelToolCalls: ptr(false),
		ResponseFormat:    &ResponseFormat{Type: "json_schema", JSONSchema: &JSONSchema{Name: "answer", Schema: json.RawMessage(`{"type": "object"}`), Strict: ptr(true)}},
		Others:            []string{"logit_bias", "top_k"},
	}
	opts := cmp.Options{
		cmpopts.IgnoreUnexported(ChatRequest{}),
		cmpopts.IgnoreFields(ChatRequest{}, "RawMessages"),
		cmpopts.IgnoreFields(Message{}, "Raw"), cmpopts.IgnoreFields(Part{}, "Raw"),
		cmpopts.IgnoreFields(Tool{}, "Raw"), cmpopts.IgnoreFields(ToolChoice{}, "Raw"),
	}
	if diff := cmp.Diff(want, r, opts); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMessages, r.Messages(), opts); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if got := r.MaxOutputTokens(); got != 50 {
		t.Errorf("MaxOutputTokens %d", got)
	}
	if got := r.Messages()[1].Text(); got != "What is this?" {
		t.Errorf("Text %q", got)
	}
	if diff := cmp.Diff([]string{"logit_bias"}, r.OthersExcept("top_k")); diff != "" {
		t.Errorf("OthersExcept: %s", diff)
	}
	if x := r.Extras("top_k", "absent"); string(x["top_k"]) != "5" || len(x) != 1 {
		t.Errorf("Extras %v", x)
	}
	if !strings.HasPrefix(string(r.RawMessages), `[`) || !json.Valid(r.RawMessages) {
		t.Errorf("RawMessages %s", r.RawMessages)
	}
}

func TestParseChatRequestRefusesNamingTheField(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		body, param, code string
	}{
		{``, "", "invalid_json"},
		{`[]`, "", "invalid_json"},
		{`{"model":"m",`, "", "invalid_json"},
		{`{` + msgs + `}`, "model", "missing_required_parameter"},
		{`{"model":"","messages":[]}`, "model", "invalid_value"},
		{`{"model":"m"}`, "messages", "missing_required_parameter"},
		{`{"model":"m","messages":[]}`, "messages", "invalid_value"},
		{`{"model":"m","messages":{}}`, "messages", "invalid_value"},
		{`{"model":"m","messages":["hi"]}`, "messages[0]", "invalid_value"},
		{`{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"bot","content":"hi"}]}`, "messages[0].role", "invalid_value"},
		{`{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"user","content":1}]}`, "messages[0].content", "invalid_value"},
		{`{"model":"m","messages":[{"role":"user","content":[]}]}`, "messages[0].content", "invalid_value"},
		{`{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}`, "messages[0].content", "invalid_value"},
		{`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[1].content[0].image_url.url", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","detail":"max"}}]}]}`, "messages[0].content[0].image_url.detail", "invalid_value"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"user","content":[{"text":"a"}]}]}`, "messages[0].content[0].type", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x"}}]}]}`, "messages[0].content[0].input_audio.format", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a"}}]}]}`, "messages[0].content[0].file", "invalid_value"},
		{`{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id", "missing_required_parameter"},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name", "missing_required_parameter"},
		{`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 31) + `{"role":"bot","content":"a"}]}`, "messages[31].role", "invalid_value"},
		{`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 40) + `{"role":"user"}]}`, "messages[40].content", "missing_required_parameter"},
		{`{"model":"m",` + msgs + `,"stream":"yes"}`, "stream", "invalid_value"},
		{`{"model":"m",` + msgs + `,"stream_options":{"include_usage":true}}`, "stream_options", "invalid_value"},
		{`{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "invalid_value"},
		{`{"model":"m",` + msgs + `,"n":0}`, "n", "invalid_value"},
		{`{"model":"m",` + msgs + `,"n":1.5}`, "n", "invalid_value"},
		{`{"model":"m",` + msgs + `,"n":129}`, "n", "invalid_value"},
		{`{"model":"m",` + msgs + `,"max_tokens":0}`, "max_tokens", "invalid_value"},
		{`{"model":"m",` + msgs + `,"max_completion_tokens":"5"}`, "max_completion_tokens", "invalid_value"},
		{`{"model":"m",` + msgs + `,"temperature":2.5}`, "temperature", "invalid_value"},
		{`{"model":"m",` + msgs + `,"top_p":"high"}`, "top_p", "invalid_value"},
		{`{"model":"m",` + msgs + `,"presence_penalty":-3}`, "presence_penalty", "invalid_value"},
		{`{"model":"m",` + msgs + `,"top_logprobs":21}`, "top_logprobs", "invalid_value"},
		{`{"model":"m",` + msgs + `,"stop":["a","b","c","d","e"]}`, "stop", "invalid_value"},
		{`{"model":"m",` + msgs + `,"stop":[1]}`, "stop", "invalid_value"},
		{`{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"has space"}}]}`, "tools[0].function.name", "invalid_value"},
		{`{"model":"m",` + msgs + `,"tools":[{"type":"function"}]}`, "tools[0].function", "missing_required_parameter"},
		{`{"model":"m",` + msgs + `,"tools":[{"type":"retrieval"}]}`, "tools[0].type", "invalid_value"},
		{`{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", "invalid_value"},
		{`{"model":"m",` + msgs + `,"tool_choice":"any"}`, "tool_choice", "invalid_value"},
		{`{"model":"m",` + msgs + `,"tool_choice":"required"}`, "tool_choice", "invalid_value"},
		{`{"model":"m",` + msgs + `,"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice.function.name", "invalid_value"},
		{`{"model":"m",` + msgs + `,"response_format":{"type":"xml"}}`, "response_format.type", "invalid_value"},
		{`{"model":"m",` + msgs + `,"response_format":{"type":"json_schema"}}`, "response_format.json_schema", "missing_required_parameter"},
		{`{"model":"m",` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name", "missing_required_parameter"},
		{`{"model":"m",` + msgs + `,"user":5}`, "user", "invalid_value"},
		{`{"model":"m",` + msgs + `,"mock_response":{"a":1}}`, "mock_response", "invalid_value"},
		{`{"model":"m",` + msgs + `,"top_k":1,"top_k":2}`, "top_k", "invalid_value"},
		{`{"model":"m",` + msgs + `,"stream":true,"stream":false}`, "stream", "invalid_value"},
	} {
		_, err := ParseChatRequest([]byte(tc.body))
		var ae *api.Error
		if !errors.As(err, &ae) {
			t.Errorf("%s: error %v, want an *api.Error", tc.body, err)
			continue
		}
		if ae.Status != 400 || ae.Param != tc.param || ae.Code != tc.code {
			t.Errorf("%s: %d param %q code %q (%s), want param %q code %q", tc.body, ae.Status, ae.Param, ae.Code, ae.Message, tc.param, tc.code)
		}
	}
}

// chatMemberOf reads chatMemberNames backwards, and knows no other name.
func TestChatMemberOf(t *testing.T) {
	for i, name := range chatMemberNames {
		if m, ok := chatMemberOf([]byte(name)); !ok || m != chatMember(i) {
			t.Errorf("chatMemberOf(%q) = %d, %v; want %d", name, m, ok, i)
		}
	}
	for _, name := range []string{"", "Model", "top_k", "logit_bias", "stream_option"} {
		if m, ok := chatMemberOf([]byte(name)); ok {
			t.Errorf("chatMemberOf(%q) = %d, want none", name, m)
		}
	}
}

// The members are read in chatMember order, whatever the body's: the
// problem reported is the first in that order, and stream_options is read
// after stream, tool_choice after tools.
func TestParseChatRequestMemberOrder(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ body, param string }{
		{`{"user":5,"temperature":3,"model":"m",` + msgs + `,"stream":"yes"}`, "stream"},
		{`{"drop_params":1,"model":"m",` + msgs + `,"n":0,"max_tokens":0}`, "n"},
		{`{"seed":"x","tools":{},"model":"m",` + msgs + `}`, "tools"},
		{`{"stream_options":{"include_usage":true},"stream":true,"model":"m",` + msgs + `}`, ""},
		{`{"tool_choice":{"type":"function","function":{"name":"f"}},"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, ""},
	} {
		_, err := ParseChatRequest([]byte(tc.body))
		var ae *api.Error
		switch {
		case tc.param == "" && err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.param != "" && (!errors.As(err, &ae) || ae.Param != tc.param):
			t.Errorf("%s: %v, want a 400 naming %q", tc.body, err, tc.param)
		}
	}
}

// validFunctionName is the pattern OpenAI documents for a function's name.
func FuzzValidFunctionName(f *testing.F) {
	pattern := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, s := range []string{"", "f", "get_weather-2", "has space", "a\n", "é", "x.y", strings.Repeat("a", 64), strings.Repeat("a", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validFunctionName(s), pattern.MatchString(s); got != want {
			t.Fatalf("validFunctionName(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

// A nested object's path, put together only for an error, names every
// step with its index.
func TestParseChatRequestNestedPaths(t *testing.T) {
	user := `{"role":"user","content":"a"}`
	for _, tc := range []struct{ body, message string }{
		{`{"model":"m","messages":[` + user + `,{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"image_url","image_url":{"detail":"low"}}]}]}`,
			"messages[1].content[2].image_url.url"},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"arguments":"{}"}}]}]}`,
			"messages[0].tool_calls[1].function.name"},
		{`{"model":"m","messages":[` + user + `],"tools":[{"type":"custom"},{"type":"function","function":{"name":"a b"}}]}`,
			"tools[1].function.name"},
		{`{"model":"m","messages":[` + user + `,{"role":"user","content":[{"type":"file","file":{}}]}]}`,
			"'messages[1].content[0].file' must have a 'file_id' or 'file_data'."},
		{`{"model":"m","messages":[` + user + `,{"role":"user","content":[{"type":"input_audio","input_audio":[]}]}]}`,
			"Invalid type for 'messages[1].content[0].input_audio': expected an object with 'data' and 'format'."},
	} {
		_, err := ParseChatRequest([]byte(tc.body))
		var ae *api.Error
		if !errors.As(err, &ae) || (ae.Param != tc.message && ae.Message != tc.message) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.message)
		}
	}
}

func TestChatForward(t *testing.T) {
	for _, tc := range []struct {
		name, body   string
		includeUsage bool
		want         string
		same         bool // the body itself, not a copy
	}{
		{"unchanged", `{"model":"m","messages":[{"role":"user","content":"hi"}],"x-unknown":{"kept":[1,2]}}`, true,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"x-unknown":{"kept":[1,2]}}`, true},
		{"model rewritten, unknown members byte for byte", `{ "messages" : [{"role":"user","content":"hi"}], "model" : "alias", "logit_bias" : {"1": -1.50} }`, false,
			`{ "messages" : [{"role":"user","content":"hi"}], "model" : "m", "logit_bias" : {"1": -1.50} }`, false},
		{"stream asks for usage", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true,
			`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"stream_options kept, include_usage set", `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"messages":[{"role":"user","content":"hi"}]}`, true,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false},"messages":[{"role":"user","content":"hi"}]}`, false},
		{"stream_options null replaced", `{"model":"m","stream":true,"stream_options":null,"messages":[{"role":"user","content":"hi"}]}`, true,
			`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"usage already asked", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true},
		{"not a stream", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true},
		{"LiteLLM's members removed", `{"drop_params":true,"model":"m","messages":[{"role":"user","content":"hi"}],"mock_response":"x"}`, false,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
		{"LiteLLM's null members removed too", `{"model":"m","messages":[{"role":"user","content":"hi"}],"mock_response":null}`, false,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseChatRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got := r.Forward("m", tc.includeUsage)
			if string(got) != tc.want {
				t.Errorf("Forward:\n got %s\nwant %s", got, tc.want)
			}
			if same := len(got) > 0 && &got[0] == &r.Raw()[0]; same != tc.same {
				t.Errorf("returned the body itself: %v, want %v", same, tc.same)
			}
		})
	}
}

func FuzzParseChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto"}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a"],"n":2,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"x"}},"mock_response":"y","drop_params":true}`,
		`{"model":"m","messages":[{"role":"bogus","content":"hi"}],"x":tru}`,
		`{"messages":[{"role":"user","content":"a\x"}],"model":"m"}`,
		`{"messages":[{"role":"user","content":"hi"},],"model":"m"}`,
		`{"messages":[{"role":"user"}],"messages":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseChatRequest(body)
		checkMessagesAgree(t, body)
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			// Invalid JSON (or JSON not an object) is reported as such
			// before any member's problem, though the walk checks the
			// messages as it goes.
			if (ae.Code == "invalid_json") != !isObject(body) {
				t.Fatalf("error %v (%s) for %q, json.Valid %v", err, ae.Code, body, json.Valid(body))
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if r.Model == "" || len(r.Messages()) == 0 {
			t.Fatalf("accepted without model or messages: %q", body)
		}
		checkPlainAgrees(t, body, r)
		// What is forwarded is JSON with the model set and nothing of the
		// client's lost but LiteLLM's own members.
		for _, usage := range []bool{false, true} {
			out := r.Forward("gpt-x", usage)
			var got, in map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("Forward gave invalid JSON %q from %q", out, body)
			}
			json.Unmarshal(body, &in)
			if got["model"] != "gpt-x" {
				t.Fatalf("model %v", got["model"])
			}
			delete(in, "model")
			delete(in, "mock_response")
			delete(in, "drop_params")
			delete(got, "model")
			if usage && r.Stream {
				if opts, _ := got["stream_options"].(map[string]any); opts["include_usage"] != true {
					t.Fatalf("stream_options %v", got["stream_options"])
				}
				delete(in, "stream_options")
				delete(got, "stream_options")
			}
			if diff := cmp.Diff(in, got); diff != "" {
				t.Fatalf("Forward changed the body (-in +out):\n%s\n%q", diff, body)
			}
		}
	})
}

// checkPlainAgrees holds a body's parse r to the parse of the same body
// with a null seed added: a body of model and messages only skips the reads
// of the other members (ParseChatRequest), the added null makes the parse
// run them; the typed views must agree.
func checkPlainAgrees(t *testing.T, body []byte, r *ChatRequest) {
	t.Helper()
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return
	}
	if _, ok := top["seed"]; ok {
		return
	}
	end := bytes.LastIndexByte(body, '}')
	slowBody := append(append(append([]byte{}, body[:end]...), `,"seed":null`...), body[end:]...)
	slow, err := ParseChatRequest(slowBody)
	if err != nil {
		t.Fatalf("%q refused with a null seed added: %v", body, err)
	}
	if diff := cmp.Diff(slow, r, cmpopts.IgnoreUnexported(ChatRequest{})); diff != "" {
		t.Fatalf("the parse of %q and of it with a null seed differ (-slow +got):\n%s", body, diff)
	}
}

// TestParseChatRequestPlain holds the parse of a body of model and messages
// only (its other members not read) to the full parse.
func TestParseChatRequestPlain(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi."}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"model":"m"} `,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"logit_bias":{"1":2}}`,
	} {
		r, err := ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if r.Model == "" || r.RawMessages == nil {
			t.Fatalf("%s: model %q, messages %s", body, r.Model, r.RawMessages)
		}
		checkPlainAgrees(t, []byte(body), r)
	}
}

// checkMessagesAgree holds the parse's check-only walk of messages to the
// decoding one (what ChatRequest.Messages runs): the same verdict and the
// same error on every valid body.
func checkMessagesAgree(t *testing.T, body []byte) {
	t.Helper()
	if !json.Valid(body) {
		return
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return
	}
	msgs, ok := top["messages"]
	if !ok || string(msgs) == "null" {
		return
	}
	// The walks read the value as a slice of the body, as the parse hands it.
	_, checkErr := parseMessages(msgs, false)
	decoded, decodeErr := parseMessages(msgs, true)
	if (checkErr == nil) != (decodeErr == nil) || (checkErr != nil && checkErr.Error() != decodeErr.Error()) {
		t.Fatalf("check-only walk says %v, decoding walk %v, for %s", checkErr, decodeErr, msgs)
	}
	if decodeErr == nil && len(decoded) == 0 {
		t.Fatalf("decoded no messages from %s", msgs)
	}
	// The body's walk checks them as it crosses them, what follows them
	// unread: the same verdict, their end, and JSON.
	rest := append(append([]byte{}, msgs...), `,"x":"}"}`...)
	size, valid, walkErr := checkMessages(rest)
	if (walkErr == nil) != (checkErr == nil) || (walkErr != nil && walkErr.Error() != checkErr.Error()) {
		t.Fatalf("the body's walk says %v, the check-only walk %v, for %s", walkErr, checkErr, msgs)
	}
	if walkErr == nil && (size != len(msgs) || !valid) {
		t.Fatalf("the body's walk ends the messages at %d (valid %v), not %d: %s", size, valid, len(msgs), msgs)
	}
}

// isObject reports whether the JSON document doc is an object.
func isObject(doc []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(doc, &m) == nil && m != nil
}

// TestMessagesCheckAndDecodeAgree runs the two walks over the refusal
// table's bodies and the typed view's.
func TestMessagesCheckAndDecodeAgree(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":""}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"\u0000"}}]}]}`,
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":[],"refusal":1}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":7}}]}]}`,
		`{"model":"m","messages":[{"role":"us\u0065r","content":"\ud800"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":""}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"","format":"wav"}}]}]}`,
	} {
		checkMessagesAgree(t, []byte(body))
	}
}
