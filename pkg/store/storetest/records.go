package storetest

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Records runs the conformance suite for store.Records.
//
// Besides what store.go documents, it pins down: Version is 1 on create and
// grows by one on every Put or Update, while Add leaves it alone (a record Add
// creates has Version 1); Update of a missing or expired record fails with
// ErrConditionFailed, as every unmet condition does; an expired record counts
// as absent for conditions too (create-if-absent over it succeeds); Add
// returns the new values of the counters it named; Cond.AtMost reads a
// missing counter, record or expired record as 0; Transact refuses two
// writes to one item (as DynamoDB does) and writes nothing then.
func Records(t *testing.T, open func(t *testing.T) store.Records) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, r store.Records, p string)
	}{
		{"GetMissing", recordsGetMissing},
		{"RoundTrip", recordsRoundTrip},
		{"CreateIfAbsent", recordsCreateIfAbsent},
		{"PutReplaces", recordsPutReplaces},
		{"StatusCAS", recordsStatusCAS},
		{"VersionCAS", recordsVersionCAS},
		{"ExistenceConditions", recordsExistence},
		{"UpdateKeepsCounters", recordsUpdateKeepsCounters},
		{"Add", recordsAdd},
		{"AddConcurrent", recordsAddConcurrent},
		{"AtMost", recordsAtMost},
		{"AtMostConcurrent", recordsAtMostConcurrent},
		{"Query", recordsQuery},
		{"QueryIndexes", recordsQueryIndexes},
		{"Expiry", recordsExpiry},
		{"Transact", recordsTransact},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, testCtx(t, time.Minute), open(t), "T"+uniq()+"#")
		})
	}
}

// item builds a record whose body is its label, so tests compare labels.
func item(pk, sk, label string) store.Record {
	return store.Record{Key: store.Key{PK: pk, SK: sk}, Body: []byte(label)}
}

func mustPut(t *testing.T, ctx context.Context, r store.Records, rec store.Record, cond store.Cond) {
	t.Helper()
	ok(t, r.Put(ctx, rec, cond), "Put "+rec.Key.PK+"/"+rec.Key.SK)
}

func mustGet(t *testing.T, ctx context.Context, r store.Records, k store.Key) store.Record {
	t.Helper()
	rec, err := r.Get(ctx, k)
	ok(t, err, "Get "+k.PK+"/"+k.SK)
	if rec.Key != k {
		t.Fatalf("Get %v returned key %v", k, rec.Key)
	}
	return rec
}

func wantMissing(t *testing.T, ctx context.Context, r store.Records, k store.Key) {
	t.Helper()
	_, err := r.Get(ctx, k)
	wantIs(t, err, store.ErrNotFound, "Get "+k.PK+"/"+k.SK)
}

// sameRecord compares everything the store keeps: nil and empty counters are
// equal, and ExpiresAt may lose sub-second precision (DynamoDB TTL is seconds).
func sameRecord(t *testing.T, got, want store.Record) {
	t.Helper()
	switch {
	case got.Key != want.Key, got.GSI1 != want.GSI1, got.GSI2 != want.GSI2, got.Status != want.Status,
		!sameCounters(got.Counters, want.Counters), !bytes.Equal(got.Body, want.Body), got.Version != want.Version,
		got.ExpiresAt.IsZero() != want.ExpiresAt.IsZero(), got.ExpiresAt.Sub(want.ExpiresAt).Abs() >= time.Second:
		t.Fatalf("record mismatch\n got %+v\nwant %+v", got, want)
	}
}

func sameCounters(a, b map[string]int64) bool {
	return len(a) == 0 && len(b) == 0 || maps.Equal(a, b)
}

func recordsGetMissing(t *testing.T, ctx context.Context, r store.Records, p string) {
	wantMissing(t, ctx, r, store.Key{PK: p + "NOBODY", SK: "X"})
}

func recordsRoundTrip(t *testing.T, ctx context.Context, r store.Records, p string) {
	rec := store.Record{
		Key:       store.Key{PK: p + "FILE#1", SK: "FILE"},
		GSI1:      store.IndexKey{PK: p + "OWNER#a", SK: "2026-01-01#1"},
		GSI2:      store.IndexKey{PK: p + "EXPIRES", SK: "2027-01-01#1"},
		Status:    "uploaded",
		Counters:  map[string]int64{"bytes": 42, "lines": -7},
		Body:      []byte(`{"id":"file-1","note":"ünïcode <&>"}`),
		ExpiresAt: time.Now().Add(time.Hour).Truncate(time.Second),
	}
	mustPut(t, ctx, r, rec, store.Cond{Absent: true})
	rec.Version = 1
	sameRecord(t, mustGet(t, ctx, r, rec.Key), rec)

	// A record with nothing but a key and a body round-trips as well.
	bare := item(p+"BARE", "B", "bare")
	mustPut(t, ctx, r, bare, store.Cond{})
	bare.Version = 1
	sameRecord(t, mustGet(t, ctx, r, bare.Key), bare)
}

func recordsCreateIfAbsent(t *testing.T, ctx context.Context, r store.Records, p string) {
	first := item(p+"A", "A", "first")
	mustPut(t, ctx, r, first, store.Cond{Absent: true})
	second := item(p+"A", "A", "second")
	wantIs(t, r.Put(ctx, second, store.Cond{Absent: true}), store.ErrConditionFailed, "second create-if-absent")
	got := mustGet(t, ctx, r, first.Key)
	if string(got.Body) != "first" || got.Version != 1 {
		t.Fatalf("after a refused create: body %q version %d, want %q version 1", got.Body, got.Version, "first")
	}
}

func recordsPutReplaces(t *testing.T, ctx context.Context, r store.Records, p string) {
	rec := item(p+"R", "R", "v1")
	rec.Counters = map[string]int64{"n": 5}
	rec.Status = "a"
	rec.GSI1 = store.IndexKey{PK: p + "RG", SK: "1"}
	mustPut(t, ctx, r, rec, store.Cond{})
	next := item(p+"R", "R", "v2")
	mustPut(t, ctx, r, next, store.Cond{})
	next.Version = 2
	sameRecord(t, mustGet(t, ctx, r, rec.Key), next) // counters, status and index key gone
	wantQuery(t, ctx, r, store.Query{Index: store.GSI1, PK: p + "RG", Limit: 10}, nil, false)
}

func recordsStatusCAS(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "BATCH#1", SK: "BATCH"}
	withStatus := func(s string) store.Record {
		rec := item(k.PK, k.SK, s)
		rec.Status = s
		return rec
	}
	mustPut(t, ctx, r, withStatus("validating"), store.Cond{Absent: true})
	ok(t, r.Update(ctx, withStatus("in_progress"), store.Cond{StatusIn: []string{"validating"}}), "Update from validating")
	wantIs(t, r.Update(ctx, withStatus("failed"), store.Cond{StatusIn: []string{"validating"}}),
		store.ErrConditionFailed, "Update from a stale status")
	if got := mustGet(t, ctx, r, k); got.Status != "in_progress" || string(got.Body) != "in_progress" || got.Version != 2 {
		t.Fatalf("after a refused update: %+v, want status in_progress version 2", got)
	}
	ok(t, r.Update(ctx, withStatus("finalizing"), store.Cond{StatusIn: []string{"cancelling", "in_progress"}}), "Update from a status list")
	wantIs(t, r.Delete(ctx, k, store.Cond{StatusIn: []string{"in_progress"}}), store.ErrConditionFailed, "Delete with a stale status")
	mustGet(t, ctx, r, k)
	ok(t, r.Delete(ctx, k, store.Cond{StatusIn: []string{"finalizing"}}), "Delete with the current status")
	wantMissing(t, ctx, r, k)
}

func recordsVersionCAS(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "V", SK: "V"}
	mustPut(t, ctx, r, item(k.PK, k.SK, "v1"), store.Cond{Absent: true})
	ok(t, r.Update(ctx, item(k.PK, k.SK, "v2"), store.Cond{Version: 1}), "Update at version 1")
	wantIs(t, r.Update(ctx, item(k.PK, k.SK, "stale"), store.Cond{Version: 1}), store.ErrConditionFailed, "Update at a stale version")
	wantIs(t, r.Put(ctx, item(k.PK, k.SK, "stale"), store.Cond{Version: 1}), store.ErrConditionFailed, "Put at a stale version")
	ok(t, r.Put(ctx, item(k.PK, k.SK, "v3"), store.Cond{Version: 2}), "Put at version 2")
	wantIs(t, r.Delete(ctx, k, store.Cond{Version: 2}), store.ErrConditionFailed, "Delete at a stale version")
	if got := mustGet(t, ctx, r, k); string(got.Body) != "v3" || got.Version != 3 {
		t.Fatalf("got body %q version %d, want v3 at version 3", got.Body, got.Version)
	}

	// Of many writers racing from the same version, exactly one wins.
	const writers = 20
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() { errs[i] = r.Update(ctx, item(k.PK, k.SK, "racer"), store.Cond{Version: 3}) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrConditionFailed):
			t.Fatalf("racing Update: %v", err)
		}
	}
	if got := mustGet(t, ctx, r, k); wins != 1 || got.Version != 4 {
		t.Fatalf("%d racing updates won, version now %d; want exactly 1 and version 4", wins, got.Version)
	}
}

func recordsExistence(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "E", SK: "E"}
	wantIs(t, r.Update(ctx, item(k.PK, k.SK, "x"), store.Cond{}), store.ErrConditionFailed, "Update of a missing record")
	wantIs(t, r.Put(ctx, item(k.PK, k.SK, "x"), store.Cond{Exists: true}), store.ErrConditionFailed, "Put with Exists on a missing record")
	wantIs(t, r.Put(ctx, item(k.PK, k.SK, "x"), store.Cond{StatusIn: []string{""}}), store.ErrConditionFailed, "Put with StatusIn on a missing record")
	wantIs(t, r.Put(ctx, item(k.PK, k.SK, "x"), store.Cond{Version: 1}), store.ErrConditionFailed, "Put with Version on a missing record")
	wantIs(t, r.Delete(ctx, k, store.Cond{Exists: true}), store.ErrConditionFailed, "Delete with Exists on a missing record")
	wantMissing(t, ctx, r, k)
	ok(t, r.Delete(ctx, k, store.Cond{}), "Delete of a missing record")

	mustPut(t, ctx, r, item(k.PK, k.SK, "x"), store.Cond{})
	ok(t, r.Put(ctx, item(k.PK, k.SK, "y"), store.Cond{Exists: true}), "Put with Exists")
	ok(t, r.Delete(ctx, k, store.Cond{Exists: true}), "Delete with Exists")
	wantMissing(t, ctx, r, k)
	ok(t, r.Delete(ctx, k, store.Cond{}), "second Delete")
}

func recordsUpdateKeepsCounters(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "U", SK: "U"}
	rec := item(k.PK, k.SK, "v1")
	rec.Counters = map[string]int64{"done": 5, "failed": 1}
	mustPut(t, ctx, r, rec, store.Cond{})
	upd := item(k.PK, k.SK, "v2")
	upd.Status = "s"
	upd.Counters = map[string]int64{"done": 99} // ignored by Update
	ok(t, r.Update(ctx, upd, store.Cond{Exists: true}), "Update")
	want := upd
	want.Counters = map[string]int64{"done": 5, "failed": 1}
	want.Version = 2
	sameRecord(t, mustGet(t, ctx, r, k), want)

	_, err := r.Add(ctx, k, map[string]int64{"done": 1}, store.Cond{})
	ok(t, err, "Add")
	ok(t, r.Update(ctx, item(k.PK, k.SK, "v3"), store.Cond{Version: 2}), "Update after Add, at the same version")
	if got := mustGet(t, ctx, r, k); got.Counters["done"] != 6 || got.Counters["failed"] != 1 {
		t.Fatalf("counters after Add and Update: %v, want done 6 failed 1", got.Counters)
	}
}

func recordsAdd(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "C", SK: "C"}
	got, err := r.Add(ctx, k, map[string]int64{"n": 2, "m": -1}, store.Cond{})
	ok(t, err, "Add creating the record")
	if !maps.Equal(got, map[string]int64{"n": 2, "m": -1}) {
		t.Fatalf("Add returned %v, want n 2 m -1", got)
	}
	created := store.Record{Key: k, Counters: map[string]int64{"n": 2, "m": -1}, Version: 1}
	sameRecord(t, mustGet(t, ctx, r, k), created)

	k2 := store.Key{PK: p + "C2", SK: "C"}
	rec := item(k2.PK, k2.SK, "body")
	rec.Status = "running"
	mustPut(t, ctx, r, rec, store.Cond{})
	for _, want := range []int64{3, 6} {
		got, err := r.Add(ctx, k2, map[string]int64{"n": 3}, store.Cond{StatusIn: []string{"running"}})
		ok(t, err, "Add")
		if got["n"] != want {
			t.Fatalf("Add returned %v, want n %d", got, want)
		}
	}
	_, err = r.Add(ctx, k2, map[string]int64{"n": 100}, store.Cond{StatusIn: []string{"done"}})
	wantIs(t, err, store.ErrConditionFailed, "Add with a stale status")
	want := rec
	want.Counters = map[string]int64{"n": 6}
	want.Version = 1 // Add leaves the version alone
	sameRecord(t, mustGet(t, ctx, r, k2), want)

	k3 := store.Key{PK: p + "C3", SK: "C"}
	_, err = r.Add(ctx, k3, map[string]int64{"n": 1}, store.Cond{Exists: true})
	wantIs(t, err, store.ErrConditionFailed, "Add with Exists to a missing record")
	wantMissing(t, ctx, r, k3)
}

func recordsAddConcurrent(t *testing.T, ctx context.Context, r store.Records, p string) {
	k := store.Key{PK: p + "HOT", SK: "HOT"}
	const writers = 50
	got := make([]int64, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			var vals map[string]int64
			vals, errs[i] = r.Add(ctx, k, map[string]int64{"n": 1, "tokens": 10}, store.Cond{})
			got[i] = vals["n"]
		})
	}
	wg.Wait()
	for _, err := range errs {
		ok(t, err, "concurrent Add")
	}
	// Each writer saw a distinct new value: no add was lost or doubled.
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("values returned by %d concurrent adds: %v, want 1..%d each once", writers, got, writers)
		}
	}
	if c := mustGet(t, ctx, r, k).Counters; c["n"] != writers || c["tokens"] != 10*writers {
		t.Fatalf("counters after %d concurrent adds: %v, want n %d tokens %d", writers, c, writers, 10*writers)
	}
}
