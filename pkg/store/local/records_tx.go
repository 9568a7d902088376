package local

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Bucket names of the records table.
const (
	bucketItems = "records"
	bucketGSI1  = "records.gsi1"
	bucketGSI2  = "records.gsi2"
)

// storedRecord is a record as encoded in the items bucket; the key is the
// bucket key. Short JSON names keep it compact while staying inspectable.
type storedRecord struct {
	GSI1PK    string           `json:"g1p,omitempty"`
	GSI1SK    string           `json:"g1s,omitempty"`
	GSI2PK    string           `json:"g2p,omitempty"`
	GSI2SK    string           `json:"g2s,omitempty"`
	Status    string           `json:"st,omitempty"`
	Counters  map[string]int64 `json:"c,omitempty"`
	Body      []byte           `json:"b,omitempty"`
	ExpiresAt int64            `json:"exp,omitempty"` // Unix nanoseconds; 0: never
	Version   int64            `json:"v"`
}

func encodeRecord(r store.Record) ([]byte, error) {
	s := storedRecord{
		GSI1PK: r.GSI1.PK, GSI1SK: r.GSI1.SK, GSI2PK: r.GSI2.PK, GSI2SK: r.GSI2.SK,
		Status: r.Status, Counters: r.Counters, Body: r.Body, Version: r.Version,
	}
	if !r.ExpiresAt.IsZero() {
		s.ExpiresAt = r.ExpiresAt.UnixNano()
	}
	return json.Marshal(s)
}

func decodeRecord(key store.Key, b []byte) (store.Record, error) {
	var s storedRecord
	if err := json.Unmarshal(b, &s); err != nil {
		return store.Record{}, fmt.Errorf("decode record %s/%s: %w", key.PK, key.SK, err)
	}
	r := store.Record{
		Key:  key,
		GSI1: store.IndexKey{PK: s.GSI1PK, SK: s.GSI1SK}, GSI2: store.IndexKey{PK: s.GSI2PK, SK: s.GSI2SK},
		Status: s.Status, Counters: s.Counters, Body: s.Body, Version: s.Version,
	}
	if s.ExpiresAt != 0 {
		r.ExpiresAt = time.Unix(0, s.ExpiresAt)
	}
	return r, nil
}

func itemKey(k store.Key) []byte {
	return join(k.PK, k.SK)
}

func indexEntry(ik store.IndexKey, k store.Key) []byte {
	return join(ik.PK, ik.SK, k.PK, k.SK)
}

// join concatenates parts with NUL separators.
func join(parts ...string) []byte {
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}

func expired(r store.Record, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// recTx is one bolt transaction over the records buckets. now is read once
// per transaction so that every expiry check in it agrees.
type recTx struct {
	tx  *bbolt.Tx
	now time.Time
}

// load returns the stored record at key, present or not (the zero Record),
// and whether it is live: present and not expired.
func (x recTx) load(k store.Key) (store.Record, bool, error) {
	rec, present, err := x.loadRaw(x.tx.Bucket([]byte(bucketItems)), itemKey(k), k)
	if err != nil || !present {
		return store.Record{}, false, err
	}
	return rec, !expired(rec, x.now), nil
}

func (x recTx) loadRaw(items *bbolt.Bucket, ik []byte, k store.Key) (store.Record, bool, error) {
	v := items.Get(ik)
	if v == nil {
		return store.Record{}, false, nil
	}
	rec, err := decodeRecord(k, v)
	return rec, err == nil, err
}

// store writes rec and moves its index entries.
func (x recTx) store(rec store.Record) error {
	if err := x.remove(rec.Key); err != nil {
		return err
	}
	v, err := encodeRecord(rec)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if err := x.tx.Bucket([]byte(bucketItems)).Put(itemKey(rec.Key), v); err != nil {
		return err
	}
	for _, ix := range []struct {
		bucket string
		key    store.IndexKey
	}{{bucketGSI1, rec.GSI1}, {bucketGSI2, rec.GSI2}} {
		if ix.key.PK == "" {
			continue
		}
		if err := x.tx.Bucket([]byte(ix.bucket)).Put(indexEntry(ix.key, rec.Key), itemKey(rec.Key)); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the record at k, expired or not, with its index entries.
func (x recTx) remove(k store.Key) error {
	items := x.tx.Bucket([]byte(bucketItems))
	old, present, err := x.loadRaw(items, itemKey(k), k)
	if err != nil || !present {
		return err
	}
	if old.GSI1.PK != "" {
		if err := x.tx.Bucket([]byte(bucketGSI1)).Delete(indexEntry(old.GSI1, k)); err != nil {
			return err
		}
	}
	if old.GSI2.PK != "" {
		if err := x.tx.Bucket([]byte(bucketGSI2)).Delete(indexEntry(old.GSI2, k)); err != nil {
			return err
		}
	}
	return items.Delete(itemKey(k))
}
