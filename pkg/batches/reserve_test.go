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
