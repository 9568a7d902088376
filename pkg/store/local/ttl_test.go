package local

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

func TestPurgeExpired(t *testing.T) {
	ctx := context.Background()
	db, err := OpenDB(filepath.Join(t.TempDir(), "ttl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs, err := NewRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	const n = purgeBatch + 7 // more than one batch
	for i := range n {
		rec := store.Record{
			Key:       store.Key{PK: "P", SK: string(rune('a'+i%26)) + time.Duration(i).String()},
			GSI1:      store.IndexKey{PK: "IX", SK: time.Duration(i).String()},
			ExpiresAt: time.Now().Add(-time.Second),
		}
		if err := recs.Put(ctx, rec, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	live := store.Record{Key: store.Key{PK: "P", SK: "live"}, GSI1: store.IndexKey{PK: "IX", SK: "live"}, ExpiresAt: time.Now().Add(time.Hour)}
	forever := store.Record{Key: store.Key{PK: "P", SK: "forever"}}
	for _, r := range []store.Record{live, forever} {
		if err := recs.Put(ctx, r, store.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := recs.PurgeExpired(ctx)
	if err != nil || got != n {
		t.Fatalf("PurgeExpired = %d, %v; want %d", got, err, n)
	}
	for _, k := range []store.Key{live.Key, forever.Key} {
		if _, err := recs.Get(ctx, k); err != nil {
			t.Errorf("%v was purged: %v", k, err)
		}
	}
	page, err := recs.Query(ctx, store.Query{Index: store.GSI1, PK: "IX", Limit: 1000})
	if err != nil || len(page.Records) != 1 {
		t.Errorf("index after purge: %d records, %v", len(page.Records), err)
	}
	if got, err := recs.PurgeExpired(ctx); got != 0 || err != nil {
		t.Errorf("second purge = %d, %v", got, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := recs.PurgeExpired(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("purge with a cancelled context: %v", err)
	}
}
