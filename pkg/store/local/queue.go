package local

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Queue defaults, used for zero QueueOptions fields.
const (
	// DefaultVisibility is how long a received message stays hidden: long
	// enough for a batch chunk, short enough that a crashed worker's message
	// comes back soon.
	DefaultVisibility = 5 * time.Minute
	// DefaultMaxReceives is how many receives a message gets before it is
	// dead-lettered.
	DefaultMaxReceives = 5
	// DeliveryVisibility is the deliveries queue's visibility in the local
	// process: it covers one delivery handler (three sends of at most 10 s
	// and their backoff), and is the wait before a failed delivery is tried
	// again — short, since locally nothing bills for a receive.
	DeliveryVisibility = time.Minute
)

// QueueOptions configures a Queue. Zero fields take the defaults.
type QueueOptions struct {
	Visibility  time.Duration
	MaxReceives int // with a dead-letter queue: receives before a message moves there
}

// Bucket layout: bucketQueues holds one bucket per queue name, which holds
// "msgs" (sequence → storedMessage) and "ready" (visible-at ‖ sequence → empty).
// The ready index keeps messages in the order they become visible, so a
// receive reads the first due entries and knows when the next one is due.
const (
	bucketQueues = "queues"
	subMsgs      = "msgs"
	subReady     = "ready"
)

type storedMessage struct {
	ID        string `json:"id"`
	Body      []byte `json:"b"`
	Receives  int    `json:"r"`
	VisibleAt int64  `json:"t"` // Unix nanoseconds
}

// Queue is a durable store.Queue in a bbolt bucket: messages survive a
// restart, a received message is hidden for the visibility timeout, and after
// MaxReceives receives the next receive moves it to the dead-letter queue (the
// same rule as SQS's redrive policy). Receive long-polls and wakes as soon as a
// message is sent or becomes visible.
type Queue struct {
	db   *DB
	name string
	opts QueueOptions
	dead *Queue

	mu   sync.Mutex
	wake chan struct{} // closed and replaced whenever messages may have become available
}

var _ store.Queue = (*Queue)(nil)

// NewQueue returns the queue called name in db. deadLetter, if not nil, must
// live in the same db; without one, messages are redelivered indefinitely.
//
// A queue has one process (the DB lock sees to that), so leases held when the
// previous process stopped are void: NewQueue makes such messages visible at
// once (keeping their receive counts) instead of waiting out their timeouts.
func NewQueue(db *DB, name string, opts QueueOptions, deadLetter *Queue) (*Queue, error) {
	if name == "" {
		return nil, errors.New("local queue: empty name")
	}
	if deadLetter != nil && deadLetter.db != db {
		return nil, fmt.Errorf("local queue %s: dead-letter queue %s is in another DB", name, deadLetter.name)
	}
	if opts.Visibility <= 0 {
		opts.Visibility = DefaultVisibility
	}
	if opts.MaxReceives <= 0 {
		opts.MaxReceives = DefaultMaxReceives
	}
	q := &Queue{db: db, name: name, opts: opts, dead: deadLetter, wake: make(chan struct{})}
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		top, err := tx.CreateBucketIfNotExists([]byte(bucketQueues))
		if err != nil {
			return err
		}
		b, err := top.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		if _, err := b.CreateBucketIfNotExists([]byte(subMsgs)); err != nil {
			return err
		}
		if _, err := b.CreateBucketIfNotExists([]byte(subReady)); err != nil {
			return err
		}
		return q.releaseLeases(tx, time.Now())
	})
	if err != nil {
		return nil, fmt.Errorf("local queue %s: open: %w", name, err)
	}
	return q, nil
}

// Send enqueues bodies in one transaction.
func (q *Queue) Send(ctx context.Context, bodies ...[]byte) error {
	if len(bodies) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := q.db.update(func(tx *bbolt.Tx) error {
		now := time.Now()
		for _, b := range bodies {
			if err := q.append(tx, rand.Text(), b, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("local queue %s: send: %w", q.name, err)
	}
	q.notify()
	return nil
}

// sendReceived appends events as messages already received once, by the
// caller, hidden for the visibility timeout, and acks done (messages the
// caller received this way, or from Receive, and has handled), in one
// transaction. ids[i] is events[i]'s message ID: the caller may have
// handled the message under it before it was written. It is a send and a
// receive without the receive's transaction, for a producer that consumes
// what it sends in the same process: what it fails to handle and ack
// becomes visible after the visibility timeout (or at the next start) and
// is received again by the queue's consumers, with its receive count, like
// any message.
func (q *Queue) sendReceived(ctx context.Context, done []store.Message, ids []string, events []store.Event) ([]store.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(ids) != len(events) {
		return nil, fmt.Errorf("local queue %s: send received: %d IDs for %d events", q.name, len(ids), len(events))
	}
	acks, err := parseReceipts(done)
	if err != nil {
		return nil, fmt.Errorf("local queue %s: ack: %w", q.name, err)
	}
	var msgs []store.Message
	err = q.db.update(func(tx *bbolt.Tx) error {
		msgs = msgs[:0] // a group commit may run this twice
		if err := q.deleteAll(tx, acks); err != nil {
			return err
		}
		b := q.bucket(tx)
		visible := time.Now().Add(q.opts.Visibility).UnixNano()
		for i, e := range events {
			seq, err := b.Bucket([]byte(subMsgs)).NextSequence()
			if err != nil {
				return err
			}
			// The event is encoded straight after the stored header: one
			// buffer, which bbolt keeps until the commit, and the body
			// handed back is part of it.
			sm := storedMessage{ID: ids[i], Receives: 1, VisibleAt: visible}
			v := sm.appendHeader(make([]byte, 0, headerSize(sm)+store.EventBinarySize(e)))
			header := len(v)
			v = store.AppendEventBinary(v, e)
			if err := q.putStored(b, seq, visible, v); err != nil {
				return err
			}
			msgs = append(msgs, store.Message{ID: sm.ID, Body: v[header:], Receives: 1,
				Receipt: strconv.FormatUint(seq, 10) + ":1"})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("local queue %s: send received: %w", q.name, err)
	}
	return msgs, nil
}

// Receive waits up to wait for at most max visible messages, hiding each for
// the visibility timeout. It returns early when ctx is done (with ctx's error)
// or the DB is closed.
func (q *Queue) Receive(ctx context.Context, maxMsgs int, wait time.Duration) ([]store.Message, error) {
	if maxMsgs < 1 {
		return nil, fmt.Errorf("local queue %s: receive: max = %d, want ≥ 1", q.name, maxMsgs)
	}
	deadline := time.Now().Add(wait)
	for {
		wake := q.waiter() // before looking, so a send in between is not missed
		msgs, next, err := q.take(maxMsgs)
		if err != nil {
			return nil, fmt.Errorf("local queue %s: receive: %w", q.name, err)
		}
		now := time.Now()
		if len(msgs) > 0 || !now.Before(deadline) {
			return msgs, nil
		}
		d := deadline.Sub(now)
		if !next.IsZero() {
			d = min(d, max(next.Sub(now), 0))
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-q.db.closed:
			timer.Stop()
			return nil, fmt.Errorf("local queue %s: receive: %w", q.name, bbolt.ErrDatabaseNotOpen)
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Len reports how many messages the queue holds, visible or not.
func (q *Queue) Len() (int, error) {
	n := 0
	err := q.db.bolt.View(func(tx *bbolt.Tx) error {
		n = q.bucket(tx).Bucket([]byte(subMsgs)).Stats().KeyN
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("local queue %s: len: %w", q.name, err)
	}
	return n, nil
}

// Ack deletes a received message. Acking a message that is gone, or with the
// receipt of an earlier receive (it has been received again since), does
// nothing: the current holder owns it.
func (q *Queue) Ack(ctx context.Context, m store.Message) error {
	if err := q.ackAll(ctx, []store.Message{m}); err != nil {
		return fmt.Errorf("local queue %s: ack %s: %w", q.name, m.ID, err)
	}
	return nil
}

// ackAll deletes received messages in one transaction (see Ack).
func (q *Queue) ackAll(ctx context.Context, msgs []store.Message) error {
	receipts, err := parseReceipts(msgs)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return q.db.update(func(tx *bbolt.Tx) error { return q.deleteAll(tx, receipts) })
}

// receipt is a parsed store.Message.Receipt.
type receipt struct {
	seq      uint64
	receives int
}

func parseReceipts(msgs []store.Message) ([]receipt, error) {
	out := make([]receipt, len(msgs))
	for i, m := range msgs {
		seq, receives, err := parseReceipt(m.Receipt)
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", m.ID, err)
		}
		out[i] = receipt{seq, receives}
	}
	return out, nil
}

// deleteAll removes, inside tx, each message still at the receive its
// receipt names.
func (q *Queue) deleteAll(tx *bbolt.Tx, receipts []receipt) error {
	for _, r := range receipts {
		if err := q.delete(tx, r.seq, r.receives); err != nil {
			return err
		}
	}
	return nil
}

// delete removes message seq inside tx if it is still at its receives-th
// receive.
func (q *Queue) delete(tx *bbolt.Tx, seq uint64, receives int) error {
	b := q.bucket(tx)
	v := b.Bucket([]byte(subMsgs)).Get(seqKey(seq))
	if v == nil {
		return nil
	}
	h, err := decodeHeader(v)
	if err != nil {
		return fmt.Errorf("decode message %d: %w", seq, err)
	}
	if h.Receives != receives {
		return nil
	}
	if err := b.Bucket([]byte(subReady)).Delete(readyKey(h.VisibleAt, seq)); err != nil {
		return err
	}
	return b.Bucket([]byte(subMsgs)).Delete(seqKey(seq))
}

// Extend hides a received message for d from now. It fails with ErrNotFound
// if the message is gone or has been received again since.
func (q *Queue) Extend(ctx context.Context, m store.Message, d time.Duration) error {
	seq, receives, err := parseReceipt(m.Receipt)
	if err != nil {
		return fmt.Errorf("local queue %s: extend %s: %w", q.name, m.ID, err)
	}
	if d < 0 {
		return fmt.Errorf("local queue %s: extend %s: negative duration %s", q.name, m.ID, d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err = q.db.update(func(tx *bbolt.Tx) error {
		b := q.bucket(tx)
		sm, ok, err := getMessage(b, seq)
		if err != nil {
			return err
		}
		if !ok || sm.Receives != receives {
			return store.ErrNotFound
		}
		return q.setVisible(b, seq, sm, time.Now().Add(d))
	})
	if err != nil {
		return fmt.Errorf("local queue %s: extend %s: %w", q.name, m.ID, err)
	}
	q.notify() // a shorter timeout may make it due before a waiter's timer
	return nil
}

// take receives up to maxMsgs due messages in one transaction, moving those past
// MaxReceives to the dead-letter queue. When it finds none it returns when the
// next hidden message becomes visible (zero if none is hidden).
func (q *Queue) take(maxMsgs int) (msgs []store.Message, next time.Time, err error) {
	// Look first, in a read transaction: a write commits (two fsyncs) even
	// when it finds nothing, and idle consumers look on every wake-up.
	if due, next, err := q.due(); err != nil || !due {
		return nil, next, err
	}
	var movedDead bool
	err = q.db.update(func(tx *bbolt.Tx) error {
		// Results are set afresh: a group commit may run this twice.
		msgs, next, movedDead = nil, time.Time{}, false
		now := time.Now()
		b := q.bucket(tx)
		type due struct {
			seq uint64
			sm  storedMessage
		}
		var receive, dead []due
		// Collect first: bolt cursors must not see the bucket change under them.
		c := b.Bucket([]byte(subReady)).Cursor()
		for k, _ := c.First(); k != nil && len(receive) < maxMsgs; k, _ = c.Next() {
			at, seq := splitReadyKey(k)
			if at > now.UnixNano() {
				next = time.Unix(0, at)
				break
			}
			sm, ok, err := getMessage(b, seq)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("ready entry %d has no message", seq)
			}
			if q.dead != nil && sm.Receives >= q.opts.MaxReceives {
				dead = append(dead, due{seq, sm})
			} else {
				receive = append(receive, due{seq, sm})
			}
		}
		for _, d := range dead {
			if err := b.Bucket([]byte(subReady)).Delete(readyKey(d.sm.VisibleAt, d.seq)); err != nil {
				return err
			}
			if err := b.Bucket([]byte(subMsgs)).Delete(seqKey(d.seq)); err != nil {
				return err
			}
			if err := q.dead.append(tx, d.sm.ID, d.sm.Body, now); err != nil {
				return err
			}
			movedDead = true
		}
		for _, d := range receive {
			d.sm.Receives++
			if err := q.setVisible(b, d.seq, d.sm, now.Add(q.opts.Visibility)); err != nil {
				return err
			}
			msgs = append(msgs, store.Message{
				ID:       d.sm.ID,
				Body:     d.sm.Body,
				Receives: d.sm.Receives,
				Receipt:  strconv.FormatUint(d.seq, 10) + ":" + strconv.Itoa(d.sm.Receives),
			})
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	if movedDead {
		q.dead.notify()
	}
	return msgs, next, nil
}

// due reports whether a message is visible now, and if not when the next
// hidden one becomes visible (zero if none is hidden).
func (q *Queue) due() (bool, time.Time, error) {
	var due bool
	var next time.Time
	err := q.db.bolt.View(func(tx *bbolt.Tx) error {
		k, _ := q.bucket(tx).Bucket([]byte(subReady)).Cursor().First()
		if k == nil {
			return nil
		}
		at, _ := splitReadyKey(k)
		if due = at <= time.Now().UnixNano(); !due {
			next = time.Unix(0, at)
		}
		return nil
	})
	return due, next, err
}

// append adds a visible message inside tx; the caller notifies after commit.
func (q *Queue) append(tx *bbolt.Tx, id string, body []byte, now time.Time) error {
	b := q.bucket(tx)
	seq, err := b.Bucket([]byte(subMsgs)).NextSequence()
	if err != nil {
		return err
	}
	sm := storedMessage{ID: id, Body: body, VisibleAt: now.UnixNano()}
	return q.putMessage(b, seq, sm)
}

// setVisible moves a message's ready entry to at.
func (q *Queue) setVisible(b *bbolt.Bucket, seq uint64, sm storedMessage, at time.Time) error {
	if err := b.Bucket([]byte(subReady)).Delete(readyKey(sm.VisibleAt, seq)); err != nil {
		return err
	}
	sm.VisibleAt = at.UnixNano()
	return q.putMessage(b, seq, sm)
}

func (q *Queue) putMessage(b *bbolt.Bucket, seq uint64, sm storedMessage) error {
	return q.putStored(b, seq, sm.VisibleAt, sm.encode())
}

// putStored puts an encoded message and its ready entry.
func (q *Queue) putStored(b *bbolt.Bucket, seq uint64, visibleAt int64, v []byte) error {
	if err := b.Bucket([]byte(subMsgs)).Put(seqKey(seq), v); err != nil {
		return err
	}
	return b.Bucket([]byte(subReady)).Put(readyKey(visibleAt, seq), nil)
}

// releaseLeases makes every hidden message visible at now.
func (q *Queue) releaseLeases(tx *bbolt.Tx, now time.Time) error {
	b := q.bucket(tx)
	var hidden []uint64
	c := b.Bucket([]byte(subReady)).Cursor()
	for k, _ := c.Seek(readyKey(now.UnixNano()+1, 0)); k != nil; k, _ = c.Next() {
		_, seq := splitReadyKey(k)
		hidden = append(hidden, seq)
	}
	for _, seq := range hidden {
		sm, ok, err := getMessage(b, seq)
		if err != nil {
			return err
		}
		if ok {
			if err := q.setVisible(b, seq, sm, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func (q *Queue) bucket(tx *bbolt.Tx) *bbolt.Bucket {
	return tx.Bucket([]byte(bucketQueues)).Bucket([]byte(q.name))
}

func (q *Queue) waiter() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

func (q *Queue) notify() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.wake)
	q.wake = make(chan struct{})
}

func getMessage(b *bbolt.Bucket, seq uint64) (storedMessage, bool, error) {
	v := b.Bucket([]byte(subMsgs)).Get(seqKey(seq))
	if v == nil {
		return storedMessage{}, false, nil
	}
	sm, err := decodeMessage(v)
	if err != nil {
		return storedMessage{}, false, fmt.Errorf("decode message %d: %w", seq, err)
	}
	return sm, true, nil
}

// A stored message is binary: a version byte (messageV1), the receives and
// the visibility time as varints, the id's length and the id, then the
// body — no encoding pass over the body, which a JSON form base64-encodes
// on every receive and ack. Messages stored as JSON by earlier versions
// ('{' first) are read too.
const messageV1 = 1

func (sm storedMessage) encode() []byte {
	return append(sm.appendHeader(make([]byte, 0, headerSize(sm)+len(sm.Body))), sm.Body...)
}

// headerSize bounds the length of sm's header.
func headerSize(sm storedMessage) int { return 1 + 3*binary.MaxVarintLen64 + len(sm.ID) }

// appendHeader appends all of sm's stored form but its body.
func (sm storedMessage) appendHeader(v []byte) []byte {
	v = append(v, messageV1)
	v = binary.AppendUvarint(v, uint64(sm.Receives))
	v = binary.AppendVarint(v, sm.VisibleAt)
	v = binary.AppendUvarint(v, uint64(len(sm.ID)))
	return append(v, sm.ID...)
}

// decodeHeader decodes a stored message but its body, which it neither
// reads nor copies.
func decodeHeader(v []byte) (storedMessage, error) {
	if len(v) > 0 && v[0] == '{' {
		return decodeMessage(v)
	}
	sm, _, err := decodeV1(v)
	return sm, err
}

// decodeMessage decodes a stored message; its body is copied (bbolt's
// values live only as long as their transaction).
func decodeMessage(v []byte) (storedMessage, error) {
	var sm storedMessage
	if len(v) > 0 && v[0] == '{' {
		err := json.Unmarshal(v, &sm)
		return sm, err
	}
	sm, body, err := decodeV1(v)
	if err != nil {
		return sm, err
	}
	sm.Body = append([]byte(nil), body...)
	return sm, nil
}

// decodeV1 decodes messageV1's header and returns the body in place.
func decodeV1(v []byte) (sm storedMessage, body []byte, err error) {
	if len(v) == 0 || v[0] != messageV1 {
		return sm, nil, errors.New("unknown message format")
	}
	rest := v[1:]
	receives, n := binary.Uvarint(rest)
	if n <= 0 {
		return sm, nil, errors.New("bad receives")
	}
	rest = rest[n:]
	visible, n := binary.Varint(rest)
	if n <= 0 {
		return sm, nil, errors.New("bad visibility time")
	}
	rest = rest[n:]
	idLen, n := binary.Uvarint(rest)
	if n <= 0 || idLen > uint64(len(rest)-n) {
		return sm, nil, errors.New("bad id")
	}
	rest = rest[n:]
	sm.Receives, sm.VisibleAt = int(receives), visible
	sm.ID = string(rest[:idLen])
	return sm, rest[idLen:], nil
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// readyKey orders by visibility time, then sequence. Times are Unix
// nanoseconds, positive for any date sluice runs at, so big-endian bytes sort
// like the numbers.
func readyKey(at int64, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(at)), seq)
}

func splitReadyKey(k []byte) (int64, uint64) {
	return int64(binary.BigEndian.Uint64(k[:8])), binary.BigEndian.Uint64(k[8:16])
}

// A receipt is "<sequence>:<receive count>": it names the message and the
// receive it came from, so a receipt from an earlier receive goes stale.
func parseReceipt(r string) (seq uint64, receives int, err error) {
	s, n, ok := strings.Cut(r, ":")
	if ok {
		seq, err = strconv.ParseUint(s, 10, 64)
		if err == nil {
			receives, err = strconv.Atoi(n)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("malformed receipt %q", r)
	}
	return seq, receives, nil
}
