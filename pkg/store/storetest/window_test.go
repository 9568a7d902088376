package storetest

import (
	"testing"
	"time"
)

// After WithinOneLimitWindow, the span fits in what is left of the
// current one-minute window.
func TestWithinOneLimitWindowLeavesTheSpan(t *testing.T) {
	const span = 2 * time.Second
	WithinOneLimitWindow(t, span)
	if left := time.Minute - time.Duration(time.Now().UnixNano()%int64(time.Minute)); left < span-50*time.Millisecond {
		t.Errorf("%s left of the window, want at least %s", left, span)
	}
}
