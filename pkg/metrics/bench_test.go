package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// The per-call cost of the instruments on the relay path: the middleware's
// Request and the emitter's ObserveEvent, once per call each.

func benchMetrics() *Metrics {
	cfg := &config.Config{ModelList: []config.Deployment{{ModelName: "gpt", Params: config.Params{Model: "openai/gpt-4o-mini"}}}}
	return New(cfg, Options{})
}

func BenchmarkRequest(b *testing.B) {
	m := benchMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.Request("/v1/embeddings", 200, "", 3*time.Millisecond, 200*time.Microsecond, "")
	}
}

func BenchmarkObserveEvent(b *testing.B) {
	m := benchMetrics()
	ev := &logevent.Event{Status: logevent.StatusSuccess, ModelGroup: "gpt", ModelID: "gpt#0", CustomLLMProvider: "openai",
		StartTime: 1, EndTime: 1.003, PromptTokens: 7, CompletionTokens: 5, ResponseCost: 0.0001,
		Metadata: logevent.Metadata{UserAPIKeyTeamID: "team-1"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveEvent(ctx, ev)
	}
}

// BenchmarkCallParallel is a call's two measurements (Request and
// ObserveEvent) from every core at once, as under load: what the shared
// caches cost when lookups contend.
func BenchmarkCallParallel(b *testing.B) {
	m := benchMetrics()
	ev := &logevent.Event{Status: logevent.StatusSuccess, ModelGroup: "gpt", ModelID: "gpt#0", CustomLLMProvider: "openai",
		StartTime: 1, EndTime: 1.003, PromptTokens: 7, CompletionTokens: 5, ResponseCost: 0.0001,
		Metadata: logevent.Metadata{UserAPIKeyTeamID: "team-1"}}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Request("/v1/embeddings", 200, "", 3*time.Millisecond, 200*time.Microsecond, "")
			m.ObserveEvent(ctx, ev)
		}
	})
}
