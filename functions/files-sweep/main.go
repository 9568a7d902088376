// Command files-sweep is the scheduled Lambda function (EventBridge, hourly)
// that finishes what file expiry and deletion leave behind: expired files
// and uploads lose their bytes and records, interrupted deletions complete
// (files.Service.Sweep). The local process sweeps in-process instead.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge"
	"github.com/sluice-gateway/sluice/pkg/logging"
)

// stopBefore is how long before the invocation's deadline the sweep stops,
// so it returns and logs what it did instead of being cut off; the next run
// picks up where it stopped.
const stopBefore = 10 * time.Second

func main() {
	slog.SetDefault(lambdaedge.NewLogger(os.Getenv))
	// Once per container: settings, config, secrets and the AWS clients.
	g, err := gateway.Open(context.Background(), os.Getenv)
	if err != nil {
		lambdaedge.InitFailed(err)
	}
	lambdaedge.Start(lambda.NewHandler(func(ctx context.Context) error {
		return sweep(ctx, g.Services.Files)
	}))
}

// sweep runs one sweep within the invocation's time. Running out of time is
// not a failure; a sweep that could not finish some items is (the error
// alarm sees it, and the next run retries them).
func sweep(ctx context.Context, s *files.Service) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		ctx = logging.WithAttrs(ctx, slog.String("aws_request_id", lc.AwsRequestID))
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-stopBefore))
		defer cancel()
	}
	res, err := s.Sweep(ctx)
	attrs := []any{"files", res.Files, "uploads", res.Uploads, "failed", res.Failed}
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		slog.InfoContext(ctx, "files: sweep stopped at its time limit; the next run continues", attrs...)
		return nil
	case err != nil:
		slog.ErrorContext(ctx, "files: sweep incomplete", append(attrs, "error", err)...)
		return err
	}
	slog.InfoContext(ctx, "files: sweep done", attrs...)
	return nil
}
