package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// recordsAtMost: Cond.AtMost bounds a counter before the write, a missing
// counter or record counting as 0, alone and inside a transaction.
func recordsAtMost(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "Q", SK: "Q"}
	// A missing record counts as 0: 0 <= 5 holds, 0 <= -1 does not.
	_, err := r.Add(ctx, k, map[string]int64{"n": 7}, store.Cond{AtMost: map[string]int64{"n": -1}})
	wantIs(t, err, store.ErrConditionFailed, "Add with AtMost below 0 on a missing record")
	wantMissing(t, ctx, r, k)
	got, err := r.Add(ctx, k, map[string]int64{"n": 5}, store.Cond{AtMost: map[string]int64{"n": 10 - 5}})
	ok(t, err, "Add 5 of 10 to a missing record")
	if got["n"] != 5 {
		t.Fatalf("Add returned %v, want n 5", got)
	}
	// 5 + 5 fits 10 exactly; one more does not, and changes nothing.
	_, err = r.Add(ctx, k, map[string]int64{"n": 5}, store.Cond{AtMost: map[string]int64{"n": 10 - 5}})
	ok(t, err, "Add up to the bound")
	_, err = r.Add(ctx, k, map[string]int64{"n": 1}, store.Cond{AtMost: map[string]int64{"n": 10 - 1}})
	wantIs(t, err, store.ErrConditionFailed, "Add past the bound")
	if c := mustGet(t, ctx, r, k).Counters; c["n"] != 10 {
		t.Fatalf("counter after a refused Add: %v, want n 10", c)
	}
	// A counter the record does not have counts as 0.
	_, err = r.Add(ctx, k, map[string]int64{"m": 3}, store.Cond{AtMost: map[string]int64{"m": 0}})
	ok(t, err, "Add to a counter the record lacks")
	// Negative deltas release; the bound applies to the value before the add.
	_, err = r.Add(ctx, k, map[string]int64{"n": -4}, store.Cond{})
	ok(t, err, "release")
	_, err = r.Add(ctx, k, map[string]int64{"n": 4}, store.Cond{AtMost: map[string]int64{"n": 6}})
	ok(t, err, "Add into released room")

	// Inside a transaction, a failed bound writes nothing.
	other := store.Key{PK: p + "Q", SK: "HOLD"}
	err = r.Transact(ctx, []store.Write{
		{Kind: store.WritePut, Record: item(other.PK, other.SK, "hold"), Cond: store.Cond{Absent: true}},
		{Kind: store.WriteAdd, Record: store.Record{Key: k, Counters: map[string]int64{"n": 1}}, Cond: store.Cond{AtMost: map[string]int64{"n": 9}}},
	})
	wantIs(t, err, store.ErrConditionFailed, "Transact past the bound")
	wantMissing(t, ctx, r, other)
	_, err = r.Add(ctx, k, map[string]int64{"n": -3}, store.Cond{})
	ok(t, err, "release 3")
	ok(t, r.Transact(ctx, []store.Write{
		{Kind: store.WritePut, Record: item(other.PK, other.SK, "hold"), Cond: store.Cond{Absent: true}},
		{Kind: store.WriteAdd, Record: store.Record{Key: k, Counters: map[string]int64{"n": 3}}, Cond: store.Cond{AtMost: map[string]int64{"n": 7}}},
	}), "Transact within the bound")
	if c := mustGet(t, ctx, r, k).Counters; c["n"] != 10 {
		t.Fatalf("counter after the transaction: %v, want n 10", c)
	}

	// An expired record counts as absent: its counters as 0.
	exp := store.Key{PK: p + "QX", SK: "Q"}
	mustPut(t, ctx, r, store.Record{Key: exp, Counters: map[string]int64{"n": 100}, ExpiresAt: time.Now().Add(-time.Minute)}, store.Cond{})
	got, err = r.Add(ctx, exp, map[string]int64{"n": 2}, store.Cond{AtMost: map[string]int64{"n": 3}})
	ok(t, err, "Add with AtMost over an expired record")
	if got["n"] != 2 {
		t.Fatalf("Add over an expired record returned %v, want n 2", got)
	}
}

// recordsAtMostConcurrent: bounded adds racing for the last room cannot
// overshoot, and none that fits is refused.
func recordsAtMostConcurrent(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "QC", SK: "Q"}
	const writers, bound = 20, 7
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = r.Add(ctx, k, map[string]int64{"n": 1}, store.Cond{AtMost: map[string]int64{"n": bound - 1}})
		})
	}
	wg.Wait()
	granted := 0
	for _, err := range errs {
		switch {
		case err == nil:
			granted++
		case !errors.Is(err, store.ErrConditionFailed):
			t.Fatalf("bounded Add: %v", err)
		}
	}
	if c := mustGet(t, ctx, r, k).Counters; granted != bound || c["n"] != bound {
		t.Fatalf("%d adds of 1 bounded by %d: %d granted, counter %v", writers, bound, granted, c)
	}
}
