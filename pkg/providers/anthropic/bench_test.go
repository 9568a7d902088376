package anthropic

import (
	"testing"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

// BenchmarkChatTranslation is the per-call CPU of the chat-anthropic bench
// scenario's translation, in process: the request parsed and translated to
// a Messages body, the Messages answer translated back.
func BenchmarkChatTranslation(b *testing.B) {
	body := []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about the sea, then explain its imagery in two sentences."}],"max_tokens":256,"temperature":0.7}`)
	b.ReportAllocs()
	for b.Loop() {
		req, err := oai.ParseChatRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		call, err := NewCall(req, Options{Model: "claude-sonnet-4-5"})
		if err != nil {
			b.Fatal(err)
		}
		ans, err := call.Answer([]byte(textAnswer))
		if err != nil {
			b.Fatal(err)
		}
		ans.Body.Close()
	}
}
