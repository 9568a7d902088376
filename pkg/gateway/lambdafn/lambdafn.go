// Package lambdafn starts an HTTP Lambda function: the composition every
// functions/<fn>/main.go shares, so each main is one call naming its function.
package lambdafn

import (
	"context"
	"log/slog"
	"os"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// Serve runs function, a name from the route table (pkg/server), as a Lambda
// function: once per container, before the first event, it opens the gateway
// (settings, config, secrets, AWS clients, the provider HTTP client) and
// mounts the function's routes; then it answers events, streamed or buffered
// as the route table says. An init failure is reported to the Runtime API.
func Serve(function string) {
	slog.SetDefault(lambdaedge.NewLogger(os.Getenv))
	g, err := gateway.Open(context.Background(), os.Getenv)
	if err != nil {
		lambdaedge.InitFailed(err)
	}
	for _, w := range g.Config.Warnings {
		slog.Warn(w)
	}
	h, err := server.Handler(g.Services, server.Options{Function: function})
	if err != nil {
		lambdaedge.InitFailed(err)
	}
	stream, err := server.Streams(function)
	if err != nil {
		lambdaedge.InitFailed(err)
	}
	lambdaedge.Start(lambdaedge.HTTPFunction(h, stream))
}
