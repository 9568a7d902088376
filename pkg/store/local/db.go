package local

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// DB is the bbolt file that the local records and queues share. bbolt locks
// the file, so a second process opening the same data dir fails rather than
// corrupting it, and every write is one serialized transaction, which is what
// makes conditional writes and queue leases atomic without further locking.
type DB struct {
	bolt      *bbolt.DB
	closed    chan struct{} // closed by Close: wakes long polls
	closeOnce sync.Once

	// The group commit of update: the updates waiting while one commits,
	// and how many group transactions there were.
	groupMu    sync.Mutex
	waiting    []*groupOp
	committing bool
	commits    atomic.Int64
}

// groupOp is one update waiting for a group commit.
type groupOp struct {
	fn   func(*bbolt.Tx) error
	err  error
	wake chan bool // true: lead the next commit; false: done, see err
}

// update runs fn in a read-write transaction like bbolt's Update, but
// committed together with the updates that wait meanwhile (group commit):
// an idle DB commits at once; while a commit is in flight — an fsync, some
// milliseconds on a busy disk — other updates gather and the first of them
// commits them all in the next transaction. Queue traffic (publishes,
// receives, acks) then costs a share of one fsync each instead of one
// each. If the group's transaction fails, each update runs again alone, so
// one failing fn fails only itself: fn must be safe to run twice (set its
// results afresh each time).
func (db *DB) update(fn func(*bbolt.Tx) error) error {
	op := &groupOp{fn: fn, wake: make(chan bool, 1)}
	db.groupMu.Lock()
	db.waiting = append(db.waiting, op)
	lead := !db.committing
	db.committing = true
	db.groupMu.Unlock()
	if !lead && !<-op.wake {
		return op.err
	}
	db.groupMu.Lock()
	ops := db.waiting
	db.waiting = nil
	db.groupMu.Unlock()

	db.commits.Add(1)
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		for _, o := range ops {
			if err := o.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	for _, o := range ops {
		o.err = err
		if err != nil && len(ops) > 1 {
			o.err = db.bolt.Update(o.fn)
		}
	}

	db.groupMu.Lock()
	if len(db.waiting) > 0 {
		db.waiting[0].wake <- true // the next commit is theirs
	} else {
		db.committing = false
	}
	db.groupMu.Unlock()
	for _, o := range ops {
		if o != op {
			o.wake <- false
		}
	}
	return op.err
}

// ErrLocked means another process has the database open.
var ErrLocked = errors.New("database in use")

// lockTimeout is how long OpenDB waits for another process to let go of the
// file before failing.
const lockTimeout = time.Second

// OpenDB opens (creating if needed) the bbolt file at path; if another
// process has it open, OpenDB fails with ErrLocked after lockTimeout.
func OpenDB(path string) (*DB, error) {
	b, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bberrors.ErrTimeout) {
		return nil, fmt.Errorf("local: open %s: %w: another process holds its lock (one sluice per data dir; stop the other or use another dir)", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	return &DB{bolt: b, closed: make(chan struct{})}, nil
}

// Close releases the file; blocked queue receives return an error.
func (db *DB) Close() error {
	db.closeOnce.Do(func() { close(db.closed) })
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("local: close %s: %w", db.bolt.Path(), err)
	}
	return nil
}

// Ping reports whether the file is open and readable.
func (db *DB) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.bolt.View(func(*bbolt.Tx) error { return nil }); err != nil {
		return fmt.Errorf("local: ping %s: %w", db.bolt.Path(), err)
	}
	return nil
}

// createBuckets makes sure the named top-level buckets exist.
func (db *DB) createBuckets(names ...string) error {
	return db.bolt.Update(func(tx *bbolt.Tx) error {
		for _, n := range names {
			if _, err := tx.CreateBucketIfNotExists([]byte(n)); err != nil {
				return fmt.Errorf("create bucket %s: %w", n, err)
			}
		}
		return nil
	})
}
