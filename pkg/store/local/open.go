package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Work is the batch work queue (plan, chunk and finalize messages).
	Work QueueOptions
	// Deliveries is the log-event subscription the callback delivery worker
	// consumes.
	Deliveries QueueOptions
}

// Queue names in the DB. A dead-letter queue is its queue's name + ".dead".
const (
	workQueue       = "work"
	deliveriesQueue = "deliveries"
	deadSuffix      = ".dead"
)

// Open builds a complete store.Backend in dir, creating the directory and its
// files on first use. Only one process may have a dir open at a time: the
// database file is locked (flock), a second Open fails, and the blob writes a
// crashed process left half done are removed here.
func Open(dir string, opts Options) (_ *store.Backend, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local: open %s: %w", dir, err)
	}
	db, err := OpenDB(filepath.Join(dir, "sluice.db"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	records, err := NewRecords(db)
	if err != nil {
		return nil, err
	}
	blobs, err := NewBlobs(filepath.Join(dir, "blobs"))
	if err != nil {
		return nil, err
	}
	// The lock is ours, so nothing else is writing: every temporary file is
	// what a crash left of a write.
	if n, err := blobs.removeTemps(); err != nil {
		return nil, err
	} else if n > 0 {
		slog.Info("local: removed partial blob writes left by an earlier process", "count", n, "dir", blobs.tmp)
	}
	work, err := newQueueWithDead(db, workQueue, opts.Work)
	if err != nil {
		return nil, err
	}
	deliveries, err := newQueueWithDead(db, deliveriesQueue, opts.Deliveries)
	if err != nil {
		return nil, err
	}
	sealer, err := OpenSealer(filepath.Join(dir, "sealer.key"))
	if err != nil {
		return nil, err
	}
	return &store.Backend{
		Records:    records,
		Blobs:      blobs,
		Work:       work,
		Bus:        NewBus(deliveries),
		Deliveries: deliveries,
		// The deliveries queue's own dead-letter queue.
		DeliveryDeadLetters: deliveries.dead,
		Limiter:             NewLimiter(),
		Sealer:              sealer,
		Ping: func(ctx context.Context) error {
			if err := db.Ping(ctx); err != nil {
				return errors.Join(store.ErrUnavailable, err)
			}
			if _, err := os.Stat(blobs.objects); err != nil {
				return errors.Join(store.ErrUnavailable, fmt.Errorf("local: ping blobs: %w", err))
			}
			return nil
		},
		PurgeExpired: records.PurgeExpired,
		Close:        db.Close,
	}, nil
}

func newQueueWithDead(db *DB, name string, opts QueueOptions) (*Queue, error) {
	dead, err := NewQueue(db, name+deadSuffix, QueueOptions{}, nil)
	if err != nil {
		return nil, err
	}
	return NewQueue(db, name, opts, dead)
}
