package spend_test

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// eventRecorder keeps the log events published on the bus it wraps.
type eventRecorder struct {
	store.Bus
	t      *testing.T
	mu     sync.Mutex
	events []*logevent.Event
}

func (b *eventRecorder) Publish(ctx context.Context, events ...store.Event) error {
	for _, e := range events {
		evs, err := logevent.DecodeEvents(e.Body)
		if err != nil {
			b.t.Errorf("a published bus event is not log events: %v", err)
		}
		b.mu.Lock()
		b.events = append(b.events, evs...)
		b.mu.Unlock()
	}
	return b.Bus.Publish(ctx, events...)
}

// of waits for the event of the call whose model group is model.
func (b *eventRecorder) of(model string) *logevent.Event {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b.mu.Lock()
		for _, ev := range b.events {
			if ev.ModelGroup == model {
				b.mu.Unlock()
				return ev
			}
		}
		b.mu.Unlock()
	}
	b.t.Fatalf("no log event of a %s call", model)
	return nil
}

// A call's log event carries its cost: response_cost for a priced model;
// 0 with cost_unknown for a model without a price; and, for a stream the
// client cut before its usage came, the cost of what was relayed, marked
// estimated.
func TestTheLogEventSaysWhatTheCallCostAndHowItWasKnown(t *testing.T) {
	up := openAIUpstream(t)
	rec := &eventRecorder{t: t}
	opts := gatewaytest.Options{
		Config: `
model_list:
  - model_name: chat
    litellm_params: {model: openai/gpt-x, api_base: "` + up.URL + `/v1", api_key: k, input_cost_per_token: 1e-6, output_cost_per_token: 2e-6}
  - model_name: unpriced
    litellm_params: {model: openai/no-such-model-anywhere, mock_response: "hi"}
`,
		// No delivery job: every event goes to the bus, where it is read.
		Backend: func(b *store.Backend) { rec.Bus, rec.events = b.Bus, nil; b.Bus = rec },
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		rec.t = t
		_, key := g.TeamKey()
		if r := g.Do("POST", "/v1/completions", key, map[string]any{"model": "chat", "prompt": "hi"}); r.Status != 200 {
			t.Fatalf("completions: %d %s", r.Status, r.Body)
		}
		if ev := rec.of("chat"); !near(ev.ResponseCost, callCost) || ev.CostUnknown || ev.CostEstimated {
			t.Errorf("priced call: response_cost %v cost_unknown %v estimated %v, want %v false false", ev.ResponseCost, ev.CostUnknown, ev.CostEstimated, callCost)
		}
		if r := g.Do("POST", "/v1/chat/completions", key, map[string]any{"model": "unpriced", "messages": []map[string]string{{"role": "user", "content": "hi"}}}); r.Status != 200 {
			t.Fatalf("unpriced chat: %d %s", r.Status, r.Body)
		}
		if ev := rec.of("unpriced"); ev.ResponseCost != 0 || !ev.CostUnknown || ev.TotalTokens == 0 {
			t.Errorf("unpriced call: response_cost %v cost_unknown %v tokens %d, want 0, true and its tokens", ev.ResponseCost, ev.CostUnknown, ev.TotalTokens)
		}

		rec.mu.Lock()
		rec.events = nil
		rec.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"hang"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), "long answer") {
		}
		cancel()
		resp.Body.Close()
		if ev := rec.of("chat"); ev.ResponseCost <= 0 || ev.ResponseCost >= callCost || !ev.CostEstimated || ev.CostUnknown {
			t.Errorf("cut stream: response_cost %v estimated %v cost_unknown %v, want a part of %v, true, false", ev.ResponseCost, ev.CostEstimated, ev.CostUnknown, callCost)
		}
	})
}

// syncLog is a log output written by concurrent handlers.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A key's spend crossing its soft budget writes one warning log line and
// one budget_alert log event for the period, and refuses nothing.
func TestCrossingASoftBudgetWarnsOncePerPeriod(t *testing.T) {
	u := newUpstream(t, 0)
	rec := &eventRecorder{t: t}
	opts := options(u, nil)
	opts.Backend = func(b *store.Backend) { rec.Bus, rec.events = b.Bus, nil; b.Bus = rec }
	logs := &syncLog{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		rec.t = t
		key := g.NewKey(g.NewTeam(nil), map[string]any{"soft_budget": callCost / 2, "budget_duration": "1d"})
		before := strings.Count(logs.String(), "soft budget crossed")
		for i := range 4 {
			if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
				t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
			}
			if i == 0 {
				waitReport(t, g, key, "api_key", 1) // the next admission sees the spend
			}
		}
		if n := strings.Count(logs.String(), "soft budget crossed") - before; n != 1 {
			t.Errorf("%d soft budget warnings, want 1:\n%s", n, logs.String())
		}
		alert := rec.of("") // an alert names no model
		if a := alert.BudgetAlert; alert.CallType != logevent.CallBudgetAlert || a == nil || a.Type != "soft_budget_crossed" ||
			a.Scope != "key" || !near(a.SoftBudget, callCost/2) || a.Spend < callCost/2 {
			t.Errorf("alert event %s %+v", alert.CallType, alert.BudgetAlert)
		}
		time.Sleep(200 * time.Millisecond) // a second one would be published by now
		alerts := 0
		rec.mu.Lock()
		for _, ev := range rec.events {
			if ev.CallType == logevent.CallBudgetAlert {
				alerts++
			}
		}
		rec.mu.Unlock()
		if alerts != 1 {
			t.Errorf("%d budget_alert log events, want 1", alerts)
		}
	})
}
