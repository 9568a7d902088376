package batches_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// The official openai Node client (testdata/node/batch.mjs, the version
// package-lock.json pins; `make node-deps` installs it) drives the Batch API
// against the gateway on both backends: upload, create (retried with an
// Idempotency-Key), poll, list, download and parse, embeddings and chat
// completions each on two providers; a
// cancel; an expiry; validation errors. The test conducts what the script
// cannot: it opens the providers' gate once a batch is cancelling, and moves
// the clock past the window (and sweeps) once the lines of the batch that
// must expire are at the provider.
func TestOpenAINodeClient(t *testing.T) {
	dir := gatewaytest.NodeClient(t, filepath.Join("testdata", "node"))
	var clk *clock
	runEach(t, func(u *upstream) gatewaytest.Options {
		clk = &clock{}
		opts := options(u)
		opts.Now = clk.now
		return opts
	}, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, key := g.TeamKey()
		go func() { // the expiry
			for n := 0; n < 2; {
				select {
				case text := <-u.blocked:
					if strings.HasPrefix(text, "hold node expire") {
						n++
					}
				case <-ctx.Done():
					return
				}
			}
			clk.advance(25 * time.Hour)
			if _, err := g.Services.Batches.Sweep(ctx); err != nil {
				t.Error(err)
			}
		}()
		go func() { // the cancel
			admin := auth.Principal{Admin: true, TeamID: auth.AdminTeam}
			for ctx.Err() == nil {
				list, _, err := g.Services.Batches.List(ctx, admin, 100, "")
				for _, b := range list {
					if b.Status == batches.StatusCancelling {
						u.open()
						return
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		gatewaytest.RunNode(ctx, t, dir, "batch.mjs", "SLUICE_URL="+g.URL, "SLUICE_KEY="+key)
	})
}
