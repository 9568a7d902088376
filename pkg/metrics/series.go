package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesCache keeps the label children a measurement resolved, by the
// label values it resolved them for: resolving a child hashes and
// validates every label value (most of a measurement's cost), a lookup
// here hashes a small struct. Its keys are as bounded as the labels, so it
// is copied on write: a lookup reads an immutable map without a lock (a
// read lock's shared counter costs every call a contended atomic between
// cores).
type seriesCache[K comparable, V any] struct {
	m       atomic.Pointer[map[K]V]
	mu      sync.Mutex // serialises the writers
	resolve func(K) V
}

func newSeriesCache[K comparable, V any](resolve func(K) V) *seriesCache[K, V] {
	c := &seriesCache[K, V]{resolve: resolve}
	c.m.Store(&map[K]V{})
	return c
}

func (c *seriesCache[K, V]) get(k K) V {
	if v, ok := (*c.m.Load())[k]; ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.m.Load()
	if v, ok := old[k]; ok {
		return v
	}
	v := c.resolve(k)
	next := make(map[K]V, len(old)+1)
	for key, val := range old {
		next[key] = val
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

// lazyObserver is a histogram child resolved on its first observation, so
// a series appears in the exposition only once something was observed in
// it (as with WithLabelValues at each call).
type lazyObserver struct {
	p atomic.Pointer[prometheus.Observer]
}

func (l *lazyObserver) observe(vec *prometheus.HistogramVec, v float64, lvs ...string) {
	if p := l.p.Load(); p != nil {
		(*p).Observe(v)
		return
	}
	o := vec.WithLabelValues(lvs...)
	l.p.Store(&o)
	o.Observe(v)
}

// lazyCounter is lazyObserver for a counter child.
type lazyCounter struct {
	p atomic.Pointer[prometheus.Counter]
}

func (l *lazyCounter) add(vec *prometheus.CounterVec, v float64, lvs ...string) {
	if p := l.p.Load(); p != nil {
		(*p).Add(v)
		return
	}
	c := vec.WithLabelValues(lvs...)
	l.p.Store(&c)
	c.Add(v)
}

// callKey is a model call's label values.
type callKey struct{ model, deployment, provider, team string }

// callSeries are a call's children of every per-call instrument.
type callSeries struct {
	duration, ttft, tokensIn, tokensOut lazyObserver
	totalIn, totalOut, spend            lazyCounter
}

// callStatusKey adds a call's status class and error code.
type callStatusKey struct {
	callKey
	status, code string
}

// routeKey is a request's route and status class.
type routeKey struct{ route, class string }

// routeSeries are a request's children of the per-request instruments.
type routeSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}
