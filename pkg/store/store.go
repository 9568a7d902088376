// Package store declares the narrow storage interfaces every sluice capability
// is built on: records, blobs, a work queue, an event bus, a shared limiter and
// a sealer. Two adapter packages implement them: pkg/store/local (bbolt and the
// file system, for one process) and pkg/store/aws (DynamoDB, S3, SQS, SNS, KMS).
// pkg/store/storetest holds the one conformance suite per interface that both
// adapters must pass unchanged.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors shared by every adapter. Callers test them with errors.Is.
var (
	// ErrNotFound means the record, blob or message does not exist (or has expired).
	ErrNotFound = errors.New("store: not found")
	// ErrConditionFailed means a write's condition did not hold; nothing was written.
	ErrConditionFailed = errors.New("store: condition failed")
	// ErrUnavailable means the backing service did not answer; callers map it to 503.
	ErrUnavailable = errors.New("store: unavailable")
)

// Index names a secondary index of the records table.
type Index string

// The table and its two secondary indexes (ARCHITECTURE §4).
const (
	Table Index = ""     // the table itself, keyed by PK/SK
	GSI1  Index = "gsi1" // listing: an owner's items in creation order
	GSI2  Index = "gsi2" // sweeps: items by expiry, keys only
)

// KeysOnly reports whether index i holds keys only: a query on it returns
// each record's Key and its keys in the index, nothing else (read the
// record for the rest). GSI2 does: a sweep reads which records are due, then
// each due record, so the index stores (and every write to a record copies
// into it) no bodies.
func (i Index) KeysOnly() bool { return i == GSI2 }

// KeysIn is what a keys-only index ix holds of r: its Key and its keys in ix.
func (r Record) KeysIn(ix Index) Record {
	out := Record{Key: r.Key}
	switch ix {
	case GSI1:
		out.GSI1 = r.GSI1
	case GSI2:
		out.GSI2 = r.GSI2
	}
	return out
}

// Key is a record's primary key.
type Key struct {
	PK string
	SK string
}

// IndexKey places a record in a secondary index; the zero value leaves it out.
type IndexKey struct {
	PK string
	SK string
}

// Record is one item of the records table. Body is an opaque document owned by
// the capability that wrote it; Status and Counters are lifted out of it so
// that conditions and atomic adds work without reading the body.
type Record struct {
	Key       Key
	GSI1      IndexKey
	GSI2      IndexKey
	Status    string
	Counters  map[string]int64
	Body      []byte
	ExpiresAt time.Time // zero: never; expired records read as ErrNotFound
	Version   int64     // set by the store: 1 on create, +1 on every Put or Update
}

// Cond is a write condition. The zero value always holds.
type Cond struct {
	Absent   bool     // the record must not exist
	Exists   bool     // the record must exist
	StatusIn []string // the record's status must be one of these (implies Exists)
	Version  int64    // when > 0, the record's version must equal it (implies Exists)
	// AtMost bounds counters: each named counter must be at most its value
	// (a missing counter, or a missing or expired record, counts as 0). With
	// an Add of d to counter c, AtMost{c: max - d} keeps c at most max after
	// it, atomically: a quota that concurrent adds cannot overshoot.
	AtMost map[string]int64
}

// Query reads one partition of the table or an index in sort-key order. A
// query on a keys-only index (Index.KeysOnly) returns each record's Key and
// its keys in that index only, and does not know which records have expired:
// Get tells.
type Query struct {
	Index    Index
	PK       string
	SKPrefix string // only sort keys with this prefix
	After    string // exclusive cursor: only sort keys after this one, in the query's order
	Desc     bool
	Limit    int // > 0
}

// Page is one page of a Query. More reports whether records beyond it exist.
type Page struct {
	Records []Record
	More    bool
}

// WriteKind says what a transactional Write does.
type WriteKind int

// Kinds of transactional writes.
const (
	WritePut    WriteKind = iota + 1 // create or replace the whole record
	WriteUpdate                      // replace all but the counters; the record must exist
	WriteAdd                         // add Record.Counters to the record's counters
	WriteDelete                      // remove the record
)

// Write is one write of a transaction.
type Write struct {
	Kind   WriteKind
	Record Record // for WriteDelete only Key is used
	Cond   Cond
}

// Records is the key-value table: single-item reads and conditional writes,
// atomic counters, ordered partition queries and all-or-nothing transactions.
type Records interface {
	Get(ctx context.Context, key Key) (Record, error)
	// Put creates or replaces a record, counters included.
	Put(ctx context.Context, rec Record, cond Cond) error
	// Update replaces everything but the counters of an existing record.
	Update(ctx context.Context, rec Record, cond Cond) error
	// Add adds deltas to named counters (creating the record if absent) and
	// returns the counters' new values.
	Add(ctx context.Context, key Key, deltas map[string]int64, cond Cond) (map[string]int64, error)
	Delete(ctx context.Context, key Key, cond Cond) error
	Query(ctx context.Context, q Query) (Page, error)
	// Transact applies up to MaxTransactWrites writes atomically: if any
	// condition fails, nothing is written and the error is ErrConditionFailed.
	Transact(ctx context.Context, writes []Write) error
}

// MaxTransactWrites is the most writes one transaction may carry (DynamoDB's limit).
const MaxTransactWrites = 100

// Blobs stores byte objects by key. Writes stream from a reader and become
// visible only when complete; reads stream, optionally a byte range.
type Blobs interface {
	// Put stores everything r yields under key and returns the byte count.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Get reads length bytes from offset (length < 0: to the end).
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Size reports an object's length in bytes.
	Size(ctx context.Context, key string) (int64, error)
	// Delete removes an object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
}

// Presigner is implemented by blob stores that can hand out time-limited URLs.
type Presigner interface {
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// Message is a queue message as received.
type Message struct {
	ID       string
	Body     []byte
	Receives int    // how many times it has been received, this time included
	Receipt  string // adapter handle for Ack and Extend
}

// Queue is an at-least-once work queue with a visibility timeout and a dead
// letter after a configured number of receives.
type Queue interface {
	// Send enqueues bodies, in batches where the backend supports it.
	Send(ctx context.Context, bodies ...[]byte) error
	// Receive waits up to wait for at most max messages, hiding each for the
	// queue's visibility timeout.
	Receive(ctx context.Context, max int, wait time.Duration) ([]Message, error)
	// Ack deletes a received message.
	Ack(ctx context.Context, m Message) error
	// Extend hides a received message for d more, counted from now.
	Extend(ctx context.Context, m Message, d time.Duration) error
}

// Event is a message on the bus: a body plus attributes subscribers filter on.
type Event struct {
	Attributes map[string]string
	Body       []byte
}

// Bus publishes events to every subscriber, at least once each.
type Bus interface {
	Publish(ctx context.Context, events ...Event) error
}

// Decision is a limiter's answer.
type Decision struct {
	Allowed bool
	// Refused names the counter that refused the take (when not Allowed).
	Refused string
	// Remaining is the units left after the take in its first counter
	// (when allowed) or in the refusing one.
	Remaining  int64
	RetryAfter time.Duration // when refused: time until the window resets
}

// Take is one counter's part of a limiter take.
type Take struct {
	Counter string // e.g. "rpm", "tpm"
	Limit   int64  // the counter may hold at most this many units after the take
	N       int64  // units to add; 0 only checks that the counter holds at most Limit
}

// Limiter counts units per fixed window, shared by every process using the
// store. A scope's window holds several counters (a key's requests and
// tokens), so that one take can count and check them all at once: one
// write, not one per counter.
type Limiter interface {
	// Take applies takes to the counters of scope's current window of the
	// given length, all or none: it is allowed only if every counter
	// stays within its take's limit. A refused take takes nothing; a take
	// whose every N is 0 only checks (an adapter may answer it with a
	// read).
	Take(ctx context.Context, scope string, window time.Duration, takes ...Take) (Decision, error)
}

// Sealer encrypts small secrets with envelope encryption. The context is bound
// to the ciphertext: Open with a different context fails.
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, encCtx map[string]string) ([]byte, error)
	Open(ctx context.Context, sealed []byte, encCtx map[string]string) ([]byte, error)
}

// Backend bundles the adapters one process runs on. The local and AWS adapter
// packages each build one.
type Backend struct {
	Records Records
	Blobs   Blobs
	Work    Queue // batch work: plan, chunk and finalize messages
	Bus     Bus   // log events, fanned out to Deliveries
	// Deliveries is the bus subscription the callback delivery worker consumes.
	Deliveries Queue
	// DeliveryDeadLetters is Deliveries' dead-letter queue: messages that
	// failed MaxReceives times, and the log events the delivery worker gives
	// up on (it sends them there itself). An operator is alarmed when it
	// holds any, and re-drives them to Deliveries (Redrive).
	DeliveryDeadLetters Queue
	Limiter             Limiter
	Sealer              Sealer
	// Ping reports whether the stores answer (readiness).
	Ping func(ctx context.Context) error
	// PurgeExpired removes records past their ExpiresAt, where the backend
	// has no TTL deletion of its own (nil on DynamoDB, whose TTL does it).
	PurgeExpired func(ctx context.Context) (int, error)
	// Close releases the adapters' resources.
	Close func() error
}

// CheckTakes reports a take a limiter cannot apply: no counter, a window or
// limit that allows nothing sensible, a negative n, or a counter named
// twice.
func CheckTakes(window time.Duration, takes []Take) error {
	if window <= 0 {
		return fmt.Errorf("window %v: want > 0", window)
	}
	if len(takes) == 0 {
		return errors.New("no counter to take from")
	}
	for i, t := range takes {
		if t.Counter == "" || t.Limit < 0 || t.N < 0 {
			return fmt.Errorf("take %q: limit %d, n %d: want a counter, limit ≥ 0, n ≥ 0", t.Counter, t.Limit, t.N)
		}
		for _, u := range takes[:i] {
			if u.Counter == t.Counter {
				return fmt.Errorf("counter %q taken from twice", t.Counter)
			}
		}
	}
	return nil
}
