package awsstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Records implements store.Records on one DynamoDB table laid out as in
// ARCHITECTURE §4. Every read is strongly consistent on the table (GSIs
// cannot be) and filters expired items itself.
type Records struct {
	db    *dynamodb.Client
	table string
	now   func() time.Time
}

var _ store.Records = (*Records)(nil)

// NewRecords returns the records adapter for table.
func NewRecords(db *dynamodb.Client, table string) *Records {
	return &Records{db: db, table: table, now: time.Now}
}

// maxAttempts bounds the optimistic retries of a write whose snapshot went
// stale under a concurrent writer.
const maxAttempts = 10

// Get reads one live record.
func (r *Records) Get(ctx context.Context, key store.Key) (store.Record, error) {
	it, err := r.read(ctx, key)
	if err != nil {
		return store.Record{}, err
	}
	if !live(it, r.now()) {
		return store.Record{}, fmt.Errorf("dynamodb get %s/%s: %w", key.PK, key.SK, store.ErrNotFound)
	}
	rec, err := decodeRecord(it)
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb get %s/%s: %w", key.PK, key.SK, err)
	}
	return rec, nil
}

// read returns the item under key, expired or not, or nil.
func (r *Records) read(ctx context.Context, key store.Key) (item, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &r.table,
		Key:            keyItem(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, wrap(err, "dynamodb get %s/%s", key.PK, key.SK)
	}
	return out.Item, nil
}

// Put creates or replaces a record. A create-if-absent or a compare-and-set
// on the version is one conditional PutItem; any other Put first reads the
// current version to compute the next one.
func (r *Records) Put(ctx context.Context, rec store.Record, cond store.Cond) error {
	_, err := r.apply(ctx, []store.Write{{Kind: store.WritePut, Record: rec, Cond: cond}})
	if err != nil {
		return fmt.Errorf("dynamodb put %s/%s: %w", rec.Key.PK, rec.Key.SK, err)
	}
	return nil
}

// Update replaces everything but the counters of a live record, with an
// UpdateItem so that concurrent counter adds are kept.
func (r *Records) Update(ctx context.Context, rec store.Record, cond store.Cond) error {
	_, err := r.apply(ctx, []store.Write{{Kind: store.WriteUpdate, Record: rec, Cond: cond}})
	if err != nil {
		return fmt.Errorf("dynamodb update %s/%s: %w", rec.Key.PK, rec.Key.SK, err)
	}
	return nil
}

// Add adds deltas to counters with the ADD action and returns their new
// values. An expired record is replaced by a fresh one holding only the
// deltas, as if it had been swept.
func (r *Records) Add(ctx context.Context, key store.Key, deltas map[string]int64, cond store.Cond) (map[string]int64, error) {
	rec := store.Record{Key: key, Counters: deltas}
	got, err := r.apply(ctx, []store.Write{{Kind: store.WriteAdd, Record: rec, Cond: cond}})
	if err != nil {
		return nil, fmt.Errorf("dynamodb add %s/%s: %w", key.PK, key.SK, err)
	}
	out := make(map[string]int64, len(deltas))
	for name, d := range deltas {
		if got == nil { // the fresh-record path: the new values are the deltas
			out[name] = d
			continue
		}
		n, err := intAttr(got, counterPrefix+name)
		if err != nil {
			return nil, fmt.Errorf("dynamodb add %s/%s: %w", key.PK, key.SK, err)
		}
		out[name] = n
	}
	return out, nil
}

// Delete removes a record; deleting a missing record without a condition is
// not an error.
func (r *Records) Delete(ctx context.Context, key store.Key, cond store.Cond) error {
	_, err := r.apply(ctx, []store.Write{{Kind: store.WriteDelete, Record: store.Record{Key: key}, Cond: cond}})
	if err != nil {
		return fmt.Errorf("dynamodb delete %s/%s: %w", key.PK, key.SK, err)
	}
	return nil
}

// Transact applies writes atomically with TransactWriteItems (a single write
// goes through the cheaper single-item call with the same semantics).
func (r *Records) Transact(ctx context.Context, writes []store.Write) error {
	if len(writes) == 0 {
		return nil
	}
	if len(writes) > store.MaxTransactWrites {
		return fmt.Errorf("dynamodb transact: %d writes, at most %d allowed", len(writes), store.MaxTransactWrites)
	}
	seen := make(map[store.Key]bool, len(writes))
	for _, w := range writes {
		if seen[w.Record.Key] {
			// DynamoDB refuses this too; saying so here names the key.
			return fmt.Errorf("dynamodb transact: two writes to %s/%s", w.Record.Key.PK, w.Record.Key.SK)
		}
		seen[w.Record.Key] = true
	}
	if _, err := r.apply(ctx, writes); err != nil {
		return fmt.Errorf("dynamodb transact (%d writes): %w", len(writes), err)
	}
	return nil
}

// apply plans and runs writes, retrying when a failed condition turns out to
// be a stale snapshot rather than a condition that does not hold. For a
// single WriteAdd it returns the item's updated attributes (nil when the add
// created a fresh record).
func (r *Records) apply(ctx context.Context, writes []store.Write) (item, error) {
	snaps := snapshots{}
	for attempt := 1; ; attempt++ {
		now := r.now()
		ops, err := r.planAll(ctx, writes, snaps, now)
		if err != nil {
			return nil, err
		}
		var got item
		if len(ops) == 1 {
			got, err = r.runOne(ctx, ops[0])
		} else {
			err = r.runTransaction(ctx, ops)
		}
		if err == nil || !errors.Is(err, store.ErrConditionFailed) {
			return got, err
		}
		// Re-read everything and judge the conditions on what is there now.
		keys := make([]store.Key, len(writes))
		for i, w := range writes {
			keys[i] = w.Record.Key
		}
		if err := r.readSnapshots(ctx, keys, snaps); err != nil {
			return nil, err
		}
		if landed(ops, snaps) {
			return got, nil
		}
		now = r.now()
		for _, w := range writes {
			it := snaps[w.Record.Key]
			if !holds(w.Cond, it, now) || (w.Kind == store.WriteUpdate && !live(it, now)) {
				return nil, store.ErrConditionFailed
			}
		}
		if attempt == maxAttempts {
			return nil, fmt.Errorf("%d attempts lost to concurrent writers: %w", attempt, store.ErrConditionFailed)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// landed reports whether ops are puts whose items are already stored
// exactly as planned: the SDK retried a write (a 5xx, a reset connection)
// whose first attempt was applied but whose answer was lost, so the retry
// failed its own condition. The write succeeded; reporting a conflict would
// turn a created team or file into a 409. Items carry random ids, creation
// times and versions, so another writer's item does not match by accident.
// Updates, adds and deletes cannot be told apart from a concurrent writer's
// and are judged on their conditions as usual.
func landed(ops []op, snaps snapshots) bool {
	for _, o := range ops {
		if o.put == nil {
			return false
		}
		pk, _ := o.put.Item[attrPK].(*types.AttributeValueMemberS)
		sk, _ := o.put.Item[attrSK].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil || !reflect.DeepEqual(snaps[store.Key{PK: pk.Value, SK: sk.Value}], o.put.Item) {
			return false
		}
	}
	return true
}

// planAll plans every write, reading the snapshots that some need first.
func (r *Records) planAll(ctx context.Context, writes []store.Write, snaps snapshots, now time.Time) ([]op, error) {
	var missing []store.Key
	for _, w := range writes {
		if needsSnapshot(w) && !snaps.known(w.Record.Key) {
			missing = append(missing, w.Record.Key)
		}
	}
	if len(missing) > 0 {
		if err := r.readSnapshots(ctx, missing, snaps); err != nil {
			return nil, err
		}
	}
	ops := make([]op, len(writes))
	for i, w := range writes {
		o, err := r.plan(w, snaps, now)
		if err != nil {
			return nil, err
		}
		ops[i] = o
	}
	return ops, nil
}

// backoff is a jittered delay before retry attempt n+1.
func backoff(n int) time.Duration {
	d := time.Duration(n) * 5 * time.Millisecond
	return d + rand.N(d+time.Millisecond)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// conditionFailed reports whether a single-item write failed its condition.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
