package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Records is store.Records on bbolt. Items live in one bucket keyed by
// PK "\x00" SK; each secondary index is a bucket keyed by index PK "\x00"
// index SK "\x00" PK "\x00" SK. bbolt orders keys bytewise and no key part may
// contain a NUL, so a cursor walks a partition in exactly DynamoDB's order.
// Every write, transactions included, is one bolt transaction.
type Records struct {
	db *DB
}

var _ store.Records = (*Records)(nil)

// NewRecords returns the records table stored in db.
func NewRecords(db *DB) (*Records, error) {
	if err := db.createBuckets(bucketItems, bucketGSI1, bucketGSI2); err != nil {
		return nil, fmt.Errorf("local records: %w", err)
	}
	return &Records{db: db}, nil
}

// Get returns the record at key, or ErrNotFound if it is missing or expired.
func (r *Records) Get(ctx context.Context, key store.Key) (store.Record, error) {
	if err := checkKey(key); err != nil {
		return store.Record{}, fmt.Errorf("local records: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	var rec store.Record
	err := r.db.bolt.View(func(tx *bbolt.Tx) error {
		cur, live, err := recTx{tx: tx, now: time.Now()}.load(key)
		if err != nil {
			return err
		}
		if !live {
			return store.ErrNotFound
		}
		rec = cur
		return nil
	})
	if err != nil {
		return store.Record{}, fmt.Errorf("local records: get %s/%s: %w", key.PK, key.SK, err)
	}
	return rec, nil
}

// Put creates or replaces a record, counters included.
func (r *Records) Put(ctx context.Context, rec store.Record, cond store.Cond) error {
	return r.write(ctx, "put", store.Write{Kind: store.WritePut, Record: rec, Cond: cond})
}

// Update replaces everything but the counters of an existing record; a missing
// record fails the implied existence condition (ErrConditionFailed).
func (r *Records) Update(ctx context.Context, rec store.Record, cond store.Cond) error {
	return r.write(ctx, "update", store.Write{Kind: store.WriteUpdate, Record: rec, Cond: cond})
}

// Delete removes a record; deleting a missing one (without a condition) is not
// an error.
func (r *Records) Delete(ctx context.Context, key store.Key, cond store.Cond) error {
	return r.write(ctx, "delete", store.Write{Kind: store.WriteDelete, Record: store.Record{Key: key}, Cond: cond})
}

// Add adds deltas to named counters, creating the record (Version 1) if it is
// absent or expired, and returns the named counters' new values. It leaves the
// version alone, so counting never invalidates a compare-and-set on Version.
func (r *Records) Add(ctx context.Context, key store.Key, deltas map[string]int64, cond store.Cond) (map[string]int64, error) {
	var out map[string]int64
	err := r.update(ctx, func(x recTx) error {
		rec, err := x.apply(store.Write{Kind: store.WriteAdd, Record: store.Record{Key: key, Counters: deltas}, Cond: cond})
		if err != nil {
			return err
		}
		out = make(map[string]int64, len(deltas))
		for name := range deltas {
			out[name] = rec.Counters[name]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("local records: add %s/%s: %w", key.PK, key.SK, err)
	}
	return out, nil
}

// Transact applies writes atomically: every write happens in one bolt
// transaction, and the first failed condition rolls all of them back. Like
// DynamoDB, it refuses two writes to the same item.
func (r *Records) Transact(ctx context.Context, writes []store.Write) error {
	if len(writes) > store.MaxTransactWrites {
		return fmt.Errorf("local records: transact: %d writes, at most %d", len(writes), store.MaxTransactWrites)
	}
	seen := make(map[store.Key]bool, len(writes))
	for i, w := range writes {
		if seen[w.Record.Key] {
			return fmt.Errorf("local records: transact: write %d: a second write to %s/%s", i, w.Record.Key.PK, w.Record.Key.SK)
		}
		seen[w.Record.Key] = true
	}
	err := r.update(ctx, func(x recTx) error {
		for i, w := range writes {
			if _, err := x.apply(w); err != nil {
				return fmt.Errorf("write %d (%s/%s): %w", i, w.Record.Key.PK, w.Record.Key.SK, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local records: transact: %w", err)
	}
	return nil
}

func (r *Records) write(ctx context.Context, op string, w store.Write) error {
	err := r.update(ctx, func(x recTx) error {
		_, err := x.apply(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("local records: %s %s/%s: %w", op, w.Record.Key.PK, w.Record.Key.SK, err)
	}
	return nil
}

func (r *Records) update(ctx context.Context, fn func(recTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return r.db.bolt.Update(func(tx *bbolt.Tx) error {
		return fn(recTx{tx: tx, now: time.Now()})
	})
}

// apply performs one write inside a bolt transaction and returns the record
// as written (the zero Record for a delete).
func (x recTx) apply(w store.Write) (store.Record, error) {
	rec := w.Record
	if err := checkKey(rec.Key); err != nil {
		return store.Record{}, err
	}
	cur, live, err := x.load(rec.Key)
	if err != nil {
		return store.Record{}, err
	}
	cond := w.Cond
	switch w.Kind {
	case store.WritePut:
		if err := checkIndexKeys(rec); err != nil {
			return store.Record{}, err
		}
		rec.Version = 1
	case store.WriteUpdate:
		if err := checkIndexKeys(rec); err != nil {
			return store.Record{}, err
		}
		cond.Exists = true
		rec.Counters = cur.Counters
		rec.Version = 1
	case store.WriteAdd:
		deltas := rec.Counters
		rec = store.Record{Key: rec.Key, Version: 1}
		if live {
			rec = cur
		}
		rec.Counters = maps.Clone(rec.Counters)
		if rec.Counters == nil {
			rec.Counters = make(map[string]int64, len(deltas))
		}
		for name, d := range deltas {
			rec.Counters[name] += d
		}
	case store.WriteDelete:
	default:
		return store.Record{}, fmt.Errorf("unknown write kind %d", w.Kind)
	}
	if !holds(cond, cur, live) {
		return store.Record{}, store.ErrConditionFailed
	}
	if w.Kind == store.WriteDelete {
		return store.Record{}, x.remove(rec.Key)
	}
	if live && w.Kind != store.WriteAdd {
		rec.Version = cur.Version + 1
	}
	rec.Counters = maps.Clone(rec.Counters)
	return rec, x.store(rec)
}

// holds reports whether cond holds for the current record; an expired record
// counts as absent, exactly as reads see it.
func holds(c store.Cond, cur store.Record, live bool) bool {
	switch {
	case c.Absent && live:
		return false
	case (c.Exists || len(c.StatusIn) > 0 || c.Version > 0) && !live:
		return false
	case len(c.StatusIn) > 0 && !slices.Contains(c.StatusIn, cur.Status):
		return false
	case c.Version > 0 && c.Version != cur.Version:
		return false
	}
	for name, most := range c.AtMost {
		var n int64
		if live {
			n = cur.Counters[name]
		}
		if n > most {
			return false
		}
	}
	return true
}

var errBadKey = errors.New("invalid key")

func checkKey(k store.Key) error {
	if k.PK == "" || k.SK == "" || hasNUL(k.PK) || hasNUL(k.SK) {
		return fmt.Errorf("%w %q/%q: PK and SK must be non-empty and free of NUL", errBadKey, k.PK, k.SK)
	}
	return nil
}

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

func checkIndexKeys(rec store.Record) error {
	for _, ik := range []store.IndexKey{rec.GSI1, rec.GSI2} {
		if ik == (store.IndexKey{}) {
			continue
		}
		if ik.PK == "" || ik.SK == "" || hasNUL(ik.PK) || hasNUL(ik.SK) {
			return fmt.Errorf("%w: index key %q/%q: set both PK and SK (or neither), free of NUL", errBadKey, ik.PK, ik.SK)
		}
	}
	return nil
}
