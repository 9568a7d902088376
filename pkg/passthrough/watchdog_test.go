package passthrough

import (
	"context"
	"errors"
	"testing"
	"time"
)

// readFor reads every 10 ms for d, or until ctx ends.
func readFor(ctx context.Context, w *watchdog, d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		w.read()
		time.Sleep(10 * time.Millisecond)
	}
}

func waitCause(t *testing.T, ctx context.Context, want error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("not cancelled; want %v", want)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, want) {
		t.Fatalf("cancelled by %v, want %v", cause, want)
	}
}

// An answer that keeps arriving is not idle, however long it runs within
// the call's limit; once it stops, the idle limit ends it.
func TestWatchdogIdleCountsFromTheLastRead(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := startWatchdog(cancel, time.Minute)
	defer w.stop()
	w.answering(60 * time.Millisecond)
	readFor(ctx, w, 300*time.Millisecond) // 5 idle limits, read all along
	if err := context.Cause(ctx); err != nil {
		t.Fatalf("cancelled while the answer kept arriving: %v", err)
	}
	waitCause(t, ctx, errIdleTimeout)
}

// The call's limit holds while the answer arrives.
func TestWatchdogCallLimitCutsAnActiveAnswer(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := startWatchdog(cancel, 150*time.Millisecond)
	defer w.stop()
	w.answering(100 * time.Millisecond)
	readFor(ctx, w, 5*time.Second)
	waitCause(t, ctx, errCallTimeout)
}

// Before the answer starts only the call's limit counts.
func TestWatchdogBeforeTheAnswer(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := startWatchdog(cancel, 100*time.Millisecond)
	defer w.stop()
	waitCause(t, ctx, errCallTimeout)
}
