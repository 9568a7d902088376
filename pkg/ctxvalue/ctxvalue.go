// Package ctxvalue carries one value of a type in a context layer of its
// own: the layer and the value are one allocation, where
// context.WithValue boxes the value and adds a node. The request path makes
// a few such layers a call (the principal, the pending log events); a
// caller that allocates per-request state anyway embeds them in it (Layer),
// so that they cost no allocation of their own.
package ctxvalue

import (
	"context"
	"fmt"
)

// key finds the layer of a V: one key type per value type.
type key[V any] struct{}

// Layer is a context layer carrying a V. With allocates one; a caller
// that allocates an object per request anyway may hold Layers in it and
// Wrap them, each once.
type Layer[V any] struct {
	context.Context
	v V
}

func (c *Layer[V]) Value(k any) any {
	if _, ok := k.(key[V]); ok {
		return &c.v
	}
	return c.Context.Value(k)
}

// String names the layer as context.WithValue's do.
func (c *Layer[V]) String() string { return fmt.Sprintf("%v.WithValue(%T)", c.Context, c.v) }

// Wrap makes c the layer over ctx carrying v: it returns c as the new
// context, and the carried copy of v (the caller may fill it in place).
// A Layer is wrapped once, before it is used as a context.
func (c *Layer[V]) Wrap(ctx context.Context, v V) (context.Context, *V) {
	c.Context, c.v = ctx, v
	return c, &c.v
}

// With returns ctx carrying v, and the carried copy (the caller may fill
// it in place).
func With[V any](ctx context.Context, v V) (context.Context, *V) {
	return new(Layer[V]).Wrap(ctx, v)
}

// From returns the V the nearest layer of ctx carries, or nil.
func From[V any](ctx context.Context) *V {
	p, _ := ctx.Value(key[V]{}).(*V)
	return p
}
