package lambdaedge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// scheduledEvent is the EventBridge event a scheduled function receives.
const scheduledEvent = `{"version":"0","id":"5d8a7e2c","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","time":"2026-01-15T13:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:123456789012:rule/sweep"],"detail":{}}`

func invocationCtx(t *testing.T, deadline time.Time) context.Context {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "b7a4c1e0-scheduled"})
	ctx, cancel := context.WithDeadline(ctx, deadline)
	t.Cleanup(cancel)
	return ctx
}

// TestScheduledStopsBeforeTheDeadline: the run's deadline is the
// invocation's less the margin.
func TestScheduledStopsBeforeTheDeadline(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	var got time.Time
	h := ScheduledFunction(func(ctx context.Context) error {
		got, _ = ctx.Deadline()
		return nil
	}, 10*time.Second)
	if _, err := h.Invoke(invocationCtx(t, deadline), []byte(scheduledEvent)); err != nil {
		t.Fatal(err)
	}
	if want := deadline.Add(-10 * time.Second); !got.Equal(want) {
		t.Errorf("the run's deadline is %v, want %v (the invocation's less the margin)", got, want)
	}
}

// TestScheduledRunOutOfTimeIsNoFailure: a run stopped by its deadline
// returns cleanly (the next run continues).
func TestScheduledRunOutOfTimeIsNoFailure(t *testing.T) {
	h := ScheduledFunction(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}, time.Second)
	if _, err := h.Invoke(invocationCtx(t, time.Now().Add(1100*time.Millisecond)), []byte(scheduledEvent)); err != nil {
		t.Errorf("a run stopped at its time limit failed the invocation: %v", err)
	}
}

// TestScheduledFailureFailsTheInvocation: any other error is the
// invocation's, so the error alarm sees it.
func TestScheduledFailureFailsTheInvocation(t *testing.T) {
	h := ScheduledFunction(func(ctx context.Context) error { return errors.New("3 files could not be removed") }, time.Second)
	_, err := h.Invoke(invocationCtx(t, time.Now().Add(time.Minute)), []byte(scheduledEvent))
	if err == nil || err.Error() != "3 files could not be removed" {
		t.Errorf("invocation error %v, want the run's", err)
	}
}
