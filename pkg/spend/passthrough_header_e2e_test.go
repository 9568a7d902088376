package spend_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// passthroughEvent waits for the first passthrough call's log event the
// recorder holds.
func (b *eventRecorder) passthroughEvent() *logevent.Event {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b.mu.Lock()
		for _, ev := range b.events {
			if ev.Passthrough != nil {
				b.mu.Unlock()
				return ev
			}
		}
		b.mu.Unlock()
	}
	b.t.Fatal("no log event of a passthrough call")
	return nil
}

// A passthrough answer read whole (not streamed, of known length within the
// relay buffer) carries x-litellm-response-cost on every prefix, equal to
// its log event's response_cost; a stream's headers leave before its usage
// exists, so it carries none, and its log event has the cost.
func TestPassthroughAnswersCarryTheCostOfTheirLogEvent(t *testing.T) {
	anthropic, others := anthropicUpstream(t), googleAndBedrockUpstream(t)
	tokens := googletest.NewTokenServer(t)
	rec := &eventRecorder{t: t}
	opts := gatewaytest.Options{
		Env: map[string]string{"SA": tokens.ServiceAccountJSON("sa-project")},
		Config: "passthrough:\n" +
			"  anthropic: {api_base: " + anthropic.URL + ", api_key: sk-ant-provider}\n" +
			"  gemini: {api_base: " + others.URL + ", api_key: gemini-provider-key}\n" +
			"  vertex_ai: {api_base: " + others.URL + ", vertex_credentials: os.environ/SA}\n" +
			"  bedrock: {api_base: " + others.URL + ", aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret}\n",
		// No delivery job: every event stays on the bus, where it is read.
		Backend: func(b *store.Backend) { rec.Bus, rec.events = b.Bus, nil; b.Bus = rec },
	}
	const gemini = 100*1e-7 + 50*4e-7 // gemini-2.0-flash in the shipped table
	geminiBody := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	messages := func(stream bool) string {
		return `{"model":"claude-3-5-haiku-20241022","max_tokens":100,"stream":` + strconv.FormatBool(stream) + `,"messages":[{"role":"user","content":"hi"}]}`
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		rec.t = t
		_, key := g.TeamKey()
		for _, c := range []struct {
			path, body string
			stream     bool
			cost       float64
		}{
			{"/anthropic/v1/messages", messages(false), false, haiku},
			{"/gemini/v1beta/models/gemini-2.0-flash:generateContent", geminiBody, false, gemini},
			{"/vertex-ai/v1/publishers/google/models/gemini-2.0-flash:generateContent", geminiBody, false, gemini},
			{"/bedrock/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke",
				`{"anthropic_version":"bedrock-2023-05-31","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, false, haiku},
			{"/bedrock/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, false, haiku},
			{"/anthropic/v1/messages", messages(true), true, haiku},
			{"/gemini/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", geminiBody, true, gemini},
		} {
			rec.mu.Lock()
			rec.events = nil
			rec.mu.Unlock()
			r := g.Do("POST", c.path, key, c.body, "anthropic-version", "2023-06-01")
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", c.path, r.Status, r.Body)
			}
			ev := rec.passthroughEvent()
			if !near(ev.ResponseCost, c.cost) || ev.CostUnknown {
				t.Errorf("%s (stream %v): response_cost %v cost_unknown %v, want %v", c.path, c.stream, ev.ResponseCost, ev.CostUnknown, c.cost)
			}
			got := r.Header.Values("x-litellm-response-cost")
			if c.stream {
				if len(got) != 0 {
					t.Errorf("%s: a stream's headers carry a cost %q before its usage is known", c.path, got)
				}
				continue
			}
			if len(got) != 1 {
				t.Errorf("%s: x-litellm-response-cost %q, want one value", c.path, got)
				continue
			}
			if v := parse(t, got[0]); v != ev.ResponseCost {
				t.Errorf("%s: x-litellm-response-cost %v, the log event's response_cost %v", c.path, v, ev.ResponseCost)
			}
		}
	})
}
