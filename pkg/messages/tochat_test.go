package messages

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// TestChatBody holds the translation of a Messages request into the chat
// seam's OpenAI request, member by member.
func TestChatBody(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "text, system, sampling, stop, user",
			in: `{"model":"m","max_tokens":100,"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Be kind.","cache_control":{"type":"ephemeral"}}],
				"messages":[{"role":"user","content":"Hi"}],"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u-1"}}`,
			want: `{"model":"m","max_tokens":100,"messages":[{"role":"system","content":"Be brief.\nBe kind."},{"role":"user","content":"Hi"}],
				"temperature":0.5,"top_p":0.9,"top_k":40,"stop":["END"],"user":"u-1"}`,
		},
		{
			name: "images by base64 and URL, a PDF, a text document",
			in: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}},
				{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}},
				{"type":"text","text":"What are these?"}]}]}`,
			want: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}},
				{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}},
				{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0x"}},
				{"type":"text","text":"notes"},
				{"type":"text","text":"What are these?"}]}]}`,
		},
		{
			name: "a tool call, its result (with an image), tools and a forced tool",
			in: `{"model":"m","max_tokens":10,"messages":[
				{"role":"user","content":"Weather?"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"21C"},{"type":"image","source":{"type":"url","url":"https://example.com/map.png"}}]},{"type":"text","text":"And?"}]}],
				"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
				"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}}`,
			want: `{"model":"m","max_tokens":10,"messages":[
				{"role":"user","content":"Weather?"},
				{"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"21C"},
				{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/map.png"}},{"type":"text","text":"And?"}]}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
				"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false}`,
		},
		{
			name: "tool_choice any and none; an error result",
			in: `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true}]}],
				"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`,
			want: `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"t","content":"Error"}],
				"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		},
		{
			name: "thinking budgets become reasoning efforts; a stream asks for usage",
			in:   `{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":2048},"stream":true}`,
			want: `{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"medium"}`,
		},
		{
			name: "Anthropic's own members are left out; LiteLLM's are kept",
			in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"container":"c-1","context_management":{"edits":[]},"service_tier":"auto","mock_response":"hi","drop_params":true}`,
			want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"mock_response":"hi","drop_params":true}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.ChatBody()
			if err != nil {
				t.Fatal(err)
			}
			if d := providertest.DiffJSON(tc.want, got); d != "" {
				t.Errorf("chat request (-want +got):\n%s", d)
			}
			if _, err := p.Chat(); err != nil {
				t.Errorf("the chat seam refuses the translation: %v", err)
			}
		})
	}
}

func TestEffort(t *testing.T) {
	for budget, want := range map[int64]string{1024: "low", 1025: "medium", 2048: "medium", 2049: "high", 32000: "high"} {
		if got := effort(budget); got != want {
			t.Errorf("effort(%d) = %s, want %s", budget, got, want)
		}
	}
}

// TestChatBodyRefuses: what has no chat form is a 400 naming it.
func TestChatBodyRefuses(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]}`, "messages[0].content[0].type"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}]}]}`, "messages[0].content[0].source.type"},
	} {
		p, err := Parse([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.ChatBody()
		if e := api.AsError(err); err == nil || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: error %v, want a 400 naming %s", tc.in, err, tc.param)
		}
	}
}

// TestParseRefuses: each bad request is a 400 naming its member.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ in, param string }{
		{`[]`, ""},
		{`{"max_tokens":5,"messages":[]}`, "model"},
		{`{"model":"m","messages":[]}`, "max_tokens"},
		{`{"model":"m","max_tokens":0,"messages":[]}`, "max_tokens"},
		{`{"model":"m","max_tokens":5}`, "messages"},
		{`{"model":"m","max_tokens":"5","messages":[]}`, "max_tokens"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, "messages[0].role"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`, "messages[0].content"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, "messages[0].content[0].type"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[]}]}]}`, "messages[0].content[0].input"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"x"}}]}]}`, "messages[0].content[0].source.media_type"},
		{`{"model":"m","max_tokens":5,"messages":[],"temperature":1.5}`, "temperature"},
		{`{"model":"m","max_tokens":5,"messages":[],"tool_choice":{"type":"tool","name":"nope"}}`, "tool_choice.name"},
		{`{"model":"m","max_tokens":5,"messages":[],"thinking":{"type":"enabled","budget_tokens":100}}`, "thinking.budget_tokens"},
		{`{"model":"m","max_tokens":2000,"messages":[],"thinking":{"type":"enabled","budget_tokens":2000}}`, "thinking.budget_tokens"},
		{`{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f"}]}`, "tools[0].input_schema"},
	} {
		_, err := Parse([]byte(tc.in))
		if e := api.AsError(err); err == nil || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: error %v, want a 400 naming %q", tc.in, err, tc.param)
		}
	}
}

// TestParseHeadLeavesTheRestUndecoded: ParseHead reads what routing and the
// log event need and leaves messages, system and tools to the deployment
// (native) or to Chat (translated), which refuses what is wrong in them.
func TestParseHeadLeavesTheRestUndecoded(t *testing.T) {
	in := `{"model":"m","max_tokens":5,"stream":true,"metadata":{"user_id":"u1"},"temperature":0.5,` +
		`"tools":[{"name":"f","input_schema":{}},{"name":"g","input_schema":{}}],` +
		`"messages":[{"role":"system","content":"x"}]}`
	p, err := ParseHead([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if p.Model != "m" || p.MaxTokens != 5 || !p.Stream || p.Metadata.UserID != "u1" || *p.Temperature != 0.5 ||
		string(p.RawMessages) != `[{"role":"system","content":"x"}]` || p.Messages != nil || p.Tools != nil || string(p.Body) != in {
		t.Errorf("head %+v", p)
	}
	for i := 0; i < 2; i++ { // the refusal stays when asked again
		_, err = p.Chat()
		if e := api.AsError(err); err == nil || e.Status != 400 || e.Param != "messages[0].role" {
			t.Errorf("Chat: %v, want a 400 naming messages[0].role", err)
		}
	}
	if _, err := ParseHead([]byte(`{"model":"m","max_tokens":5,"messages":[],"temperature":"hot"}`)); api.AsError(err).Param != "temperature" {
		t.Errorf("a head member of the wrong type: %v", err)
	}
	if _, err := ParseHead([]byte(`{"model":"m","max_tokens":5,"messages":[],"thinking":{"type":"enabled","budget_tokens":"x"}}`)); api.AsError(err).Param != "thinking.budget_tokens" {
		t.Errorf("a nested head member of the wrong type: %v", err)
	}
}

// zeros reads as many zero bytes as asked.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestReadAnswerIsBounded: a translated provider's answer is read whole up
// to providers.MaxAnswerBytes, sized by its length when known; a larger or
// cut one is a 502.
func TestReadAnswerIsBounded(t *testing.T) {
	body := func(n int64) io.ReadCloser { return io.NopCloser(io.LimitReader(zeros{}, n)) }
	if b, err := readAnswer(body(1000), 1000); err != nil || len(b) != 1000 {
		t.Errorf("a 1000-byte answer: %d bytes, %v", len(b), err)
	}
	if _, err := readAnswer(body(providers.MaxAnswerBytes+1), -1); api.AsError(err).Status != 502 {
		t.Errorf("an answer over the bound: %v", err)
	}
	cut := io.NopCloser(io.MultiReader(io.LimitReader(zeros{}, 10), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if _, err := readAnswer(cut, 100); api.AsError(err).Status != 502 {
		t.Errorf("a cut answer: %v", err)
	}
}

// TestTranslatedAnswersShareNoBytes: the buffer a translated answer is read
// into goes back for the next: what one call returned — the encoded
// message, the message — is untouched by the next's read.
func TestTranslatedAnswersShareNoBytes(t *testing.T) {
	s := New(nil, nil)
	answer := func(text string) io.ReadCloser {
		return io.NopCloser(strings.NewReader(`{"id":"chatcmpl-` + text + `","choices":[{"message":{"content":"` + text + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	}
	first, res, err := s.translateAnswer(answer("aaaa"), -1, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := string(first)
	for range 3 {
		if _, _, err := s.translateAnswer(answer("bbbb"), -1, "m"); err != nil {
			t.Fatal(err)
		}
	}
	if string(first) != want || res.ID != "msg_aaaa" || res.Content[0].Text != "aaaa" {
		t.Errorf("the first answer changed: %s, %+v", first, res)
	}
}
