package ctxvalue

import (
	"context"
	"testing"
)

type a struct{ n int }
type b struct{ n int }

func TestEachTypeFindsItsNearestLayer(t *testing.T) {
	ctx, _ := With(context.Background(), a{1})
	ctx, pb := With(ctx, b{2})
	ctx, _ = With(ctx, a{3})
	pb.n = 4 // filled in place
	if got := From[a](ctx); got == nil || got.n != 3 {
		t.Errorf("a: %v, want 3", got)
	}
	if got := From[b](ctx); got == nil || got.n != 4 {
		t.Errorf("b: %v, want 4", got)
	}
	if got := From[int](ctx); got != nil {
		t.Errorf("int: %v, want nil", got)
	}
}

func TestALayerIsOneAllocation(t *testing.T) {
	parent := context.Background()
	var ctx context.Context // kept, so the layer escapes as a request's does
	n := testing.AllocsPerRun(100, func() { ctx, _ = With(parent, a{1}) })
	_ = ctx
	if n != 1 {
		t.Errorf("%v allocations, want 1", n)
	}
}
