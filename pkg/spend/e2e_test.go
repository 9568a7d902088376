package spend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks/delivery"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// upstream is an OpenAI-compatible provider answering every chat call
// with 100 prompt and 50 completion tokens, after delay.
type upstream struct {
	*httptest.Server
	delay time.Duration
	calls atomic.Int64
}

func newUpstream(t *testing.T, delay time.Duration) *upstream {
	u := &upstream{delay: delay}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		var req struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		time.Sleep(u.delay)
		usage := `{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}`
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":`+usage+`}`+"\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":`+usage+`}`)
	}))
	t.Cleanup(u.Close)
	return u
}

// callCost is what one upstream chat call costs at the test's prices.
const callCost = 100*1e-6 + 50*2e-6

func options(u *upstream, now func() time.Time) gatewaytest.Options {
	return gatewaytest.Options{
		Config: `
model_list:
  - model_name: chat
    litellm_params: {model: openai/gpt-x, api_base: "` + u.URL + `/v1", api_key: k, input_cost_per_token: 1e-6, output_cost_per_token: 2e-6}
  - model_name: mock-gpt
    litellm_params: {model: openai/gpt-4o-mini, mock_response: "hello there"}
  - model_name: mock-embed
    litellm_params: {model: openai/text-embedding-3-small, mock_response: [0.6, 0.8]}
  - model_name: unpriced
    litellm_params: {model: openai/no-such-model-anywhere, mock_response: "hi"}
`,
		Jobs: []string{"callback-delivery"},
		Now:  now,
	}
}

var chat = map[string]any{"model": "chat", "messages": []map[string]string{{"role": "user", "content": "hi"}}}

func chatWith(fields map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range chat {
		out[k] = v
	}
	for k, v := range fields {
		out[k] = v
	}
	return out
}

// waitReport polls the key's report for today until it counts requests.
func waitReport(t *testing.T, g *gatewaytest.Gateway, key, groupBy string, requests int64) map[string]any {
	t.Helper()
	day := time.Now().UTC().Format(time.DateOnly)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := g.Do("GET", "/global/spend/report?start_date="+day+"&end_date="+day+"&group_by="+groupBy, key, nil)
		if resp.Status != 200 {
			t.Fatalf("report: %d %s", resp.Status, resp.Body)
		}
		rep := resp.JSON(t)
		total := rep["total"].(map[string]any)
		if int64(total["requests"].(float64)) >= requests || time.Now().After(deadline) {
			if got := int64(total["requests"].(float64)); got != requests {
				t.Fatalf("report counts %d requests, want %d: %s", got, requests, resp.Body)
			}
			return rep
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func usageCost(t *testing.T, body []byte, in, out float64) float64 {
	t.Helper()
	var a struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return float64(a.Usage.PromptTokens)*in + float64(a.Usage.CompletionTokens)*out
}

func TestEveryCallIsPricedAndCountedOnce(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		team, key := g.TeamKey()
		want := 0.0
		header := func(what string, r gatewaytest.Response, want float64) {
			t.Helper()
			got, err := strconv.ParseFloat(r.Header.Get("x-litellm-response-cost"), 64)
			if err != nil || !near(got, want) {
				t.Errorf("%s: x-litellm-response-cost %q, want %v", what, r.Header.Get("x-litellm-response-cost"), want)
			}
		}
		r := g.Do("POST", "/v1/chat/completions", key, chat)
		if r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		header("chat", r, callCost)
		want += callCost
		r = g.Do("POST", "/v1/chat/completions", key, chatWith(map[string]any{"stream": true}))
		if r.Status != 200 || !strings.Contains(string(r.Body), "[DONE]") {
			t.Fatalf("streamed chat: %d %s", r.Status, r.Body)
		}
		if v := r.Header.Values("x-litellm-response-cost"); len(v) != 0 {
			t.Errorf("a stream's headers carry a cost %q before its usage is known", v)
		}
		want += callCost
		r = g.Do("POST", "/v1/chat/completions", key, chatWith(map[string]any{"model": "mock-gpt"}))
		if r.Status != 200 {
			t.Fatalf("mock chat: %d %s", r.Status, r.Body)
		}
		mock := usageCost(t, r.Body, 1.5e-7, 6e-7) // gpt-4o-mini in the shipped table
		header("mock chat", r, mock)
		want += mock
		r = g.Do("POST", "/v1/embeddings", key, map[string]any{"model": "mock-embed", "input": []string{"one two three", "four"}})
		if r.Status != 200 {
			t.Fatalf("embeddings: %d %s", r.Status, r.Body)
		}
		// The mock's vectors are written as they are encoded (no length):
		// no header, the log event has the cost.
		want += usageCost(t, r.Body, 2e-8, 0)
		r = g.Do("POST", "/v1/chat/completions", key, chatWith(map[string]any{"model": "unpriced"}))
		if r.Status != 200 {
			t.Fatalf("unpriced chat: %d %s", r.Status, r.Body)
		}
		if v := r.Header.Values("x-litellm-response-cost"); len(v) != 0 {
			t.Errorf("an unpriced model's answer carries a cost %q", v)
		}
		rep := waitReport(t, g, key, "team", 5)
		got := rep["total"].(map[string]any)["spend"].(float64)
		if !near(got, want) {
			t.Errorf("spend %v, want %v (an unpriced model counts 0)", got, want)
		}
		data := rep["data"].([]any)
		if len(data) != 1 || data[0].(map[string]any)["group"] != team || data[0].(map[string]any)["group_alias"] != "test" {
			t.Errorf("rows %v, want one of team %s", data, team)
		}
		models := waitReport(t, g, key, "model", 5)["data"].([]any)
		if len(models) != 4 {
			t.Errorf("model rows %v, want chat, mock-gpt, mock-embed, unpriced", models)
		}
		info := g.Do("GET", "/key/info", key, nil).JSON(t)["info"].(map[string]any)
		if !near(info["spend"].(float64), want) {
			t.Errorf("/key/info spend %v, want %v", info["spend"], want)
		}
	})
}

// overBudget checks that r is the budget refusal.
func overBudget(t *testing.T, what string, r gatewaytest.Response) {
	t.Helper()
	if r.Status != 400 || r.ErrorCode(t) != spend.CodeBudgetExceeded {
		t.Errorf("%s: %d %s, want 400 budget_exceeded", what, r.Status, r.Body)
		return
	}
	var e struct {
		Error struct{ Type, Message string }
	}
	json.Unmarshal(r.Body, &e)
	if e.Error.Type != spend.CodeBudgetExceeded || !strings.HasPrefix(e.Error.Message, "Budget has been exceeded! Current cost: ") ||
		!strings.Contains(e.Error.Message, "Max budget: ") {
		t.Errorf("%s: error %+v", what, e.Error)
	}
}

func TestABudgetIsCheckedOnEveryRouteThatSpends(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		u.calls.Store(0)
		team := g.NewTeam(nil)
		broke := g.NewKey(team, map[string]any{"max_budget": 0})
		for _, path := range []string{"/v1/chat/completions", "/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/moderations", "/v1/moderations", "/v1/batches"} {
			overBudget(t, path, g.Do("POST", path, broke, chat))
		}
		for _, prefix := range []string{"/vertex-ai", "/vertex_ai", "/bedrock", "/anthropic", "/gemini"} {
			for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
				overBudget(t, m+" "+prefix, g.Do(m, prefix+"/v1/anything", broke, "{}"))
			}
		}
		if u.calls.Load() != 0 {
			t.Errorf("the provider was called %d times for refused calls", u.calls.Load())
		}
		// The key can still read its own info; a team mate without a
		// budget still calls.
		if r := g.Do("GET", "/key/info", broke, nil); r.Status != 200 {
			t.Errorf("/key/info of a key over budget: %d %s", r.Status, r.Body)
		}
		if r := g.Do("POST", "/v1/chat/completions", g.NewKey(team, nil), chat); r.Status != 200 {
			t.Errorf("a key without a budget: %d %s", r.Status, r.Body)
		}
		// A team budget refuses every key of the team; lifting it admits.
		if r := g.Do("POST", "/team/update", g.MasterKey, map[string]any{"team_id": team, "max_budget": 0}); r.Status != 200 {
			t.Fatalf("/team/update: %d %s", r.Status, r.Body)
		}
		other := g.NewKey(team, nil)
		overBudget(t, "team budget", g.Do("POST", "/v1/chat/completions", other, chat))
		g.Do("POST", "/team/update", g.MasterKey, map[string]any{"team_id": team, "max_budget": nil})
		if r := g.Do("POST", "/v1/chat/completions", other, chat); r.Status != 200 {
			t.Errorf("after the team budget was lifted: %d %s", r.Status, r.Body)
		}
		// The master key has no budget.
		if r := g.Do("POST", "/v1/chat/completions", g.MasterKey, chat); r.Status != 200 {
			t.Errorf("master key: %d %s", r.Status, r.Body)
		}
	})
}

func TestABudgetRefusesOnceSpentAndResetsAtItsPeriodsEnd(t *testing.T) {
	u := newUpstream(t, 0)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	gatewaytest.Run(t, options(u, clock), func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(nil)
		key := g.NewKey(team, map[string]any{"max_budget": 2.5 * callCost, "budget_duration": "1h", "soft_budget": callCost})
		for i := range 3 {
			if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
				t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
			}
		}
		waitReport(t, g, key, "api_key", 3)
		overBudget(t, "after 3 calls on a budget of 2.5", g.Do("POST", "/v1/chat/completions", key, chat))
		info := g.Do("GET", "/key/info", key, nil).JSON(t)["info"].(map[string]any)
		if !near(info["spend"].(float64), 3*callCost) || !near(info["max_budget"].(float64), 2.5*callCost) ||
			info["budget_duration"] != "1h" || info["budget_reset_at"] == nil || !near(info["soft_budget"].(float64), callCost) {
			t.Errorf("/key/info: %v", info)
		}
		reset, err := time.Parse(time.RFC3339Nano, info["budget_reset_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = reset.Add(-time.Second)
		mu.Unlock()
		overBudget(t, "a second before the reset", g.Do("POST", "/v1/chat/completions", key, chat))
		mu.Lock()
		now = reset.Add(time.Second)
		mu.Unlock()
		if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
			t.Errorf("after the reset: %d %s", r.Status, r.Body)
		}
		// Raising the budget admits at once.
		mu.Lock()
		now = time.Now()
		mu.Unlock()
	})
}

func TestCallsInFlightCountAgainstTheBudget(t *testing.T) {
	u := newUpstream(t, 300*time.Millisecond)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(nil)
		// One call to learn what a call costs, then room for 10 more.
		key := g.NewKey(team, map[string]any{"max_budget": 11 * callCost})
		if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
			t.Fatalf("first call: %d %s", r.Status, r.Body)
		}
		waitReport(t, g, key, "api_key", 1)
		u.calls.Store(0)
		var admitted, refused atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status {
				case 200:
					admitted.Add(1)
				case 400:
					refused.Add(1)
				default:
					t.Errorf("%d %s", r.Status, r.Body)
				}
			}()
		}
		wg.Wait()
		// The first call is counted twice until its count settles (stored,
		// and recent in this process): 9 or 10 admitted.
		t.Logf("%d of 64 concurrent calls admitted", admitted.Load())
		if n := admitted.Load(); n < 8 || n > 11 || u.calls.Load() != n {
			t.Errorf("%d of 64 admitted (provider called %d times), refused %d; want about 10", n, u.calls.Load(), refused.Load())
		}
	})
}

func TestACrashBetweenTheCallAndItsCountCountsItOnce(t *testing.T) {
	u := newUpstream(t, 0)
	opts := options(u, nil)
	opts.Jobs = nil // the events stay in the delivery queue
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		for range 3 {
			if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
		}
		ctx := context.Background()
		job, _ := server.LookupJob("callback-delivery")
		var handled int
		deadline := time.Now().Add(10 * time.Second)
		for handled < 3 && time.Now().Before(deadline) {
			msgs, err := g.Backend.Deliveries.Receive(ctx, 10, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				// The process that received it dies before its count
				// (nothing to do here); the next one counts it and dies
				// before the ack; another (fresh services, nothing in
				// memory) gets it again.
				if err := job.Handle(g.Services)(ctx, m); err != nil {
					t.Fatal(err)
				}
				restarted, err := server.NewServices(server.Deps{Settings: g.Services.Settings, Config: g.Services.Config, Backend: g.Backend, MasterKey: g.MasterKey})
				if err != nil {
					t.Fatal(err)
				}
				if err := job.Handle(restarted)(ctx, m); err != nil {
					t.Fatal(err)
				}
				if err := g.Backend.Deliveries.Ack(ctx, m); err != nil {
					t.Fatal(err)
				}
				msg, err := delivery.DecodeMessage(m)
				if err != nil {
					t.Fatal(err)
				}
				if msg.Name == "" {
					t.Errorf("message %s has no name: it was counted event by event, not as the message", m.ID)
				}
				handled += len(msg.Events)
			}
		}
		rep := waitReport(t, g, key, "api_key", 3)
		if got := rep["total"].(map[string]any)["spend"].(float64); !near(got, 3*callCost) {
			t.Errorf("spend %v, want %v", got, 3*callCost)
		}
	})
}

// A dead letter (the delivery worker's, for one callback) re-driven to the
// delivery queue is not counted again: its events were counted before the
// delivery that gave up on them — and it carries no message name, so a
// record an event would not find them.
func TestARedrivenDeadLetterIsNotCountedAgain(t *testing.T) {
	u := newUpstream(t, 0)
	opts := options(u, nil)
	opts.Jobs = nil // the events stay in the delivery queue
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		ctx := context.Background()
		job, _ := server.LookupJob("callback-delivery")
		msgs, err := g.Backend.Deliveries.Receive(ctx, 10, 5*time.Second)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("received %d messages (%v), want the call's", len(msgs), err)
		}
		if err := job.Handle(g.Services)(ctx, msgs[0]); err != nil {
			t.Fatal(err)
		}
		ev, err := store.DecodeEvent(msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		dead := store.Event{Attributes: map[string]string{logevent.AttrTeam: ev.Attributes[logevent.AttrTeam],
			delivery.AttrCallback: "no-such-callback", delivery.AttrError: "gave up", delivery.AttrReceives: "5"}, Body: ev.Body}
		// Its destination is gone: delivering it may fail; counting it must not happen.
		_ = job.Handle(g.Services)(ctx, store.Message{ID: "dead-1", Body: store.EncodeEvent(dead), Receives: 1})
		rep := waitReport(t, g, key, "api_key", 1)
		if got := rep["total"].(map[string]any)["spend"].(float64); !near(got, callCost) {
			t.Errorf("spend %v, want %v", got, callCost)
		}
	})
}

func TestATeamKeyReportsItsOwnTeamOnly(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		teamA, keyA := g.TeamKey()
		_, keyB := g.TeamKey()
		g.Do("POST", "/v1/chat/completions", keyA, chat)
		g.Do("POST", "/v1/chat/completions", keyB, chat)
		g.Do("POST", "/v1/chat/completions", keyB, chat)
		waitReport(t, g, g.MasterKey, "team", 3)
		for _, groupBy := range []string{"team", "api_key", "model"} {
			rep := waitReport(t, g, keyA, groupBy, 1)
			if groupBy == "team" && rep["data"].([]any)[0].(map[string]any)["group"] != teamA {
				t.Errorf("team report of team A: %v", rep["data"])
			}
		}
		day := time.Now().UTC().Format(time.DateOnly)
		for q, code := range map[string]string{
			"start_date=" + day + "&end_date=" + day + "&group_by=user": "invalid_value",
			"start_date=2026-13-01&end_date=" + day:                     "invalid_value",
			"start_date=" + day + "&end_date=2020-01-01":                "invalid_value",
			"end_date=" + day: "missing_required_parameter",
		} {
			if r := g.Do("GET", "/global/spend/report?"+q, keyA, nil); r.Status != 400 || r.ErrorCode(t) != code {
				t.Errorf("%s: %d %s, want 400 %s", q, r.Status, r.Body, code)
			}
		}
	})
}
