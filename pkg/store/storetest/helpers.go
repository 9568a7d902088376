package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"
)

// uniq returns a short random token for keys, names and scopes, so that runs
// never collide even on a backend shared between opens.
func uniq() string {
	return strings.ToLower(rand.Text()[:12])
}

// testCtx bounds a whole subtest, so that a hung backend fails the test
// instead of stalling the run.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// wantIs fails the test unless errors.Is(err, target).
func wantIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// ok fails the test on err.
func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// WithinOneLimitWindow waits, when the current one-minute limit window ends
// within the next span, for the next window to begin: the limiters count
// fixed windows of the wall clock, and a case that expects its requests
// counted together (a 429 after the limit) must not straddle two. span is
// how long the case's limited requests take at most.
func WithinOneLimitWindow(t testing.TB, span time.Duration) {
	t.Helper()
	left := time.Minute - time.Duration(time.Now().UnixNano()%int64(time.Minute))
	if left < span {
		t.Logf("waiting %s for the next rate-limit window", left.Round(time.Millisecond))
		time.Sleep(left + 10*time.Millisecond)
	}
}
