package messages

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// The bench's Messages request (about 120 tokens of text) and an OpenAI
// answer to it, as BenchmarkMessagesOverhead in pkg/gateway sends them.
var (
	benchRequest = []byte(`{"model":"gpt-4o-mini","max_tokens":256,"system":"You are terse.","messages":[{"role":"user","content":"` +
		strings.Repeat("Sluice stands in front of hosted model providers. ", 12) + `"}]}`)
	benchChatAnswer = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("Sluice answers. ", 50) + `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":130,"completion_tokens":200,"total_tokens":330},"system_fingerprint":"fp_1"}`)
)

// BenchmarkNativeRequest is what a natively served call reads of its
// request (ParseHead); BenchmarkTranslatedRequest what a translated one
// does to it (the head, then Chat: decoded whole, translated, parsed as a
// chat request); BenchmarkTranslatedAnswer what it does to the answer.
//
//	go test -run '^$' -bench 'Request|Answer' -benchmem ./pkg/messages
func BenchmarkNativeRequest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHead(benchRequest); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTranslatedRequest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		p, err := ParseHead(benchRequest)
		if err == nil {
			_, err = p.Chat()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTranslatedAnswer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		res, err := FromChat(benchChatAnswer, "gpt-4o-mini")
		if err == nil {
			_, err = AnswerJSON(res)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchMessageAnswer is an Anthropic answer of the bench's size, as a
// native deployment sends it.
var benchMessageAnswer = []byte(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"` +
	strings.Repeat("Sluice answers. ", 50) + `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":130,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":200}}`)

// BenchmarkNativeAnswer is what a natively served call does to the answer:
// its meter reads its usage and stop reason, and keeps it when a callback
// may log it (kept), else reads it where it is (in-place).
func BenchmarkNativeAnswer(b *testing.B) {
	for _, keep := range []bool{true, false} {
		name := "in-place"
		if keep {
			name = "kept"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := newJSONMeter(int64(len(benchMessageAnswer)), keep)
				m.Write(benchMessageAnswer)
				var ev logevent.Event
				if _, err := m.End(&ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeRequest sets the whole decode of a translated request's
// body by decodeRequest beside encoding/json's, which it stands in for.
func BenchmarkDecodeRequest(b *testing.B) {
	b.Run("decodeRequest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Request
			if !decodeRequest(benchRequest, &r) {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Request
			if err := json.Unmarshal(benchRequest, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
