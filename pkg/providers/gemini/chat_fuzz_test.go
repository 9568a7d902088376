package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// FuzzChatStream holds the stream translator to its contract for any
// provider stream: it never panics, every event it writes is a JSON chunk
// (or [DONE]), and a stream it ends without an error ends with [DONE].
func FuzzChatStream(f *testing.F) {
	for _, s := range []string{
		"data: " + `{"candidates": [{"content": {"parts": [{"text": "Hi"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1,"candidatesTokenCount": 1,"totalTokenCount": 2}}` + "\r\n\r\n",
		"data: " + `{"candidates": [{"content": {"parts": [{"text": "hm","thought": true},{"functionCall": {"name": "f","args": {"a": [1]}},"thoughtSignature": "c2ln"}]},"index": 1}]}` + "\n\ndata: " + `{"candidates": [{"finishReason": "STOP","index": 1}]}` + "\n\n",
		"data: " + `{"promptFeedback": {"blockReason": "OTHER","blockReasonMessage": "no \"thanks\""}}` + "\n\n",
		"data: " + `{"error": {"code": 429,"message": "Resource exhausted","status": "RESOURCE_EXHAUSTED"}}` + "\n\n",
		"data: " + `{"candidates": [{"content": {"parts": [{"text": "a\u2028b\ud83d\ude00"}]},"finishReason": "SAFETY"}]}` + "\n\n",
		"data: {\"candidates\": [{\"index\": 3}]}\n\n",
		"data: [1]\n\ndata: {}\n\n",
		": comment\n\nevent: x\ndata: {\"candidates\":[]}\n\n",
	} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, stream []byte, n int) {
		w := oai.NewChunkWriter("chatcmpl-fuzz", "gemini-2.5-flash", 1)
		s := oai.NewSSEStream(io.NopCloser(bytes.NewReader(stream)), sse.Limits{MaxLine: 1 << 16, MaxEvent: 1 << 16}, newStreamer(w, n%4))
		out, err := io.ReadAll(s)
		rd := sse.NewReader(bytes.NewReader(out), sse.Limits{})
		last := ""
		for {
			ev, rerr := rd.Next()
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				t.Fatalf("the output does not parse: %v\n%s", rerr, out)
			}
			last = string(ev.Data)
			if last != "[DONE]" && !json.Valid(ev.Data) {
				t.Fatalf("an event is not JSON: %s", ev.Data)
			}
		}
		if err == nil && last != "[DONE]" {
			t.Fatalf("a stream ended without an error and without [DONE]:\n%s", out)
		}
	})
}

// FuzzChatAnswer: any answer translates into a chat.completion with
// choices, or is refused.
func FuzzChatAnswer(f *testing.F) {
	for _, s := range []string{
		textAnswer,
		`{"candidates":[{"content":{"parts":[{"text":"x","thought":true},{"functionCall":{"name":"f"},"thoughtSignature":"c2ln"}]},"finishReason":"STOP","index":2}]}`,
		`{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":3}}`,
		`{"candidates":[{"finishReason":"RECITATION"}],"usageMetadata":{"cachedContentTokenCount":1e3}}`,
		`{"candidates":[{"content":{"parts":[{"text":"\ud800"}]}}]}`,
	} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, doc []byte, n int) {
		cc, err := translateAnswer(doc, "gemini-2.5-flash", n%4)
		if err != nil {
			return
		}
		out, err := encodeAnswer(cc)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var c struct {
			Object  string            `json:"object"`
			Choices []json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal(out, &c); err != nil || c.Object != "chat.completion" || len(c.Choices) == 0 {
			t.Fatalf("translated into %s (%v)", out, err)
		}
	})
}

// FuzzChatRequest: any valid chat request translates into a JSON
// generateContent body, or is refused with a 400.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"g","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"t"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`,
		`{"model":"g","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"call_1__thought__c2ln","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"call_1__thought__c2ln","content":"{\"r\":2}"}]}`,
		`{"model":"g","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"gs://b/x.pdf"}},{"type":"input_audio","input_audio":{"data":"AA","format":"MP3"}}]}],"reasoning_effort":"high","n":3,"seed":-5,"top_k":3,"safety_settings":[]}`,
		`{"model":"g","messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{}}}}`,
		`{"model":"g","messages":[{"role":"function","name":"f","content":"x"}],"logprobs":true,"drop_params":true,"metadata":{"a":"b"}}`,
	} {
		f.Add([]byte(s), "gemini-3-flash-preview", false)
	}
	f.Fuzz(func(t *testing.T, body []byte, model string, vertex bool) {
		req, err := oai.ParseChatRequest(body)
		if err != nil {
			return
		}
		dialect := GeminiAPI
		if vertex {
			dialect = VertexAI
		}
		g, err := buildRequest(req, model, dialect, providers.NewDropParams(Name, config.Deployment{}))
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("refused with %v, want a 400", err)
			}
			return
		}
		out, err := json.Marshal(g)
		if err != nil || !json.Valid(out) || len(g.Contents) == 0 {
			t.Fatalf("translated into %s (%v)", out, err)
		}
	})
}
