package oai

import (
	"strings"
	"testing"
)

// BenchmarkParseChatRequest parses the bench's chat body (a system prompt
// and a question of ~120 tokens): go test -run '^$' -bench ParseChat -benchmem ./pkg/oai
func BenchmarkParseChatRequest(b *testing.B) {
	body := []byte(`{"max_tokens":256,"messages":[{"content":"You are a careful assistant for an engineering team. Answer in plain English, cite the section of the document you rely on, and say so when the document does not contain the answer. Keep answers under three hundred words unless the user asks for more detail.","role":"system"},{"content":"Summarise this for a new engineer: Sluice is a serverless model gateway. It stands in front of hosted AI model providers and gives teams one authenticated, logged, OpenAI-compatible front door: files and batches, embeddings and moderations, raw passthrough to four providers, and per-team logging callbacks. This paragraph is about one hundred and twenty tokens long, a typical chunk of a retrieval corpus that a team embeds by the thousand when it indexes its documents for search and question answering.","role":"user"}],"model":"gpt-4o-mini","temperature":0.2}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseChatRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEmbeddingRequest parses the bench's embeddings body (one
// input of ~120 tokens).
func BenchmarkParseEmbeddingRequest(b *testing.B) {
	body := []byte(`{"input":"Sluice is a serverless model gateway. It stands in front of hosted AI model providers and gives teams one authenticated, logged, OpenAI-compatible front door: files and batches, embeddings and moderations, raw passthrough to four providers, and per-team logging callbacks. This paragraph is about one hundred and twenty tokens long, a typical chunk of a retrieval corpus that a team embeds by the thousand when it indexes its documents for search and question answering.","model":"text-embedding-3-small"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseEmbeddingRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// The embeddings parse allocates the request and its model's string, no
// more: its member list lives on the stack.
func TestParseEmbeddingRequestAllocations(t *testing.T) {
	body := []byte(`{"input":"Sluice is a serverless model gateway.","model":"text-embedding-3-small","encoding_format":"float"}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseEmbeddingRequest(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("%v allocations a parse, want at most 2", allocs)
	}
}

// BenchmarkParseChatRequestPlain parses pkg/gateway's BenchmarkOverhead
// chat body: model and messages only, as most requests.
func BenchmarkParseChatRequestPlain(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` +
		strings.Repeat("Sluice stands in front of hosted model providers. ", 12) + `"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseChatRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseChatRequestTools parses an agent's turn: a user message
// with an image part, an assistant tool call and its answer, and a tool.
func BenchmarkParseChatRequestTools(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"look","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a cat"}],"tools":[{"type":"function","function":{"name":"look","parameters":{"type":"object"}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseChatRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
