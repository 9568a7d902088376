package oai

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// event returns the JSON of one "data: {…}\n\n" event, failing the test
// when it is not one.
func event(t *testing.T, b []byte) any {
	t.Helper()
	s, ok := strings.CutPrefix(string(b), "data: ")
	if !ok || !strings.HasSuffix(s, "\n\n") || strings.Count(s, "\n") != 2 {
		t.Fatalf("not one data event: %q", b)
	}
	var v any
	if err := json.Unmarshal([]byte(s[:len(s)-2]), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return v
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAppendChunk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk ChatChunk
		want  string
	}{
		{"role", ChatChunk{ID: "chatcmpl-1", Created: 7, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Role: "assistant"}}}},
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`},
		{"text and reasoning", ChatChunk{ID: "c", Model: "m", SystemFingerprint: "fp", Choices: []ChunkChoice{{Index: 1, Delta: Delta{Content: "a\"b\n", ReasoningContent: "hm"}}}},
			`{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","system_fingerprint":"fp","choices":[{"index":1,"delta":{"content":"a\"b\n","reasoning_content":"hm"},"logprobs":null,"finish_reason":null}]}`},
		{"tool call start and arguments", ChatChunk{ID: "c", Model: "m", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCallDelta{
			{Index: 0, ID: "call_1", Type: "function", Name: "get_weather"}, {Index: 1, Arguments: `{"city":`}}}}}},
			`{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}},{"index":1,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}`},
		{"finish", ChatChunk{ID: "c", Model: "m", Choices: []ChunkChoice{{FinishReason: "tool_calls"}}},
			`{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`},
		{"usage", ChatChunk{ID: "c", Model: "m", Usage: &Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, CacheReadInputTokens: 2, PromptTokensDetails: PromptTokensDetails{CachedTokens: 2}}},
			`{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":0},"cache_read_input_tokens":2}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(decode(t, tc.want), event(t, AppendChunk(nil, &tc.chunk))); diff != "" {
				t.Errorf("chunk (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChunkWriterAgreesWithAppendChunk(t *testing.T) {
	w := NewChunkWriter("chatcmpl-x", "claude", 9)
	c := func(ch ...ChunkChoice) []byte {
		return AppendChunk(nil, &ChatChunk{ID: "chatcmpl-x", Model: "claude", Created: 9, Choices: ch})
	}
	u := &Usage{PromptTokens: 1, TotalTokens: 1}
	for _, tc := range []struct {
		name      string
		got, want []byte
	}{
		{"role", w.Role(nil, 0), c(ChunkChoice{Delta: Delta{Role: "assistant"}})},
		{"text", w.Text(nil, 2, []byte(`"caf\u00e9 \"x\""`)), c(ChunkChoice{Index: 2, Delta: Delta{Content: `café "x"`}})},
		{"reasoning", w.Reasoning(nil, 0, []byte(`"think"`)), c(ChunkChoice{Delta: Delta{ReasoningContent: "think"}})},
		{"finish", w.Finish(nil, 0, FinishLength), c(ChunkChoice{FinishReason: FinishLength})},
		{"usage", w.Usage(nil, u), AppendChunk(nil, &ChatChunk{ID: "chatcmpl-x", Model: "claude", Created: 9, Usage: u})},
	} {
		if diff := cmp.Diff(event(t, tc.want), event(t, tc.got)); diff != "" {
			t.Errorf("%s (-AppendChunk +ChunkWriter):\n%s", tc.name, diff)
		}
	}
	if got := string(w.Done(nil)); got != "data: [DONE]\n\n" {
		t.Errorf("Done %q", got)
	}
}

// events is a translator that turns each provider event into one chunk
// event carrying its data, fails on an event of type "fail", and ends on
// "stop".
type events struct {
	w     *ChunkWriter
	ended int
	end   error
}

func (e *events) Event(dst []byte, ev sse.Event) ([]byte, error) {
	switch string(ev.Type) {
	case "fail":
		return dst, api.Upstream(nil, "The provider reported an error: %s", ev.Data)
	case "stop":
		return dst, io.EOF
	case "quiet":
		return dst, nil
	}
	return e.w.Choice(dst, &ChunkChoice{Delta: Delta{Content: string(ev.Data)}}), nil
}

func (e *events) End(dst []byte) ([]byte, error) {
	e.ended++
	if e.end != nil {
		return dst, e.end
	}
	return e.w.Done(e.w.Finish(dst, 0, FinishStop)), nil
}

func reads(t *testing.T, r io.Reader) ([]string, error) {
	t.Helper()
	var out []string
	buf := make([]byte, 1<<16)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out = append(out, string(buf[:n]))
		}
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
	}
}

func TestSSEStreamHandsOutOneEventPerRead(t *testing.T) {
	w := NewChunkWriter("c", "m", 1)
	tr := &events{w: w}
	body := io.NopCloser(strings.NewReader("data: one\n\nevent: quiet\ndata: x\n\ndata: two\n\nevent: stop\ndata: {}\n\ndata: never\n\n"))
	got, err := reads(t, NewSSEStream(body, sse.Limits{}, tr))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		string(w.Choice(nil, &ChunkChoice{Delta: Delta{Content: "one"}})),
		string(w.Choice(nil, &ChunkChoice{Delta: Delta{Content: "two"}})),
		string(w.Done(w.Finish(nil, 0, FinishStop))),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
	if tr.ended != 1 {
		t.Errorf("End called %d times", tr.ended)
	}
}

func TestSSEStreamErrors(t *testing.T) {
	w := NewChunkWriter("c", "m", 1)
	one := string(w.Choice(nil, &ChunkChoice{Delta: Delta{Content: "one"}}))
	truncated := errors.New("the provider's stream ended before its last event")
	for _, tc := range []struct {
		name, stream string
		end          error
		want         []string
		err          error // nil: any *api.Error
	}{
		{"an in-band error after output", "data: one\n\nevent: fail\ndata: overloaded\n\n", nil, []string{one}, nil},
		{"the stream ends inside an event", "data: one\n\ndata: tw", nil, []string{one}, sse.ErrTruncated},
		{"the provider stops without its end", "data: one\n\n", truncated, []string{one}, truncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reads(t, NewSSEStream(io.NopCloser(strings.NewReader(tc.stream)), sse.Limits{}, &events{w: w, end: tc.end}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reads (-want +got):\n%s", diff)
			}
			var ae *api.Error
			switch {
			case tc.err == nil && !errors.As(err, &ae):
				t.Errorf("error %v, want an *api.Error", err)
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Errorf("error %v, want %v", err, tc.err)
			}
		})
	}
}

// TestChunkStreamMemoryIsFlat: a long stream reuses one output buffer.
func TestChunkStreamMemoryIsFlat(t *testing.T) {
	w := NewChunkWriter("c", "m", 1)
	n := 0
	s := NewChunkStream(func(dst []byte) ([]byte, error) {
		if n++; n > 10000 {
			return dst, io.EOF
		}
		return w.Text(dst, 0, []byte(`"token "`)), nil
	}, nil)
	buf := make([]byte, 32<<10)
	allocs := testing.AllocsPerRun(1, func() {
		for {
			if _, err := s.Read(buf); err != nil {
				return
			}
		}
	})
	if allocs > 10 {
		t.Errorf("%v allocations for 10,000 events", allocs)
	}
}
