package local

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Query reads one partition of the table or an index in sort-key order,
// skipping expired records. A page holds up to q.Limit live records, and More
// is true only if another live record follows. A keys-only index gives keys
// only, expired records included, as DynamoDB's does.
func (r *Records) Query(ctx context.Context, q store.Query) (store.Page, error) {
	bucket, ok := map[store.Index]string{store.Table: bucketItems, store.GSI1: bucketGSI1, store.GSI2: bucketGSI2}[q.Index]
	switch {
	case !ok:
		return store.Page{}, fmt.Errorf("local records: query: unknown index %q", q.Index)
	case q.PK == "" || hasNUL(q.PK) || hasNUL(q.SKPrefix) || hasNUL(q.After):
		return store.Page{}, fmt.Errorf("local records: query %s: %w: PK must be non-empty; no part may hold NUL", q.Index, errBadKey)
	case q.Limit <= 0:
		return store.Page{}, fmt.Errorf("local records: query %s %s: limit %d, want > 0", q.Index, q.PK, q.Limit)
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, err
	}
	var page store.Page
	err := r.db.bolt.View(func(tx *bbolt.Tx) error {
		x := recTx{tx: tx, now: time.Now()}
		items := tx.Bucket([]byte(bucketItems))
		base := append([]byte(q.PK), 0)
		return scan(tx.Bucket([]byte(bucket)).Cursor(), base, q, func(k, v []byte) (bool, error) {
			var rec store.Record
			var err error
			if q.Index == store.Table {
				rec, err = decodeRecord(splitItemKey(k), v)
			} else {
				var present bool
				rec, present, err = x.loadRaw(items, v, splitItemKey(v))
				if err == nil && !present {
					err = fmt.Errorf("index entry %q points to a missing record", k)
				}
			}
			if err != nil {
				return false, err
			}
			if q.Index.KeysOnly() {
				// As DynamoDB's keys-only index: keys, and no expiry.
				rec = rec.KeysIn(q.Index)
			} else if expired(rec, x.now) {
				return true, nil
			}
			if len(page.Records) == q.Limit {
				page.More = true
				return false, nil
			}
			page.Records = append(page.Records, rec)
			return true, nil
		})
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("local records: query %s %s: %w", q.Index, q.PK, err)
	}
	return page, nil
}

// scan walks the entries of one partition (keys starting with base) whose sort
// key has q.SKPrefix and lies after q.After in the query's order, calling fn
// until it returns false. The sort key is the part of an entry key between
// base and the next NUL (or the end).
func scan(c *bbolt.Cursor, base []byte, q store.Query, fn func(k, v []byte) (bool, error)) error {
	prefix := cat(base, []byte(q.SKPrefix))
	var after []byte
	if q.After != "" {
		after = cat(base, []byte(q.After))
	}
	var k, v []byte
	var next func() ([]byte, []byte)
	if !q.Desc {
		start := prefix
		if after != nil && bytes.Compare(after, start) > 0 {
			start = after
		}
		k, v = c.Seek(start)
		next = c.Next
	} else {
		end := prefixEnd(prefix) // entries with the prefix sort before end
		if after != nil && (end == nil || bytes.Compare(after, end) < 0) {
			end = after
		}
		if end == nil {
			k, v = c.Last()
		} else if k, v = c.Seek(end); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		next = c.Prev
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = next() {
		if after != nil {
			sk := sortKey(k, len(base))
			// Skip the cursor itself (and, in an index, every entry
			// sharing its sort key).
			if c := bytes.Compare(sk, after[len(base):]); c == 0 || (c < 0) != q.Desc {
				continue
			}
		}
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func sortKey(k []byte, baseLen int) []byte {
	sk := k[baseLen:]
	if i := bytes.IndexByte(sk, 0); i >= 0 {
		sk = sk[:i]
	}
	return sk
}

// splitItemKey turns an items-bucket key back into a Key.
func splitItemKey(k []byte) store.Key {
	pk, sk, _ := bytes.Cut(k, []byte{0})
	return store.Key{PK: string(pk), SK: string(sk)}
}

// prefixEnd returns the smallest key greater than every key starting with p,
// or nil if there is none.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func cat(a, b []byte) []byte {
	return append(bytes.Clone(a), b...)
}
