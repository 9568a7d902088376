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

// pair is a layer of its own answering the keys of a and b, as From finds
// With's.
type pair struct {
	context.Context
	a a
	b b
}

func (p *pair) Value(k any) any {
	switch {
	case Is[a](k):
		return &p.a
	case Is[b](k):
		return &p.b
	}
	return p.Context.Value(k)
}

func TestIsLetsALayerOfItsOwnAnswerFrom(t *testing.T) {
	ctx, _ := With(context.Background(), 7) // an int below
	ctx = &pair{Context: ctx, a: a{1}, b: b{2}}
	if got := From[a](ctx); got == nil || got.n != 1 {
		t.Errorf("a: %v, want 1", got)
	}
	if got := From[b](ctx); got == nil || got.n != 2 {
		t.Errorf("b: %v, want 2", got)
	}
	if got := From[int](ctx); got == nil || *got != 7 {
		t.Errorf("int: %v, want 7 from the layer below", got)
	}
	if Is[a](struct{}{}) {
		t.Error("Is[a] took another key")
	}
}
