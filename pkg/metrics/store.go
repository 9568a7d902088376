package metrics

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// The stores of a backend, as the store label names them.
const (
	storeRecords     = "records"
	storeBlobs       = "blobs"
	storeWork        = "work_queue"
	storeDeliveries  = "delivery_queue"
	storeDeadLetters = "dead_letter_queue"
	storeBus         = "bus"
	storeLimiter     = "limiter"
	storeSealer      = "sealer"
)

// storeNames are the stores in the order of their EMF metrics; emfStoreMetric
// names each one's duration metric.
var (
	storeNames     = [...]string{storeRecords, storeBlobs, storeWork, storeDeliveries, storeDeadLetters, storeBus, storeLimiter, storeSealer}
	emfStoreMetric = [len(storeNames)]string{"StoreRecordsDuration", "StoreBlobsDuration", "StoreWorkQueueDuration", "StoreDeliveryQueueDuration",
		"StoreDeadLetterQueueDuration", "StoreBusDuration", "StoreLimiterDuration", "StoreSealerDuration"}
)

// Store error codes (the code label of sluice_store_errors_total). not_found
// and condition_failed are answers a caller expects and acts on (a cache
// miss, a lost race); canceled is the caller's context ending; unavailable
// (the service did not answer, or throttled past the SDK's retries) and
// error (anything else) are faults, which the EMF StoreErrors metric and the
// alarms count.
const (
	storeNotFound        = "not_found"
	storeConditionFailed = "condition_failed"
	storeCanceled        = "canceled"
	storeUnavailable     = "unavailable"
	storeError           = "error"
)

var storeCodes = [...]string{storeNotFound, storeConditionFailed, storeCanceled, storeUnavailable, storeError}

// storeCode classifies a store error: its index in storeCodes and whether
// it is a fault.
func storeCode(err error) (int, bool) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, false
	case errors.Is(err, store.ErrConditionFailed):
		return 1, false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 2, false
	case errors.Is(err, store.ErrUnavailable):
		return 3, true
	}
	return 4, true
}

// storeBuckets: an embedded read takes microseconds, a DynamoDB call
// milliseconds, a queue's long poll up to 20 s.
var storeBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20}

// storeOp measures one operation of one store: its duration histogram is
// resolved once, when the backend is instrumented, so a call costs two
// clock reads and an observation — no label lookup, no allocation.
type storeOp struct {
	m         *Metrics
	backend   string
	store, op string
	slot      int // the store's index in storeNames (its EMF metric)
	dur       prometheus.Observer
	errs      [len(storeCodes)]atomic.Pointer[prometheus.Counter]
	agg       *storeAggregate // nil without EMF
}

func (m *Metrics) storeOp(backend string, slot int, op string) *storeOp {
	name := storeNames[slot]
	return &storeOp{m: m, backend: backend, store: name, op: op, slot: slot,
		dur: m.storeDuration.WithLabelValues(backend, name, op), agg: m.storeAgg}
}

// start reads the clock for an operation starting: monotonic time since
// the instruments were made — one clock read, where time.Now reads the
// wall clock too (on a VM without a fast clock source each read shows).
func (o *storeOp) start() time.Duration { return time.Since(o.m.epoch) }

// done records an operation that started at start and ended with err.
func (o *storeOp) done(start time.Duration, err error) {
	d := time.Since(o.m.epoch) - start
	o.dur.Observe(d.Seconds())
	fault := false
	if err != nil {
		var c int
		c, fault = storeCode(err)
		o.errCounter(c).Inc()
	}
	if o.agg != nil {
		o.agg.add(o.slot, d, fault)
	}
}

// errCounter is the operation's error counter for code c, resolved on its
// first error (a series per code only once that code happened).
func (o *storeOp) errCounter(c int) prometheus.Counter {
	if p := o.errs[c].Load(); p != nil {
		return *p
	}
	ctr := o.m.storeErrors.WithLabelValues(o.backend, o.store, o.op, storeCodes[c])
	o.errs[c].Store(&ctr)
	return ctr
}

// Instrument returns b with every store operation measured: its duration by
// backend (local, aws), store and operation, and its errors by code. It is
// the one seam where store calls are measured; b is returned as it is when
// metrics are off. Optional interfaces of the adapters that callers test
// for (store.Presigner, an S3 URI, logevent.HandoffBus) stay visible.
func (m *Metrics) Instrument(b *store.Backend, backend string) *store.Backend {
	if m == nil || b == nil {
		return b
	}
	out := *b
	if b.Records != nil {
		out.Records = &records{next: b.Records,
			get: m.storeOp(backend, 0, "get"), put: m.storeOp(backend, 0, "put"), update: m.storeOp(backend, 0, "update"),
			add: m.storeOp(backend, 0, "add"), del: m.storeOp(backend, 0, "delete"), query: m.storeOp(backend, 0, "query"),
			transact: m.storeOp(backend, 0, "transact")}
	}
	if b.Blobs != nil {
		bl := &blobs{next: b.Blobs,
			put: m.storeOp(backend, 1, "put"), get: m.storeOp(backend, 1, "get"), size: m.storeOp(backend, 1, "size"),
			del: m.storeOp(backend, 1, "delete")}
		if p, ok := b.Blobs.(store.Presigner); ok {
			out.Blobs = &presigningBlobs{blobs: bl, presigner: p}
		} else {
			out.Blobs = bl
		}
	}
	out.Work = m.queue(b.Work, backend, 2)
	out.Deliveries = m.queue(b.Deliveries, backend, 3)
	out.DeliveryDeadLetters = m.queue(b.DeliveryDeadLetters, backend, 4)
	if b.Bus != nil {
		bs := &bus{next: b.Bus, publish: m.storeOp(backend, 5, "publish")}
		if h, ok := b.Bus.(localBus); ok {
			out.Bus = &handoffBus{bus: bs, handoff: h}
		} else {
			out.Bus = bs
		}
	}
	if b.Limiter != nil {
		out.Limiter = &limiter{next: b.Limiter, take: m.storeOp(backend, 6, "take")}
	}
	if b.Sealer != nil {
		out.Sealer = &sealer{next: b.Sealer, seal: m.storeOp(backend, 7, "seal"), open: m.storeOp(backend, 7, "open")}
	}
	return &out
}

func (m *Metrics) queue(q store.Queue, backend string, slot int) store.Queue {
	if q == nil {
		return nil
	}
	return &queue{next: q, send: m.storeOp(backend, slot, "send"), receive: m.storeOp(backend, slot, "receive"),
		ack: m.storeOp(backend, slot, "ack"), extend: m.storeOp(backend, slot, "extend")}
}

type records struct {
	next                                        store.Records
	get, put, update, add, del, query, transact *storeOp
}

func (r *records) Get(ctx context.Context, key store.Key) (store.Record, error) {
	t := r.get.start()
	rec, err := r.next.Get(ctx, key)
	r.get.done(t, err)
	return rec, err
}

func (r *records) Put(ctx context.Context, rec store.Record, cond store.Cond) error {
	t := r.put.start()
	err := r.next.Put(ctx, rec, cond)
	r.put.done(t, err)
	return err
}

func (r *records) Update(ctx context.Context, rec store.Record, cond store.Cond) error {
	t := r.update.start()
	err := r.next.Update(ctx, rec, cond)
	r.update.done(t, err)
	return err
}

func (r *records) Add(ctx context.Context, key store.Key, deltas map[string]int64, cond store.Cond) (map[string]int64, error) {
	t := r.add.start()
	out, err := r.next.Add(ctx, key, deltas, cond)
	r.add.done(t, err)
	return out, err
}

func (r *records) Delete(ctx context.Context, key store.Key, cond store.Cond) error {
	t := r.del.start()
	err := r.next.Delete(ctx, key, cond)
	r.del.done(t, err)
	return err
}

func (r *records) Query(ctx context.Context, q store.Query) (store.Page, error) {
	t := r.query.start()
	p, err := r.next.Query(ctx, q)
	r.query.done(t, err)
	return p, err
}

func (r *records) Transact(ctx context.Context, writes []store.Write) error {
	t := r.transact.start()
	err := r.next.Transact(ctx, writes)
	r.transact.done(t, err)
	return err
}

// blobs measures a Put to the end of its upload (the reader's time
// included) and a Get until the object is open, not while it is read.
type blobs struct {
	next                store.Blobs
	put, get, size, del *storeOp
}

func (b *blobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	t := b.put.start()
	n, err := b.next.Put(ctx, key, r)
	b.put.done(t, err)
	return n, err
}

func (b *blobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	t := b.get.start()
	rc, err := b.next.Get(ctx, key, offset, length)
	b.get.done(t, err)
	return rc, err
}

func (b *blobs) Size(ctx context.Context, key string) (int64, error) {
	t := b.size.start()
	n, err := b.next.Size(ctx, key)
	b.size.done(t, err)
	return n, err
}

func (b *blobs) Delete(ctx context.Context, key string) error {
	t := b.del.start()
	err := b.next.Delete(ctx, key)
	b.del.done(t, err)
	return err
}

// S3URI is the object's s3:// URI when the blob store is an S3 bucket (a
// provider's batch job reads and writes there).
func (b *blobs) S3URI(key string) (string, bool) {
	if u, ok := b.next.(interface{ S3URI(string) (string, bool) }); ok {
		return u.S3URI(key)
	}
	return "", false
}

// presigningBlobs is an instrumented blob store whose adapter presigns.
type presigningBlobs struct {
	*blobs
	presigner store.Presigner
}

func (b *presigningBlobs) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	return b.presigner.PresignGet(ctx, key, ttl)
}

// queue measures Receive with its long poll: a receive that waited for
// messages takes as long as it waited.
type queue struct {
	next                       store.Queue
	send, receive, ack, extend *storeOp
}

func (q *queue) Send(ctx context.Context, bodies ...[]byte) error {
	t := q.send.start()
	err := q.next.Send(ctx, bodies...)
	q.send.done(t, err)
	return err
}

func (q *queue) Receive(ctx context.Context, max int, wait time.Duration) ([]store.Message, error) {
	t := q.receive.start()
	msgs, err := q.next.Receive(ctx, max, wait)
	q.receive.done(t, err)
	return msgs, err
}

func (q *queue) Ack(ctx context.Context, msg store.Message) error {
	t := q.ack.start()
	err := q.next.Ack(ctx, msg)
	q.ack.done(t, err)
	return err
}

func (q *queue) Extend(ctx context.Context, msg store.Message, d time.Duration) error {
	t := q.extend.start()
	err := q.next.Extend(ctx, msg, d)
	q.extend.done(t, err)
	return err
}

type bus struct {
	next    store.Bus
	publish *storeOp
}

func (b *bus) Publish(ctx context.Context, events ...store.Event) error {
	t := b.publish.start()
	err := b.next.Publish(ctx, events...)
	b.publish.done(t, err)
	return err
}

// handoffBus is an instrumented bus whose subscriber runs in this process
// (the local backend): a handoff is a publish too.
type handoffBus struct {
	*bus
	handoff localBus
}

// localBus is a bus whose subscriber runs in this process (the local
// backend's), which pkg/handoff hands log events to in memory.
type localBus interface {
	PublishHandoff(ctx context.Context, done []store.Message, ids []string, events ...store.Event) ([]store.Message, error)
	AckHandoff(ctx context.Context, done []store.Message) error
}

func (b *handoffBus) PublishHandoff(ctx context.Context, done []store.Message, ids []string, events ...store.Event) ([]store.Message, error) {
	t := b.publish.start()
	msgs, err := b.handoff.PublishHandoff(ctx, done, ids, events...)
	b.publish.done(t, err)
	return msgs, err
}

func (b *handoffBus) AckHandoff(ctx context.Context, done []store.Message) error {
	return b.handoff.AckHandoff(ctx, done)
}

type limiter struct {
	next store.Limiter
	take *storeOp
}

func (l *limiter) Take(ctx context.Context, scope string, window time.Duration, takes ...store.Take) (store.Decision, error) {
	t := l.take.start()
	d, err := l.next.Take(ctx, scope, window, takes...)
	l.take.done(t, err)
	return d, err
}

type sealer struct {
	next       store.Sealer
	seal, open *storeOp
}

func (s *sealer) Seal(ctx context.Context, plaintext []byte, encCtx map[string]string) ([]byte, error) {
	t := s.seal.start()
	out, err := s.next.Seal(ctx, plaintext, encCtx)
	s.seal.done(t, err)
	return out, err
}

func (s *sealer) Open(ctx context.Context, sealed []byte, encCtx map[string]string) ([]byte, error) {
	t := s.open.start()
	out, err := s.next.Open(ctx, sealed, encCtx)
	s.open.done(t, err)
	return out, err
}

// storeAggregate gathers a Lambda function's store operations for one EMF
// line per invocation (Flush), not one a call: every duration is kept (up
// to emfMaxValues a store, EMF's limit for a metric's values, then the line
// goes out early), so CloudWatch's percentiles are over every call.
type storeAggregate struct {
	w      *emfWriter
	mu     sync.Mutex
	values [len(storeNames)][]float64
	faults int
	any    bool
}

// emfMaxValues is the most values one EMF metric may carry.
const emfMaxValues = 100

func (a *storeAggregate) add(slot int, d time.Duration, fault bool) {
	a.mu.Lock()
	a.values[slot] = append(a.values[slot], ms(d))
	if fault {
		a.faults++
	}
	a.any = true
	full := len(a.values[slot]) >= emfMaxValues
	a.mu.Unlock()
	if full {
		a.flush()
	}
}

// take empties the aggregate, returning what it held.
func (a *storeAggregate) take() (values [len(storeNames)][]float64, faults int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.any {
		return values, 0, false
	}
	values, faults = a.values, a.faults
	a.values, a.faults, a.any = [len(storeNames)][]float64{}, 0, false
	return values, faults, true
}

// flush writes what the aggregate holds as one EMF line: each store's
// durations, and the faults among them (StoreErrors, 0 when none, so an
// alarm sees the calls that went well).
func (a *storeAggregate) flush() {
	values, faults, ok := a.take()
	if !ok {
		return
	}
	l := a.w.line([][]string{{}})
	for i, v := range values {
		if len(v) > 0 {
			l.values(emfStoreMetric[i], unitMilliseconds, v)
		}
	}
	l.metric("StoreErrors", unitCount, float64(faults))
	l.write()
}

// Flush writes the measurements a Lambda function gathers over an
// invocation (its store operations) as EMF lines: the function calls it
// when each invocation ends. Without EMF it does nothing.
func (m *Metrics) Flush() {
	if m == nil || m.storeAgg == nil {
		return
	}
	m.storeAgg.flush()
}

// FlushFaults is Flush for a scheduled job's invocation: its line goes
// out only when a store call failed, and its durations are dropped
// otherwise. A job that runs every minute on an idle stack would keep the
// store metrics published — CloudWatch bills a custom metric for every
// hour it receives data — to report sweeps no one waits on.
func (m *Metrics) FlushFaults() {
	if m == nil || m.storeAgg == nil {
		return
	}
	m.storeAgg.mu.Lock()
	faults := m.storeAgg.faults
	m.storeAgg.mu.Unlock()
	if faults > 0 {
		m.storeAgg.flush()
		return
	}
	m.storeAgg.take()
}
