package auth

import "context"

// principalKey finds a request's principal in a context.
type principalKey struct{}

// principalContext is the context layer that carries a principal (Value
// answers principalKey with a pointer to it): one allocation, not a boxed
// principal and a context.WithValue node.
type principalContext struct {
	context.Context
	p Principal
}

func (c *principalContext) Value(key any) any {
	if key == (principalKey{}) {
		return &c.p
	}
	return c.Context.Value(key)
}

// String names the layer as context.WithValue's do.
func (c *principalContext) String() string { return "auth.Principal(" + c.p.TeamID + ")" }

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return &principalContext{Context: ctx, p: p}
}

// FromContext returns the principal the request acts as. Routes that require
// a key always have one; public routes get the zero Principal.
func FromContext(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return *p
	}
	return Principal{}
}
