package chat

import (
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// benchAnswer is the bench upstream's chat answer, in its shape (infra/bench/upstream,
// pkg/gateway's BenchmarkOverhead): 200 tokens of content, usage at the end.
var benchAnswer = []byte(`{"id":"chatcmpl-e13wu1oh","object":"chat.completion","created":1795930698,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` +
	strings.Repeat("Sluice answers. ", 70) + `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":200,"total_tokens":201,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_bench"}`)

// BenchmarkJSONMeter meters a forwarded chat answer as modelcall does: the
// answer written through, its usage read for the cost header, the call
// ended: go test -run '^$' -bench JSONMeter -benchmem ./pkg/chat
func BenchmarkJSONMeter(b *testing.B) { benchJSONMeter(b, true) }

// BenchmarkJSONMeterNotKept is BenchmarkJSONMeter for a call no callback
// logs (the bench's): the answer read where it is, unchecked, not copied.
func BenchmarkJSONMeterNotKept(b *testing.B) { benchJSONMeter(b, false) }

func benchJSONMeter(b *testing.B, keep bool) {
	b.ReportAllocs()
	for b.Loop() {
		m := newJSONMeter(kindChat, noPrompt, int64(len(benchAnswer)), keep)
		m.Write(benchAnswer)
		if u, ok := m.Usage(); !ok || u.TotalTokens != 201 {
			b.Fatalf("usage %+v %v", u, ok)
		}
		var ev logevent.Event
		if u, err := m.End(&ev); err != nil || u.TotalTokens != 201 || ev.FinishReason != "stop" || (ev.Response != nil) != keep {
			b.Fatalf("usage %+v, err %v, finish %q, response kept %v", u, err, ev.FinishReason, ev.Response != nil)
		}
	}
}
