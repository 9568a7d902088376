package anthropic

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

type ev = providertest.Event

func evt(typ, data string) ev { return ev{Type: typ, Data: data} }

// sseDoc writes events as Anthropic sends them: event: and data: lines.
func sseDoc(events ...ev) []byte {
	var b []byte
	for _, e := range events {
		b = sse.AppendEvent(b, e.Type, []byte(e.Data))
	}
	return b
}

// Anthropic's streams, as its streaming guide shows them (usage with cache
// counts in message_start, cumulative in message_delta).
var (
	toolStream = []ev{
		evt("message_start", `{"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":2},"content":[],"stop_reason":null}}`),
		evt("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		evt("ping", `{"type": "ping"}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let's check \"SF\":"}}`),
		evt("content_block_stop", `{"type":"content_block_stop","index":0}`),
		evt("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}`),
		evt("content_block_stop", `{"type":"content_block_stop","index":1}`),
		evt("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"get_time","input":{}}}`),
		evt("content_block_stop", `{"type":"content_block_stop","index":2}`),
		evt("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":89}}`),
		evt("message_stop", `{"type":"message_stop"}`),
	}
	thinkingStream = []ev{
		evt("message_start", `{"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 40, "output_tokens": 1}}}`),
		evt("content_block_start", `{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}`),
		evt("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "1071 = 2 × 462 + 147\n"}}`),
		evt("content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds="}}`),
		evt("content_block_stop", `{"type": "content_block_stop", "index": 0}`),
		evt("content_block_start", `{"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}}`),
		evt("content_block_stop", `{"type": "content_block_stop", "index": 1}`),
		evt("content_block_start", `{"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}`),
		evt("content_block_delta", `{"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "The GCD is **21**."}}`),
		evt("content_block_delta", `{"type": "content_block_delta", "index": 2, "delta": {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}}}`),
		evt("content_block_stop", `{"type": "content_block_stop", "index": 2}`),
		evt("message_delta", `{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 60, "output_tokens_details": {"thinking_tokens": 25}}}`),
		evt("message_stop", `{"type": "message_stop"}`),
	}
)

const head = `{"id":"*","object":"chat.completion.chunk","created":"*","model":"claude-sonnet-4-5-20250929","choices":[`

func chunk(choice string) string {
	return head + `{"index":0,"delta":` + choice + `,"logprobs":null,"finish_reason":null}]}`
}

func finishChunk(reason string) string {
	return head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]}`
}

// translateStream runs events through the call's translator and returns what
// each read gave and the error that ended the stream.
func translateStream(t *testing.T, call *Call, doc []byte) ([]string, error) {
	t.Helper()
	ans := call.Stream(io.NopCloser(bytes.NewReader(doc)))
	if ans.ContentLength != -1 {
		t.Errorf("ContentLength %d", ans.ContentLength)
	}
	defer ans.Body.Close()
	return providertest.Reads(ans.Body)
}

func TestStreamToolCalls(t *testing.T) {
	reads, err := translateStream(t, &Call{provider: Name, model: "claude-sonnet-4-5"}, sseDoc(toolStream...))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		chunk(`{"role":"assistant","content":""}`),
		chunk(`{"content":"Okay"}`),
		chunk(`{"content":", let's check \"SF\":"}`),
		chunk(`{"tool_calls":[{"index":0,"id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","type":"function","function":{"name":"get_weather","arguments":""}}]}`),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]}`),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":" \"San Francisco, CA\"}"}}]}`),
		chunk(`{"tool_calls":[{"index":1,"id":"toolu_02","type":"function","function":{"name":"get_time","arguments":""}}]}`),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`),
		finishChunk("tool_calls"),
		head + `],"usage":{"prompt_tokens":2572,"completion_tokens":89,"total_tokens":2661,"prompt_tokens_details":{"cached_tokens":2000},"completion_tokens_details":{"reasoning_tokens":0},"cache_creation_input_tokens":100,"cache_read_input_tokens":2000}}`,
		"[DONE]",
	}
	if d := providertest.DiffChunks(want, providertest.Data(t, []byte(strings.Join(reads, "")))); d != "" {
		t.Error(d)
	}
	// One provider event per read: the finish, usage and [DONE] come with
	// message_stop.
	if len(reads) != 9 || len(providertest.Data(t, []byte(reads[8]))) != 3 {
		t.Errorf("%d reads:\n%s", len(reads), strings.Join(reads, "|\n"))
	}
}

func TestStreamThinking(t *testing.T) {
	reads, err := translateStream(t, &Call{provider: Name, model: "claude-sonnet-4-5"}, sseDoc(thinkingStream...))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		chunk(`{"role":"assistant","content":""}`),
		chunk(`{"reasoning_content":"1071 = 2 × 462 + 147\n","thinking_blocks":[{"type":"thinking","thinking":"1071 = 2 × 462 + 147\n"}]}`),
		chunk(`{"thinking_blocks":[{"type":"thinking","thinking":"","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds="}]}`),
		chunk(`{"thinking_blocks":[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}]}`),
		chunk(`{"content":"The GCD is **21**."}`),
		finishChunk("stop"),
		head + `],"usage":{"prompt_tokens":40,"completion_tokens":60,"total_tokens":100,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":25}}}`,
		"[DONE]",
	}
	if d := providertest.DiffChunks(want, providertest.Data(t, []byte(strings.Join(reads, "")))); d != "" {
		t.Error(d)
	}
}

func TestStreamJSONMode(t *testing.T) {
	doc := sseDoc(
		evt("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":30,"output_tokens":1}}}`),
		evt("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"json_tool_call","input":{}}}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"name\": "}}`),
		evt("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Ada\"}"}}`),
		evt("content_block_stop", `{"type":"content_block_stop","index":0}`),
		evt("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}`),
		evt("message_stop", `{"type":"message_stop"}`),
	)
	reads, err := translateStream(t, &Call{provider: Name, model: "claude-sonnet-4-5", jsonMode: true}, doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		chunk(`{"role":"assistant","content":""}`),
		chunk(`{"content":"{\"name\": "}`),
		chunk(`{"content":"\"Ada\"}"}`),
		finishChunk("stop"),
		head + `],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
		"[DONE]",
	}
	if d := providertest.DiffChunks(want, providertest.Data(t, []byte(strings.Join(reads, "")))); d != "" {
		t.Error(d)
	}
}

func TestStreamFinishReasons(t *testing.T) {
	for stop, want := range map[string]string{
		`"end_turn"`: "stop", `"stop_sequence"`: "stop", `"max_tokens"`: "length", `"tool_use"`: "tool_calls",
		`"refusal"`: "content_filter", `"model_context_window_exceeded"`: "length", `"pause_turn"`: "stop", `null`: "stop",
	} {
		doc := sseDoc(toolStream[0],
			evt("message_delta", `{"type":"message_delta","delta":{"stop_reason":`+stop+`,"stop_sequence":null},"usage":{"output_tokens":3}}`),
			evt("message_stop", `{"type":"message_stop"}`))
		reads, err := translateStream(t, &Call{provider: Name}, doc)
		if err != nil {
			t.Fatalf("%s: %v", stop, err)
		}
		data := providertest.Data(t, []byte(strings.Join(reads, "")))
		if len(data) != 4 || !strings.Contains(data[1], `"finish_reason":"`+want+`"`) {
			t.Errorf("%s: %v", stop, data)
		}
	}
}

func TestStreamErrors(t *testing.T) {
	start, text := toolStream[0], toolStream[1]
	for _, tc := range []struct {
		name   string
		doc    []byte
		chunks int    // chunk events before the error
		api    bool   // an *api.Error (written as the final error event)
		msg    string // in the error
	}{
		{"an error event mid-stream", sseDoc(start, text, toolStream[3], evt("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)),
			2, true, "The provider reported an error: Overloaded (overloaded_error)"},
		{"an error event first", sseDoc(evt("error", `{"type":"error","error":{"details":null,"type":"api_error","message":"Internal server error"}}`)),
			0, true, "Internal server error (api_error)"},
		{"cut before message_stop", sseDoc(start, text, toolStream[3]), 2, false, "before message_stop"},
		{"cut inside an event", append(sseDoc(start), "event: content_block_start\ndata: {\"type\":\"content_bl"...), 1, false, "ended inside an event"},
		{"empty", nil, 0, false, "before message_stop"},
		{"no message_start", sseDoc(text), 0, true, "does not begin with message_start"},
		{"message_start twice", sseDoc(start, start), 1, true, "twice"},
		{"data not JSON", sseDoc(start, evt("content_block_delta", `{"type":`)), 1, true, "not a JSON object"},
		{"a delta of no block", sseDoc(start, toolStream[3]), 1, true, "no started block"},
		{"a text delta without text", sseDoc(start, text, evt("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}`)), 1, true, "no text string"},
		{"a tool without id", sseDoc(start, evt("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"f"}}`)), 1, true, "id or name"},
		{"a bad usage", sseDoc(start, evt("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":"many"}}`)), 1, true, "usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads, err := translateStream(t, &Call{provider: Name, model: "claude-sonnet-4-5"}, tc.doc)
			if err == nil {
				t.Fatal("the stream ended without an error")
			}
			if n := len(providertest.Data(t, []byte(strings.Join(reads, "")))); n != tc.chunks {
				t.Errorf("%d chunks before the error, want %d", n, tc.chunks)
			}
			var ae *api.Error
			if errors.As(err, &ae) != tc.api {
				t.Errorf("error %T %v: *api.Error %v, want %v", err, err, !tc.api, tc.api)
			}
			if ae != nil && (ae.Status != 502 || !strings.Contains(ae.Message, tc.msg)) {
				t.Errorf("error %d %q, want 502 with %q", ae.Status, ae.Message, tc.msg)
			}
			if ae == nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want %q", err, tc.msg)
			}
		})
	}
}

func TestStreamTooManyBlocks(t *testing.T) {
	events := []ev{toolStream[0]}
	for i := 0; i <= maxBlocks; i++ {
		events = append(events, evt("content_block_start", `{"type":"content_block_start","index":`+strconv.Itoa(i)+`,"content_block":{"type":"text","text":""}}`))
	}
	_, err := translateStream(t, &Call{provider: Name}, sseDoc(events...))
	if err == nil || !strings.Contains(err.Error(), "content blocks") {
		t.Errorf("error %v", err)
	}
}
