package logevent

import (
	"context"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/auth"
)

// BenchmarkReset is the start of a call's event in a structure of the
// call's (pkg/modelcall), as every model call makes it.
func BenchmarkReset(b *testing.B) {
	ctx := context.Background()
	p := auth.Principal{TeamID: "team"}
	evs := make([]Event, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		evs[i%len(evs)].Reset(ctx, p, CallCompletion)
	}
}
