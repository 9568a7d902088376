package lambdaedge

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

// Scheduled returns the Lambda handler of a scheduled function (EventBridge;
// the event's content is ignored): each invocation runs run once, with the
// invocation's deadline brought margin earlier, so that a run that cannot
// finish stops, logs and returns on its own instead of being cut off. A run
// stopped by that deadline is not a failure (the next run continues where
// it stopped); any other error fails the invocation, which the function's
// error alarm sees.
func Scheduled(run func(context.Context) error, margin time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx = invocationContext(ctx, "")
		runCtx := ctx
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			runCtx, cancel = context.WithDeadline(ctx, deadline.Add(-margin))
			defer cancel()
		}
		err := run(runCtx)
		if err != nil && ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded) {
			slog.InfoContext(ctx, "run stopped at its time limit; the next run continues", "error", err)
			return nil
		}
		return err
	}
}

// ScheduledFunction is the Lambda handler of a scheduled function: see
// Scheduled.
func ScheduledFunction(run func(context.Context) error, margin time.Duration) lambda.Handler {
	return lambda.NewHandler(Scheduled(run, margin))
}
