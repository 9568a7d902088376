package storetest

import (
	"context"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/store"
)

func recordsTransact(t *testing.T, ctx context.Context, r store.Records, p string) {
	batch := store.Key{PK: p + "BATCH", SK: "BATCH"}
	chunk := store.Key{PK: p + "BATCH", SK: "CHUNK#0"}
	gone := store.Key{PK: p + "GONE", SK: "GONE"}
	created := store.Key{PK: p + "NEW", SK: "NEW"}
	withStatus := func(k store.Key, s string) store.Record {
		rec := item(k.PK, k.SK, s)
		rec.Status = s
		return rec
	}
	mustPut(t, ctx, r, withStatus(batch, "in_progress"), store.Cond{})
	mustPut(t, ctx, r, withStatus(chunk, "pending"), store.Cond{})
	mustPut(t, ctx, r, item(gone.PK, gone.SK, "gone"), store.Cond{})

	// Every kind of write, all applied together.
	ok(t, r.Transact(ctx, []store.Write{
		{Kind: store.WriteUpdate, Record: withStatus(chunk, "done"), Cond: store.Cond{StatusIn: []string{"pending"}}},
		{Kind: store.WriteAdd, Record: store.Record{Key: batch, Counters: map[string]int64{"completed": 3, "failed": 1}}, Cond: store.Cond{StatusIn: []string{"in_progress"}}},
		{Kind: store.WritePut, Record: item(created.PK, created.SK, "new"), Cond: store.Cond{Absent: true}},
		{Kind: store.WriteDelete, Record: store.Record{Key: gone}, Cond: store.Cond{Exists: true}},
	}), "Transact")
	if got := mustGet(t, ctx, r, chunk); got.Status != "done" || got.Version != 2 {
		t.Fatalf("chunk after Transact: %+v", got)
	}
	if got := mustGet(t, ctx, r, batch); got.Counters["completed"] != 3 || got.Counters["failed"] != 1 || got.Version != 1 {
		t.Fatalf("batch after Transact: %+v", got)
	}
	mustGet(t, ctx, r, created)
	wantMissing(t, ctx, r, gone)

	// One failed condition, here the last write's, and nothing is written.
	fresh := store.Key{PK: p + "FRESH", SK: "FRESH"}
	failing := [][]store.Write{
		{
			{Kind: store.WritePut, Record: item(fresh.PK, fresh.SK, "fresh"), Cond: store.Cond{Absent: true}},
			{Kind: store.WriteAdd, Record: store.Record{Key: batch, Counters: map[string]int64{"completed": 100}}},
			{Kind: store.WriteUpdate, Record: withStatus(chunk, "done"), Cond: store.Cond{StatusIn: []string{"pending"}}}, // stale
		},
		{
			{Kind: store.WriteUpdate, Record: withStatus(batch, "finalizing"), Cond: store.Cond{Version: 1}},
			{Kind: store.WritePut, Record: item(created.PK, created.SK, "again"), Cond: store.Cond{Absent: true}}, // exists
		},
		{
			{Kind: store.WriteDelete, Record: store.Record{Key: chunk}},
			{Kind: store.WriteAdd, Record: store.Record{Key: batch, Counters: map[string]int64{"completed": 100}}, Cond: store.Cond{StatusIn: []string{"cancelling"}}},
		},
		{
			{Kind: store.WritePut, Record: item(fresh.PK, fresh.SK, "fresh"), Cond: store.Cond{}},
			{Kind: store.WriteDelete, Record: store.Record{Key: gone}, Cond: store.Cond{Exists: true}}, // missing
		},
	}
	for i, writes := range failing {
		wantIs(t, r.Transact(ctx, writes), store.ErrConditionFailed, "failing Transact")
		wantMissing(t, ctx, r, fresh)
		if got := mustGet(t, ctx, r, batch); got.Status != "in_progress" || got.Counters["completed"] != 3 || got.Version != 1 {
			t.Fatalf("failing Transact %d changed the batch: %+v", i, got)
		}
		if got := mustGet(t, ctx, r, chunk); got.Status != "done" || got.Version != 2 {
			t.Fatalf("failing Transact %d changed the chunk: %+v", i, got)
		}
		if got := mustGet(t, ctx, r, created); string(got.Body) != "new" {
			t.Fatalf("failing Transact %d changed %v: %+v", i, created, got)
		}
	}

	// Two writes to one item are refused (DynamoDB does), and nothing is written.
	err := r.Transact(ctx, []store.Write{
		{Kind: store.WritePut, Record: item(fresh.PK, fresh.SK, "fresh")},
		{Kind: store.WriteAdd, Record: store.Record{Key: fresh, Counters: map[string]int64{"n": 1}}},
	})
	if err == nil {
		t.Fatal("Transact with two writes to one item succeeded")
	}
	wantMissing(t, ctx, r, fresh)
}
