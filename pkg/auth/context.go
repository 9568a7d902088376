package auth

import (
	"context"

	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
)

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	ctx, _ = ctxvalue.With(ctx, p)
	return ctx
}

// FromContext returns the principal the request acts as. Routes that require
// a key always have one; public routes get the zero Principal.
func FromContext(ctx context.Context) Principal {
	if p := ctxvalue.From[Principal](ctx); p != nil {
		return *p
	}
	return Principal{}
}
