package messages

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// TestFromChat holds the translation of the chat seam's answer into a
// message.
func TestFromChat(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "text, with cached prompt tokens",
			in: `{"id":"chatcmpl-abc","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":8}}}`,
			want: `{"id":"msg_abc","type":"message","role":"assistant","model":"my-model","content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn","stop_sequence":null,
				"usage":{"input_tokens":12,"output_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":8}}`,
		},
		{
			name: "reasoning and tool calls",
			in: `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"Let me look.","tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"now","arguments":""}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
			want: `{"id":"msg_x","type":"message","role":"assistant","model":"my-model","content":[
				{"type":"thinking","thinking":"Let me look.","signature":""},
				{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"call_2","name":"now","input":{}}],"stop_reason":"tool_use","stop_sequence":null,
				"usage":{"input_tokens":5,"output_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		},
		{
			name: "length, and a refusal",
			in:   `{"id":"msg_1","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"No."},"finish_reason":"content_filter"}]}`,
			want: `{"id":"msg_1","type":"message","role":"assistant","model":"my-model","content":[{"type":"text","text":"No."}],"stop_reason":"refusal","stop_sequence":null,
				"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		},
		{
			name: "cut at max tokens",
			in:   `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"Once upon"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
			want: `{"id":"msg_c","type":"message","role":"assistant","model":"my-model","content":[{"type":"text","text":"Once upon"}],"stop_reason":"max_tokens","stop_sequence":null,
				"usage":{"input_tokens":1,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := FromChat([]byte(tc.in), "my-model")
			if err != nil {
				t.Fatal(err)
			}
			got, err := AnswerJSON(res)
			if err != nil {
				t.Fatal(err)
			}
			if d := providertest.DiffJSON(tc.want, got); d != "" {
				t.Errorf("message (-want +got):\n%s", d)
			}
		})
	}
}

func TestFromChatRefusesABadAnswer(t *testing.T) {
	for _, in := range []string{`[]`, `{"choices":[]}`, `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"[1]"}}]}}]}`} {
		if _, err := FromChat([]byte(in), "m"); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

// TestStream holds the translation of the chat seam's chunk stream into
// Anthropic's events: thinking, text and two tool calls (arguments in
// pieces), then the stop reason and usage.
func TestStream(t *testing.T) {
	head := `data: {"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"x","choices":[`
	in := head + `{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"reasoning_content":"Think."}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"content":"lo"}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":""}}]}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}` + "\n\n" +
		head + `{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}` + "\n\n" +
		head + `{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}` + "\n\n" +
		"data: [DONE]\n\n"
	out, err := io.ReadAll(Stream(io.NopCloser(strings.NewReader(in)), "my-model"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`message_start {"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","model":"my-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`,
		`ping {"type":"ping"}`,
		`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Think."}}`,
		`content_block_stop {"type":"content_block_stop","index":0}`,
		`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`,
		`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`,
		`content_block_stop {"type":"content_block_stop","index":1}`,
		`content_block_start {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_a","name":"f","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`content_block_delta {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`content_block_stop {"type":"content_block_stop","index":2}`,
		`content_block_start {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"call_b","name":"g","input":{}}}`,
		`content_block_delta {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`content_block_stop {"type":"content_block_stop","index":3}`,
		`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":10,"output_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		`message_stop {"type":"message_stop"}`,
	}
	got := events(t, string(out))
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		typ, data, _ := strings.Cut(want[i], " ")
		gtyp, gdata, _ := strings.Cut(got[i], " ")
		if typ != gtyp {
			t.Errorf("event %d: %s, want %s", i, gtyp, typ)
			continue
		}
		if d := providertest.DiffJSON(data, []byte(gdata)); d != "" {
			t.Errorf("event %d (%s) (-want +got):\n%s", i, typ, d)
		}
	}
}

// TestStreamCutIsAnError: a chat stream ending before [DONE] reads as cut.
func TestStreamCutIsAnError(t *testing.T) {
	in := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n"
	out, err := io.ReadAll(Stream(io.NopCloser(strings.NewReader(in)), "m"))
	if err == nil {
		t.Fatalf("no error; read %s", out)
	}
	if !strings.Contains(string(out), `"text":"Hi"`) {
		t.Errorf("the text before the cut is lost: %s", out)
	}
}

// events splits an event stream into "type data" strings.
func events(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSpace(s), "\n\n") {
		var typ, data string
		for _, line := range strings.Split(ev, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("unexpected line %q", line)
			}
		}
		out = append(out, typ+" "+data)
	}
	return out
}

// TestReadChatAnswerReadsTheUsualForms: the reader without reflection
// (choices and messages read as they are crossed) reads an answer in the
// usual forms itself, to what encoding/json decodes, rather than leaving
// it to encoding/json.
func TestReadChatAnswerReadsTheUsualForms(t *testing.T) {
	for _, in := range []string{
		string(benchChatAnswer),
		`{"id":"c","choices":[{"message":{"content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`,
		`{"id":"c","choices":[{"message":{"content":"a\nb\u00e9","refusal":"no","reasoning_content":"r"}},null,{"message":null}],"usage":null}`,
		` {"choices":[] , "id":null} `,
	} {
		var got, want chatAnswer
		if valid, ok := readChatAnswer([]byte(in), &got); !valid || !ok {
			t.Errorf("%s: left to encoding/json (valid %v, ok %v)", in, valid, ok)
			continue
		}
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-encoding/json +read)\n%s", in, diff)
		}
	}
}
