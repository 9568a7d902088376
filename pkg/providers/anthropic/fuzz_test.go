package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// FuzzRequest holds the request translator to its contract on any request
// the parser accepts: a 400, or a body that is JSON with
// the members the Messages API requires.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","parallel_tool_calls":false}`,
		`{"model":"m","messages":[{"role":"assistant","content":"a","thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"}],"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"t","content":"r"}],"reasoning_effort":"high","max_tokens":9000}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"stop":["a"],"user":"u","top_k":3,"thinking":{"type":"enabled","budget_tokens":1024},"stream":true}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"n":2,"drop_params":true,"logit_bias":{}}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, vertex bool) {
		req, err := oai.ParseChatRequest(body)
		if err != nil {
			return
		}
		var o []func(*Options)
		if vertex {
			o = append(o, func(o *Options) { o.Version = VertexVersion })
		}
		call, err := translate(t, string(body), o...)
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("not a 400: %#v", err)
			}
			return
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(call.Body, &got); err != nil {
			t.Fatalf("the body is not a JSON object: %v\n%s", err, call.Body)
		}
		var msgs []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(got["messages"], &msgs); err != nil {
			t.Fatalf("messages: %v\n%s", err, call.Body)
		}
		for i, m := range msgs {
			if len(m.Content) == 0 || (m.Role != "user" && m.Role != "assistant") || (i > 0 && msgs[i-1].Role == m.Role) {
				t.Fatalf("turn %d: %s with %d blocks\n%s", i, m.Role, len(m.Content), call.Body)
			}
		}
		if _, hasModel := got["model"]; hasModel == vertex || got["max_tokens"] == nil {
			t.Fatalf("model and max_tokens: %s", call.Body)
		}
		if req.Stream != bytes.Contains(call.Body, []byte(`"stream":true`)) {
			t.Fatalf("stream: %s", call.Body)
		}
	})
}

// FuzzStream holds the stream translator to its contract on any event
// stream: it never panics, every chunk it writes is JSON, and a stream it
// ends without error ends with the usage chunk and [DONE].
func FuzzStream(f *testing.F) {
	f.Add(sseDoc(toolStream...), false)
	f.Add(sseDoc(thinkingStream...), true)
	f.Add(sseDoc(toolStream[0], evt("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), false)
	f.Fuzz(func(t *testing.T, doc []byte, jsonMode bool) {
		call := &Call{provider: Name, model: "m", jsonMode: jsonMode}
		body := call.Stream(io.NopCloser(bytes.NewReader(doc))).Body
		out, err := io.ReadAll(body)
		var data []string
		rd := sse.NewReader(bytes.NewReader(out), sse.Limits{})
		for {
			ev, rerr := rd.Next()
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				t.Fatalf("the output is not an event stream: %v\n%s", rerr, out)
			}
			data = append(data, string(ev.Data))
		}
		for i, d := range data {
			if d == "[DONE]" {
				if err != nil || i != len(data)-1 {
					t.Fatalf("[DONE] at %d of %d, error %v", i, len(data), err)
				}
				continue
			}
			if !json.Valid([]byte(d)) {
				t.Fatalf("chunk %d is not JSON: %s", i, d)
			}
		}
		if err == nil && (len(data) < 3 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"usage"`)) {
			t.Fatalf("a stream ended without its usage and [DONE]: %v", data)
		}
	})
}

// FuzzAnswer holds the answer translator to its contract: JSON out, or a
// provider error.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{textAnswer, toolAnswer, thinkingAnswer} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, jsonMode bool) {
		ans, err := (&Call{provider: Name, model: "m", jsonMode: jsonMode}).Answer(body)
		if err != nil {
			return
		}
		out, _ := io.ReadAll(ans.Body)
		var cc struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   *oai.Usage        `json:"usage"`
		}
		if err := json.Unmarshal(out, &cc); err != nil || len(cc.Choices) != 1 || cc.Usage == nil {
			t.Fatalf("answer %s: %v", out, err)
		}
	})
}

// FuzzMessage holds the answer's reader to encoding/json: what it reads
// without reflection, encoding/json decodes without an error to the same;
// the rest goes to encoding/json.
func FuzzMessage(f *testing.F) {
	for _, s := range []string{
		textAnswer,
		`{"id":"m","model":"claude","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"tool_use","id":"a","name":"f","input":{"x":[1,2]}},null],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4,"output_tokens_details":{"thinking_tokens":2}}}`,
		`{"model":null,"content":null,"stop_reason":null,"usage":null}`, `{"content":[{"type":"text","text":"a\nb\u00e9"}]}`,
		`{"Content":[]}`, `{"content":[{"TEXT":"x"}]}`, `{"model":"a","model":"b"}`, `{"content":[{"type":1}]}`,
		`{"usage":{"input_tokens":-1}}`, `{"usage":{"input_tokens":1.5}}`, "{\"content\":[{\"text\":\"\xff\"}]}", `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got message
		if !jsonscan.Valid(in) || !readMessage(in, &got) {
			return
		}
		var want message
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("read %q, which encoding/json refuses: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read %q as %+v, encoding/json as %+v", in, got, want)
		}
	})
}
