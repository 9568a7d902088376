// Command file-content is the Lambda function that serves GET
// /v1/files/{file_id}/content (streamed).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// function is this function's name in the route table (pkg/server), which
// says which routes it serves and whether they stream.
const function = "file-content"

func main() {
	slog.SetDefault(lambdaedge.NewLogger(os.Getenv))
	// Once per container, before the first event: settings, config, secrets,
	// the AWS clients and the provider HTTP client.
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
