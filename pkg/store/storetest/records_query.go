package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// labels returns the bodies of a page's records; for the keys-only index,
// which returns no bodies, the last #-separated part of each record's sort
// key there (the tests end it with the label).
func labels(recs []store.Record) []string {
	out := make([]string, len(recs))
	for i, rec := range recs {
		out[i] = string(rec.Body)
		if len(rec.Body) == 0 {
			out[i] = rec.GSI2.SK[strings.LastIndex(rec.GSI2.SK, "#")+1:]
		}
	}
	return out
}

// wantQuery runs q and checks the page exactly: the labels in order and More.
func wantQuery(t *testing.T, ctx context.Context, r store.Records, q store.Query, want []string, wantMore bool) {
	t.Helper()
	page, err := r.Query(ctx, q)
	ok(t, err, fmt.Sprintf("Query %+v", q))
	if got := labels(page.Records); !slices.Equal(got, want) || page.More != wantMore {
		t.Fatalf("Query %+v\n got %q more=%v\nwant %q more=%v", q, got, page.More, want, wantMore)
	}
}

// walk pages through q with its cursor and returns every label. A page may
// hold fewer records than the limit, even none, while More is true; it may
// never hold more.
func walk(t *testing.T, ctx context.Context, r store.Records, q store.Query) []string {
	t.Helper()
	var all []string
	for range 20 {
		page, err := r.Query(ctx, q)
		ok(t, err, fmt.Sprintf("Query %+v", q))
		if len(page.Records) > q.Limit {
			t.Fatalf("Query %+v returned %d records, over its limit", q, len(page.Records))
		}
		all = append(all, labels(page.Records)...)
		if !page.More {
			return all
		}
		if len(page.Records) > 0 {
			last := page.Records[len(page.Records)-1]
			q.After = map[store.Index]string{store.Table: last.Key.SK, store.GSI1: last.GSI1.SK, store.GSI2: last.GSI2.SK}[q.Index]
		}
	}
	t.Fatalf("Query %+v: still More after 20 pages", q)
	return nil
}

func recordsQuery(t *testing.T, ctx context.Context, r store.Records, p string) {
	pk := p + "Q"
	// Byte order, as DynamoDB sorts: "A" < "a" < "a#…" < "b".
	sks := []string{"b#1", "a#3", "A#0", "a#1", "a", "a#5", "a#2", "a#4"}
	for _, sk := range sks {
		mustPut(t, ctx, r, item(pk, sk, sk), store.Cond{})
	}
	mustPut(t, ctx, r, item(pk+"x", "a#0", "other partition"), store.Cond{}) // a PK that extends pk
	mustPut(t, ctx, r, item(p+"P", "a#0", "other partition"), store.Cond{})  // a PK that sorts before pk
	asc := []string{"A#0", "a", "a#1", "a#2", "a#3", "a#4", "a#5", "b#1"}
	desc := slices.Clone(asc)
	slices.Reverse(desc)

	q := func(prefix, after string, desc bool, limit int) store.Query {
		return store.Query{PK: pk, SKPrefix: prefix, After: after, Desc: desc, Limit: limit}
	}
	wantQuery(t, ctx, r, q("", "", false, 100), asc, false)
	wantQuery(t, ctx, r, q("", "", true, 100), desc, false)
	wantQuery(t, ctx, r, q("", "", false, 1), []string{"A#0"}, true)
	wantQuery(t, ctx, r, q("", "", true, 1), []string{"b#1"}, true)

	wantQuery(t, ctx, r, q("a#", "", false, 2), []string{"a#1", "a#2"}, true)
	wantQuery(t, ctx, r, q("a#", "a#2", false, 2), []string{"a#3", "a#4"}, true)
	wantQuery(t, ctx, r, q("a#", "a#4", false, 2), []string{"a#5"}, false)
	wantQuery(t, ctx, r, q("a#", "", true, 2), []string{"a#5", "a#4"}, true)
	wantQuery(t, ctx, r, q("a#", "a#4", true, 2), []string{"a#3", "a#2"}, true)
	wantQuery(t, ctx, r, q("a#", "a#2", true, 2), []string{"a#1"}, false)

	// A page that ends exactly at the last record has no More.
	wantQuery(t, ctx, r, q("a#", "", false, 5), []string{"a#1", "a#2", "a#3", "a#4", "a#5"}, false)
	wantQuery(t, ctx, r, q("a#", "a#3", true, 2), []string{"a#2", "a#1"}, false)
	// A cursor between records, and one past the end.
	wantQuery(t, ctx, r, q("a#", "a#25", false, 10), []string{"a#3", "a#4", "a#5"}, false)
	wantQuery(t, ctx, r, q("a#", "a#25", true, 10), []string{"a#2", "a#1"}, false)
	wantQuery(t, ctx, r, q("a#", "a#5", false, 10), nil, false)
	wantQuery(t, ctx, r, q("", "a#5", false, 10), []string{"b#1"}, false)
	wantQuery(t, ctx, r, q("c", "", false, 10), nil, false)
	wantQuery(t, ctx, r, store.Query{PK: p + "EMPTY", Limit: 10}, nil, false)

	if got := walk(t, ctx, r, q("a", "", false, 3)); !slices.Equal(got, asc[1:7]) {
		t.Fatalf("paging through prefix a: %q, want %q", got, asc[1:7])
	}
}

func recordsQueryIndexes(t *testing.T, ctx context.Context, r store.Records, p string) {
	owner, exp := p+"OWNER#a#FILE", p+"EXPIRES"
	file := func(id, g1, g2 string) store.Record {
		rec := item(p+"FILE#"+id, "FILE", id)
		rec.Status = "processed"
		if g1 != "" {
			rec.GSI1 = store.IndexKey{PK: owner, SK: g1}
		}
		if g2 != "" {
			rec.GSI2 = store.IndexKey{PK: exp, SK: g2}
		}
		return rec
	}
	recs := []store.Record{
		file("f1", "2026-01-01#f1", "2026-03-01#f1"),
		file("f2", "2026-01-02#f2", "2026-02-01#f2"),
		file("f3", "2026-01-03#f3", "2026-01-01#f3"),
		file("f4", "2026-02-01#f4", ""),
		file("f5", "", "2026-04-01#f5"),
	}
	for _, rec := range recs {
		mustPut(t, ctx, r, rec, store.Cond{})
	}
	other := file("f6", "2026-01-01#f6", "")
	other.GSI1.PK = p + "OWNER#b#FILE"
	mustPut(t, ctx, r, other, store.Cond{})

	g1 := func(prefix, after string, desc bool, limit int) store.Query {
		return store.Query{Index: store.GSI1, PK: owner, SKPrefix: prefix, After: after, Desc: desc, Limit: limit}
	}
	wantQuery(t, ctx, r, g1("", "", false, 10), []string{"f1", "f2", "f3", "f4"}, false)
	wantQuery(t, ctx, r, g1("", "", true, 10), []string{"f4", "f3", "f2", "f1"}, false)
	wantQuery(t, ctx, r, g1("2026-01", "", false, 2), []string{"f1", "f2"}, true)
	wantQuery(t, ctx, r, g1("2026-01", "2026-01-02#f2", false, 2), []string{"f3"}, false)
	wantQuery(t, ctx, r, g1("2026-01", "", true, 2), []string{"f3", "f2"}, true)
	wantQuery(t, ctx, r, g1("2026-01", "2026-01-02#f2", true, 2), []string{"f1"}, false)
	wantQuery(t, ctx, r, g1("", "2026-01-03#f3", false, 10), []string{"f4"}, false)

	g2 := store.Query{Index: store.GSI2, PK: exp, Limit: 3}
	wantQuery(t, ctx, r, g2, []string{"f3", "f2", "f1"}, true)
	g2.After = "2026-03-01#f1"
	wantQuery(t, ctx, r, g2, []string{"f5"}, false)

	// GSI1 queries return whole records; GSI2 (keys only) their keys.
	page, err := r.Query(ctx, g1("2026-01-01", "", false, 1))
	ok(t, err, "GSI1 query")
	want := recs[0]
	want.Version = 1
	if len(page.Records) != 1 {
		t.Fatalf("GSI1 query returned %d records, want 1", len(page.Records))
	}
	sameRecord(t, page.Records[0], want)
	if !store.GSI2.KeysOnly() || store.GSI1.KeysOnly() {
		t.Fatal("the sweep index holds keys only, the listing index whole records")
	}
	page, err = r.Query(ctx, store.Query{Index: store.GSI2, PK: exp, SKPrefix: "2026-03-01", Limit: 1})
	ok(t, err, "GSI2 query")
	if len(page.Records) != 1 || !reflect.DeepEqual(page.Records[0], recs[0].KeysIn(store.GSI2)) {
		t.Fatalf("GSI2 query returned %+v, want only the keys %+v", page.Records, recs[0].KeysIn(store.GSI2))
	}

	// Updates move index entries; deletes remove them.
	moved := file("f2", "2026-05-01#f2", "")
	ok(t, r.Update(ctx, moved, store.Cond{Exists: true}), "Update moving f2")
	wantQuery(t, ctx, r, g1("", "", false, 10), []string{"f1", "f3", "f4", "f2"}, false)
	g2.After = ""
	g2.Limit = 10
	wantQuery(t, ctx, r, g2, []string{"f3", "f1", "f5"}, false)
	ok(t, r.Delete(ctx, recs[0].Key, store.Cond{}), "Delete f1")
	wantQuery(t, ctx, r, g1("", "", false, 10), []string{"f3", "f4", "f2"}, false)
	wantQuery(t, ctx, r, g2, []string{"f3", "f5"}, false)
}

func recordsExpiry(t *testing.T, ctx context.Context, r store.Records, p string) {
	pk, gpk := p+"X", p+"XG"
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for i, at := range []time.Time{{}, past, future, past, {}} {
		id := fmt.Sprintf("x%d", i+1)
		rec := item(pk, id, id)
		rec.GSI1 = store.IndexKey{PK: gpk, SK: id}
		rec.GSI2 = store.IndexKey{PK: gpk + "2", SK: id}
		rec.ExpiresAt = at
		mustPut(t, ctx, r, rec, store.Cond{})
	}
	wantMissing(t, ctx, r, store.Key{PK: pk, SK: "x2"})
	wantMissing(t, ctx, r, store.Key{PK: pk, SK: "x4"})
	mustGet(t, ctx, r, store.Key{PK: pk, SK: "x3"})

	live := []string{"x1", "x3", "x5"}
	for _, q := range []store.Query{{PK: pk, Limit: 10}, {Index: store.GSI1, PK: gpk, Limit: 10}} {
		if got := walk(t, ctx, r, q); !slices.Equal(got, live) {
			t.Fatalf("Query %+v: %q, want only the live records %q", q, got, live)
		}
		q.Limit = 1
		if got := walk(t, ctx, r, q); !slices.Equal(got, live) {
			t.Fatalf("paging %+v: %q, want %q", q, got, live)
		}
		q.Desc = true
		if got, want := walk(t, ctx, r, q), []string{"x5", "x3", "x1"}; !slices.Equal(got, want) {
			t.Fatalf("paging %+v: %q, want %q", q, got, want)
		}
	}

	// A keys-only index does not know what has expired (DynamoDB's holds
	// no expiry): a reader Gets each record.
	keys := walk(t, ctx, r, store.Query{Index: store.GSI2, PK: gpk + "2", Limit: 2})
	if want := []string{"x1", "x2", "x3", "x4", "x5"}; !slices.Equal(keys, want) {
		t.Fatalf("keys-only query: %q, want every record's keys %q", keys, want)
	}

	// An expired record is absent to conditions too.
	wantIs(t, r.Update(ctx, item(pk, "x4", "revived"), store.Cond{}), store.ErrConditionFailed, "Update of an expired record")
	ok(t, r.Put(ctx, item(pk, "x2", "recreated"), store.Cond{Absent: true}), "create-if-absent over an expired record")
	if got := mustGet(t, ctx, r, store.Key{PK: pk, SK: "x2"}); string(got.Body) != "recreated" || !got.ExpiresAt.IsZero() {
		t.Fatalf("recreated record: %+v", got)
	}
}
