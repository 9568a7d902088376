package messages

import (
	"testing"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

func BenchmarkZHead(b *testing.B) {
	for b.Loop() {
		ParseHead(benchRequest)
	}
}
func BenchmarkZDecode(b *testing.B) {
	p, _ := ParseHead(benchRequest)
	for b.Loop() {
		p.decoded = false
		p.decode()
	}
}
func BenchmarkZChatBody(b *testing.B) {
	p, _ := Parse(benchRequest)
	for b.Loop() {
		p.ChatBody()
	}
}
func BenchmarkZParseChat(b *testing.B) {
	p, _ := Parse(benchRequest)
	cb, _ := p.ChatBody()
	for b.Loop() {
		oai.ParseChatRequest(cb)
	}
}
func BenchmarkZFromChat(b *testing.B) {
	for b.Loop() {
		FromChat(benchChatAnswer, "gpt-4o-mini")
	}
}
func BenchmarkZAnswerJSON(b *testing.B) {
	r, _ := FromChat(benchChatAnswer, "gpt-4o-mini")
	for b.Loop() {
		AnswerJSON(r)
	}
}
