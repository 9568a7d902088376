// Package ctxvalue carries one value of a type in a context layer of its
// own: the layer and the value are one allocation, where
// context.WithValue boxes the value and adds a node. The request path makes
// a few such layers a call (the principal, the pending log events); a
// caller that allocates per-request state anyway may carry such values in a
// layer of its own that answers several keys (Is), so that they cost no
// allocation, and no step of every lookup, of their own.
package ctxvalue

import (
	"context"
	"fmt"
)

// key finds the layer of a V: one key type per value type.
type key[V any] struct{}

type layer[V any] struct {
	context.Context
	v V
}

func (c *layer[V]) Value(k any) any {
	if _, ok := k.(key[V]); ok {
		return &c.v
	}
	return c.Context.Value(k)
}

// String names the layer as context.WithValue's do.
func (c *layer[V]) String() string { return fmt.Sprintf("%v.WithValue(%T)", c.Context, c.v) }

// With returns ctx carrying v, and the carried copy (the caller may fill
// it in place).
func With[V any](ctx context.Context, v V) (context.Context, *V) {
	c := &layer[V]{Context: ctx, v: v}
	return c, &c.v
}

// Is reports whether k is the key From[V] looks up: a context layer of
// its own that carries a V (among others) answers it with a *V.
func Is[V any](k any) bool {
	_, ok := k.(key[V])
	return ok
}

// From returns the V the nearest layer of ctx carries, or nil.
func From[V any](ctx context.Context) *V {
	p, _ := ctx.Value(key[V]{}).(*V)
	return p
}
