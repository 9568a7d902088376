package local

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// purgeBatch bounds how many records one purge transaction removes, so the
// single bolt writer is never held for long.
const purgeBatch = 500

// PurgeExpired removes records whose ExpiresAt has passed, with their index
// entries: the embedded stand-in for DynamoDB's TTL deletion. Reads already
// hide expired records; this only reclaims the space. It returns how many
// records it removed.
func (r *Records) PurgeExpired(ctx context.Context) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var due []store.Key
		now := time.Now()
		err := r.db.bolt.View(func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte(bucketItems)).ForEach(func(k, v []byte) error {
				key := splitItemKey(k)
				rec, err := decodeRecord(key, v)
				if err != nil {
					return fmt.Errorf("decode %s/%s: %w", key.PK, key.SK, err)
				}
				if expired(rec, now) {
					due = append(due, key)
				}
				if len(due) == purgeBatch {
					return errBatchFull
				}
				return nil
			})
		})
		if err != nil && err != errBatchFull {
			return total, fmt.Errorf("local records: purge: %w", err)
		}
		if len(due) == 0 {
			return total, nil
		}
		err = r.update(ctx, func(x recTx) error {
			for _, k := range due {
				// Re-check inside the write: the record may have been rewritten.
				rec, present, err := x.loadRaw(x.tx.Bucket([]byte(bucketItems)), itemKey(k), k)
				if err != nil {
					return err
				}
				if present && expired(rec, x.now) {
					if err := x.remove(k); err != nil {
						return err
					}
					total++
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("local records: purge: %w", err)
		}
		if len(due) < purgeBatch {
			return total, nil
		}
	}
}

// errBatchFull stops a scan once a purge batch is full.
var errBatchFull = fmt.Errorf("purge batch full")
