package batches_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// reservedOf is what key's running batches hold of its budget, as stored.
func reservedOf(t *testing.T, g *gatewaytest.Gateway, key string) float64 {
	t.Helper()
	p, err := g.Services.Auth.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.Services.Budgets.Reserved(context.Background(), "key:"+p.KeyToken())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A native batch reserves its worst case at the batch prices when it is
// created; the poll that mirrors its end copies its results in, puts their
// cost on the batch and releases the reservation, once.
func TestANativeBatchReservesUntilItEnds(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			up := newBatchAPI(t, "/v1", "")
			az := newBatchAPI(t, "/openai", "api-version=2024-10-21")
			clk := &clock{}
			g := gatewaytest.Start(t, b, gatewaytest.Options{Config: nativeConfig(up.srv.URL, az.srv.URL), Now: clk.now, Jobs: []string{"callback-delivery"}})
			ctx := context.Background()
			key := g.NewKey(g.NewTeam(nil), map[string]any{"max_budget": 1.0})
			file := uploadInput(t, g, key, jsonl(nativeChatLines("gpt-batch", "a", "b", "fail")))
			r := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"},
				"Custom-Llm-Provider", "openai")
			if r.Status != 200 {
				t.Fatalf("create: %d %s", r.Status, r.Body)
			}
			created := r.JSON(t)
			id := created["id"].(string)
			whole, ok := created["reserved_cost"].(float64)
			if !ok || whole <= 0 || reservedOf(t, g, key) != whole {
				t.Fatalf("created %v reserves %v, %v stored", id, created["reserved_cost"], reservedOf(t, g, key))
			}
			pid, _ := up.only()
			up.complete(pid)
			clk.advance(10 * time.Second)
			for range 2 { // the second poll finds the batch ended
				if _, err := g.Services.Batches.PollNative(ctx); err != nil {
					t.Fatal(err)
				}
			}
			got := g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t)
			if got["status"] != "completed" || got["reserved_cost"] != nil {
				t.Fatalf("ended batch: %v, reserved_cost %v", got["status"], got["reserved_cost"])
			}
			// Its two answered lines (3 input and 2 output tokens each) at
			// gpt-4o-mini's batch prices in the shipped table, half its
			// normal ones; the failed line cost nothing.
			const want = 2 * (3*7.5e-8 + 2*3e-7)
			if cost, _ := got["response_cost"].(float64); math.Abs(cost-want) > 1e-12 || cost >= whole {
				t.Errorf("the native batch's cost %v, want %v at the batch prices, under its worst case %v", got["response_cost"], want, whole)
			}
			if v := reservedOf(t, g, key); v != 0 {
				t.Errorf("%v still reserved once the native batch ended", v)
			}
		})
	}
}
