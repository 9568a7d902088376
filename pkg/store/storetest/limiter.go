package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Limiter runs the conformance suite for store.Limiter.
//
// Besides what store.go documents, it pins down: an allowed take's Remaining
// is exact; a refused take's RetryAfter lies in (0, window]; windows of length
// w start at multiples of w since the Unix epoch.
func Limiter(t *testing.T, open func(t *testing.T) store.Limiter) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, l store.Limiter, p string)
	}{
		{"ExactUnderConcurrency", limiterExact},
		{"RefusedTakesNothing", limiterRefused},
		{"TakeOfNothingChecks", limiterCheck},
		{"NewWindowStartsFresh", limiterNewWindow},
		{"ScopesAreIndependent", limiterScopes},
		{"CountersOfAScopeTogether", limiterCounters},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, testCtx(t, time.Minute), open(t), "t"+uniq())
		})
	}
}

// inOneWindow runs check with a fresh scope. A check that fails is retried
// only if a window boundary passed while it ran (the takes were counted in two
// windows); otherwise the failure stands.
func inOneWindow(t *testing.T, window time.Duration, p string, check func(scope string) error) {
	t.Helper()
	for attempt := range 3 {
		start := time.Now()
		err := check(fmt.Sprintf("%s#%d", p, attempt))
		if err == nil {
			return
		}
		if start.UnixNano()/int64(window) == time.Now().UnixNano()/int64(window) {
			t.Fatal(err)
		}
	}
	t.Fatal("three attempts each crossed a window boundary")
}

func take(t *testing.T, ctx context.Context, l store.Limiter, scope string, window time.Duration, limit, n int64) store.Decision {
	t.Helper()
	d, err := l.Take(ctx, scope, window, store.Take{Counter: "n", Limit: limit, N: n})
	ok(t, err, "Take")
	if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > window) {
		t.Fatalf("refused take: RetryAfter %s, want in (0, %s]", d.RetryAfter, window)
	}
	return d
}

func limiterExact(t *testing.T, ctx context.Context, l store.Limiter, p string) {
	const takers, limit = 50, 20
	inOneWindow(t, time.Minute, p, func(scope string) error {
		decisions := make([]store.Decision, takers)
		errs := make([]error, takers)
		var wg sync.WaitGroup
		for i := range takers {
			wg.Go(func() {
				decisions[i], errs[i] = l.Take(ctx, scope, time.Minute, store.Take{Counter: "n", Limit: limit, N: 1})
			})
		}
		wg.Wait()
		var remaining []int64
		for i, d := range decisions {
			ok(t, errs[i], "concurrent Take")
			if d.Allowed {
				remaining = append(remaining, d.Remaining)
			} else if d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
				t.Fatalf("refused take: RetryAfter %s", d.RetryAfter)
			}
		}
		// Exactly limit takes were allowed, each leaving a distinct remainder.
		slices.Sort(remaining)
		want := make([]int64, limit)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(remaining, want) {
			return fmt.Errorf("%d concurrent takes of 1 from a limit of %d: allowed %d with remainders %v", takers, limit, len(remaining), remaining)
		}
		return nil
	})
}

func limiterRefused(t *testing.T, ctx context.Context, l store.Limiter, p string) {
	inOneWindow(t, time.Minute, p, func(scope string) error {
		steps := []struct {
			n         int64
			allowed   bool
			remaining int64 // checked when allowed
		}{{7, true, 3}, {5, false, 0}, {4, false, 0}, {3, true, 0}, {1, false, 0}}
		for i, s := range steps {
			d := take(t, ctx, l, scope, time.Minute, 10, s.n)
			if d.Allowed != s.allowed || d.Allowed && d.Remaining != s.remaining || d.Remaining < 0 || d.Remaining > 10 {
				return fmt.Errorf("step %d, take %d from a limit of 10: got %+v, want allowed %v remaining %d", i, s.n, d, s.allowed, s.remaining)
			}
		}
		return nil
	})
}

// limiterCheck: a take of 0 is allowed while the window holds at most
// limit, refused (with its RetryAfter) once it holds more, and takes nothing.
func limiterCheck(t *testing.T, ctx context.Context, l store.Limiter, p string) {
	inOneWindow(t, time.Minute, p, func(scope string) error {
		steps := []struct {
			limit, n  int64
			allowed   bool
			remaining int64 // checked when allowed
		}{
			{9, 0, true, 9},  // an empty window has room
			{10, 9, true, 1}, // 9 taken
			{9, 0, true, 0},  // 9 ≤ 9: room for one more under a limit of 10
			{8, 0, false, 0}, // 9 > 8
			{10, 1, true, 0}, // the checks took nothing: the 10th fits
			{9, 0, false, 0},
		}
		for i, s := range steps {
			d := take(t, ctx, l, scope, time.Minute, s.limit, s.n)
			if d.Allowed != s.allowed || d.Allowed && d.Remaining != s.remaining {
				return fmt.Errorf("step %d, take %d from a limit of %d: got %+v, want allowed %v remaining %d", i, s.n, s.limit, d, s.allowed, s.remaining)
			}
		}
		return nil
	})
}

func limiterNewWindow(t *testing.T, ctx context.Context, l store.Limiter, p string) {
	const window = time.Second
	var retry time.Duration
	var scope string
	inOneWindow(t, window, p, func(s string) error {
		scope = s
		if d := take(t, ctx, l, s, window, 2, 2); !d.Allowed {
			return fmt.Errorf("first take of 2 from a limit of 2 refused: %+v", d)
		}
		d := take(t, ctx, l, s, window, 2, 1)
		if d.Allowed {
			return fmt.Errorf("take beyond the limit allowed: %+v", d)
		}
		retry = d.RetryAfter
		return nil
	})
	time.Sleep(retry + 50*time.Millisecond)
	if d := take(t, ctx, l, scope, window, 2, 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("take in the next window: %+v, want allowed with 1 remaining", d)
	}
}

func limiterScopes(t *testing.T, ctx context.Context, l store.Limiter, p string) {
	inOneWindow(t, time.Minute, p, func(scope string) error {
		if d := take(t, ctx, l, scope+"a", time.Minute, 1, 1); !d.Allowed {
			return fmt.Errorf("first take on scope a refused: %+v", d)
		}
		if d := take(t, ctx, l, scope+"a", time.Minute, 1, 1); d.Allowed {
			return fmt.Errorf("second take on scope a allowed: %+v", d)
		}
		if d := take(t, ctx, l, scope+"b", time.Minute, 1, 1); !d.Allowed {
			return fmt.Errorf("take on scope b refused after scope a ran out: %+v", d)
		}
		return nil
	})
}

// limiterCounters: the counters of one scope are taken from all or none —
// one refusing leaves every other unchanged and is named — a counter
// only checked is not changed, and a counter of a scope is independent of
// its others.
func limiterCounters(t *testing.T, ctx context.Context, l store.Limiter, p string) {
	inOneWindow(t, time.Minute, p, func(scope string) error {
		steps := []struct {
			takes     []store.Take
			allowed   bool
			refused   string
			remaining int64
		}{
			// A request of 3 a window, with room for a token of 10 checked.
			{[]store.Take{{Counter: "rpm", Limit: 3, N: 1}, {Counter: "tpm", Limit: 9}}, true, "", 2},
			// 9 tokens: the check above took none.
			{[]store.Take{{Counter: "tpm", Limit: 10, N: 9}}, true, "", 1},
			{[]store.Take{{Counter: "rpm", Limit: 3, N: 1}, {Counter: "tpm", Limit: 9}}, true, "", 1},
			// 10 tokens: the tpm check refuses, and the request is not taken…
			{[]store.Take{{Counter: "tpm", Limit: 10, N: 1}}, true, "", 0},
			{[]store.Take{{Counter: "rpm", Limit: 3, N: 1}, {Counter: "tpm", Limit: 9}}, false, "tpm", 0},
			// …so a third request fits, and a fourth is refused by rpm…
			{[]store.Take{{Counter: "rpm", Limit: 3, N: 1}}, true, "", 0},
			{[]store.Take{{Counter: "rpm", Limit: 3, N: 1}, {Counter: "tpm", Limit: 100, N: 5}}, false, "rpm", 0},
			// …adding none of its tokens.
			{[]store.Take{{Counter: "tpm", Limit: 10}}, true, "", 0},
		}
		for i, s := range steps {
			d, err := l.Take(ctx, scope, time.Minute, s.takes...)
			ok(t, err, "Take")
			if d.Allowed != s.allowed || d.Refused != s.refused || d.Remaining != s.remaining {
				return fmt.Errorf("step %d, take %+v: got %+v, want allowed %v refused %q remaining %d", i, s.takes, d, s.allowed, s.refused, s.remaining)
			}
			if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > time.Minute) {
				return fmt.Errorf("step %d: refused with RetryAfter %s", i, d.RetryAfter)
			}
		}
		for _, bad := range [][]store.Take{nil, {{Counter: "rpm", Limit: 1, N: 1}, {Counter: "rpm", Limit: 1}}, {{Counter: "", Limit: 1}}} {
			if _, err := l.Take(ctx, scope, time.Minute, bad...); err == nil {
				return fmt.Errorf("take %+v accepted", bad)
			}
		}
		return nil
	})
}
