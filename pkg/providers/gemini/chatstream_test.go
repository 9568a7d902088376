package gemini

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// streaming answers with the events as the Gemini API writes them ("data:
// …" and CRLF CRLF), flushing each.
func streaming(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range events {
			io.WriteString(w, "data: "+e+"\r\n\r\n")
			w.(http.Flusher).Flush()
		}
	}
}

// chunk is an OpenAI chunk of the translated stream, from its choices (or
// usage) on.
func chunk(rest string) string {
	return `{"id":"*","object":"chat.completion.chunk","created":"*","model":"gemini-2.5-flash",` + rest + `}`
}

func delta(index, d string) string {
	return chunk(`"choices":[{"index":` + index + `,"delta":` + d + `,"logprobs":null,"finish_reason":null}]`)
}

func finish(index, reason string) string {
	return chunk(`"choices":[{"index":` + index + `,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}]`)
}

func usageChunk(u string) string { return chunk(`"choices":[],"usage":` + u) }

var role0 = delta("0", `{"role":"assistant","content":""}`)

type chatStreamCase struct {
	name   string
	body   string // the request's extra members
	events []string
	want   []string
	reads  int    // reads of the translated stream: one per event, one for the end
	err    string // the stream's error, if it fails
}

// chatStreamCases are TestChatStream's cases.
var chatStreamCases = []chatStreamCase{
	{"text, usage growing",
		``,
		[]string{
			`{"candidates": [{"content": {"parts": [{"text": "The capital"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 9}]},"modelVersion": "gemini-2.5-flash","responseId": "wF3QaJ6ZLpGH7M8P3JWWuQk"}`,
			`{"candidates": [{"content": {"parts": [{"text": " of France is \"Paris\".\n"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 9,"candidatesTokenCount": 7,"totalTokenCount": 30,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 9}],"thoughtsTokenCount": 14},"modelVersion": "gemini-2.5-flash","responseId": "wF3QaJ6ZLpGH7M8P3JWWuQk"}`,
		},
		[]string{
			role0,
			delta("0", `{"content":"The capital"}`),
			delta("0", `{"content":" of France is \"Paris\".\n"}`),
			finish("0", "stop"),
			usageChunk(`{"prompt_tokens":9,"completion_tokens":21,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":14}}`),
			"[DONE]",
		}, 3, ""},
	{"thoughts, then the answer",
		`,"reasoning_effort":"low"`,
		[]string{
			`{"candidates": [{"content": {"parts": [{"text": "**Weighing the options**\nThe user asks…","thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 5}}`,
			`{"candidates": [{"content": {"parts": [{"text": "Blue.","thoughtSignature": "CiQB0e2Kb3c="},{"text": ""}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 2,"totalTokenCount": 50,"cachedContentTokenCount": 4,"thoughtsTokenCount": 43}}`,
		},
		[]string{
			role0,
			delta("0", `{"reasoning_content":"**Weighing the options**\nThe user asks…"}`),
			delta("0", `{"content":"Blue."}`),
			finish("0", "stop"),
			usageChunk(`{"prompt_tokens":5,"completion_tokens":45,"total_tokens":50,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":43}}`),
			"[DONE]",
		}, 3, ""},
	{"function calls",
		`,"tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}]`,
		[]string{
			`{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"city": "Paris"}},"thoughtSignature": "CiQB0e2Kb3c="}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 40,"totalTokenCount": 40}}`,
			`{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_time","args": {}}}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 40,"candidatesTokenCount": 12,"totalTokenCount": 52}}`,
		},
		[]string{
			role0,
			delta("0", `{"tool_calls":[{"index":0,"id":"call_*__thought__CiQB0e2Kb3c=","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]}`),
			delta("0", `{"tool_calls":[{"index":1,"id":"call_*","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`),
			finish("0", "tool_calls"),
			usageChunk(`{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`),
			"[DONE]",
		}, 3, ""},
	{"a blocked prompt",
		`,"n":2`,
		[]string{
			`{"promptFeedback": {"blockReason": "SAFETY","safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT","probability": "HIGH"}]},"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash"}`,
		},
		[]string{
			role0,
			delta("0", `{"refusal":"Gemini blocked the prompt (SAFETY)."}`),
			finish("0", "content_filter"),
			delta("1", `{"role":"assistant","content":""}`),
			delta("1", `{"refusal":"Gemini blocked the prompt (SAFETY)."}`),
			finish("1", "content_filter"),
			usageChunk(`{"prompt_tokens":8,"completion_tokens":0,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`),
			"[DONE]",
		}, 2, ""},
	{"stopped by safety, no usage",
		``,
		[]string{
			`{"candidates": [{"content": {"parts": [{"text": "Step one:"}],"role": "model"},"index": 0}]}`,
			`{"candidates": [{"finishReason": "SAFETY","index": 0,"safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT","probability": "MEDIUM","blocked": true}]}]}`,
		},
		[]string{role0, delta("0", `{"content":"Step one:"}`), finish("0", "content_filter"), "[DONE]"}, 3, ""},
	{"two candidates, usage last on its own, a finish repeated",
		`,"n":2`,
		[]string{
			`{"candidates": [{"content": {"parts": [{"text": "A"}],"role": "model"}},{"content": {"parts": [{"text": "B"}],"role": "model"},"index": 1}]}`,
			`{"candidates": [{"content": {"parts": [{"text": "!"}],"role": "model"},"index": 1,"finishReason": "MAX_TOKENS"}]}`,
			`{"candidates": [{"content": {"parts": [{"text": "."}],"role": "model"},"finishReason": "STOP"}]}`,
			`{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP"}]}`,
			`{"usageMetadata": {"promptTokenCount": 3,"candidatesTokenCount": 4,"totalTokenCount": 7,"trafficType": "ON_DEMAND"},"modelVersion": "gemini-2.5-flash","createTime": "2025-09-20T10:00:00.000000Z","responseId": "r1"}`,
		},
		[]string{
			role0, delta("0", `{"content":"A"}`),
			delta("1", `{"role":"assistant","content":""}`), delta("1", `{"content":"B"}`),
			delta("1", `{"content":"!"}`), finish("1", "length"),
			delta("0", `{"content":"."}`), finish("0", "stop"),
			usageChunk(`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`),
			"[DONE]",
		}, 4, ""}, // the events without output give no read
	{"an error in the stream",
		``,
		[]string{
			`{"candidates": [{"content": {"parts": [{"text": "Once"}],"role": "model"},"index": 0}]}`,
			`{"error": {"code": 500,"message": "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status": "INTERNAL"}}`,
		},
		[]string{role0, delta("0", `{"content":"Once"}`)}, 1,
		"The provider reported an error: An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting (INTERNAL)"},
	{"cut before its finish reason",
		``,
		[]string{`{"candidates": [{"content": {"parts": [{"text": "Once"}],"role": "model"},"index": 0}]}`},
		[]string{role0, delta("0", `{"content":"Once"}`)}, 1, errCut.Error()},
	{"no events", ``, nil, nil, 0, errCut.Error()},
	{"an event that does not read: none of it is sent",
		``,
		[]string{`{"candidates": [{"content": {"parts": [{"text": "bad \q escape"}]}}]}`},
		nil, 0, "The provider's stream had an event that does not read"},
	{"an event that is not an object", ``, []string{`[]`}, nil, 0, "The provider's stream had an event that does not read"},
}

func TestChatStream(t *testing.T) {
	for _, tc := range chatStreamCases {
		t.Run(tc.name, func(t *testing.T) {
			up := providertest.NewUpstream(t, streaming(tc.events...))
			ans, err := chat(t, openChat(t, up.URL, "gemini-2.5-flash", nil), `{"model":"g","messages":[{"role":"user","content":"Hi"}],"stream":true`+tc.body+`}`)
			if err != nil {
				t.Fatal(err)
			}
			defer ans.Body.Close()
			reads, err := providertest.Reads(ans.Body)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("stream error %v after %q", err, reads)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("stream error %v, want %q", err, tc.err)
			}
			var ae *api.Error
			if tc.err != "" && tc.err != errCut.Error() && !errors.As(err, &ae) {
				t.Errorf("stream error %T, want an *api.Error (the client's error event)", err)
			}
			if len(reads) != tc.reads {
				t.Errorf("%d reads, want %d (one per event): %q", len(reads), tc.reads, reads)
			}
			got := providertest.Data(t, []byte(callID.ReplaceAllString(strings.Join(reads, ""), "call_*")))
			if d := providertest.DiffChunks(tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}
