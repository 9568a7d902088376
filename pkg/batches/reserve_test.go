package batches_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/batches"
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

// A run that died after showing lines gave back their shares of the
// batch's reservation; the run that takes its chunk over takes them back
// (the lines run again), so each line's share is given back once, and the
// batch's end releases exactly what is left: nothing stays reserved.
func TestADeadRunsSharesAreTakenBackAndTheRestReleasedOnce(t *testing.T) {
	u := newUpstream(t)
	opts := options(u, func(o *batches.Options) { o.Lease = 300 * time.Millisecond })
	opts.Jobs = nil // the test is the worker
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		key := g.NewKey(g.NewTeam(nil), map[string]any{"max_budget": 1.0})
		run := t.Name()
		lines := embeddingLines("emb", "l", 5, func(i int) string { return run + " a text of some length " + strconv.Itoa(i) })
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		if b.ReservedCost == nil || *b.ReservedCost <= 0 {
			t.Fatalf("created batch reserves %v, want its estimate", b.ReservedCost)
		}
		whole := *b.ReservedCost
		if got := reservedOf(t, g, key); got != whole {
			t.Fatalf("%v reserved, want the batch's %v", got, whole)
		}
		if err := handle(t, g, receive(t, g, 1)[0]); err != nil { // the plan
			t.Fatal(err)
		}
		if err := g.Services.Batches.ShowAsDeadRun(context.Background(), b.ID, 0, time.Now().Add(300*time.Millisecond), 2); err != nil {
			t.Fatal(err)
		}
		if got := reservedOf(t, g, key); got >= whole || got <= 0 {
			t.Fatalf("after the dead run showed 2 lines, %v reserved, want less than %v", got, whole)
		}
		b = drain(t, g, key, b.ID)
		if b.Status != batches.StatusCompleted || b.RequestCounts != (batches.RequestCounts{Total: 5, Completed: 5}) {
			t.Errorf("%s %+v", b.Status, b.RequestCounts)
		}
		if b.ReservedCost != nil {
			t.Errorf("the ended batch still reserves %v", *b.ReservedCost)
		}
		if b.ResponseCost <= 0 {
			t.Errorf("the batch's cost is %v, want what its 5 lines cost", b.ResponseCost)
		}
		if got := reservedOf(t, g, key); got != 0 {
			t.Errorf("%v still reserved once the batch ended, want 0", got)
		}
	})
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
			if cost, _ := got["response_cost"].(float64); cost <= 0 || cost >= whole {
				t.Errorf("the native batch's cost %v, want more than 0 and under its worst case %v", got["response_cost"], whole)
			}
			if v := reservedOf(t, g, key); v != 0 {
				t.Errorf("%v still reserved once the native batch ended", v)
			}
		})
	}
}
