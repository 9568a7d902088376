package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesCache keeps the series a measurement resolved, by the label values
// it resolved them for: resolving a child hashes and validates every label
// value, a lookup here hashes a small struct. Its keys are as bounded as the
// labels, so it is copied on write: a lookup reads an immutable map without
// a lock (a read lock's shared counter costs every call a contended atomic
// between cores).
type seriesCache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex // serialises the writers
}

func newSeriesCache[K comparable, V any]() *seriesCache[K, V] {
	c := &seriesCache[K, V]{}
	c.m.Store(&map[K]V{})
	return c
}

// get is k's series, made by resolve the first time k is seen.
func (c *seriesCache[K, V]) get(k K, resolve func() V) V {
	if v, ok := (*c.m.Load())[k]; ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.m.Load()
	if v, ok := old[k]; ok {
		return v
	}
	v := resolve()
	next := make(map[K]V, len(old)+1)
	for key, val := range old {
		next[key] = val
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

// all is every series resolved so far.
func (c *seriesCache[K, V]) all() map[K]V { return *c.m.Load() }

// hist is a histogram's figures, kept by its owner under the owner's lock:
// a call's several observations then cost one lock, where client_golang's
// histograms cost four atomic writes each, on cache lines both cores write.
// counts[i] counts the values ≤ bounds[i] and > bounds[i-1]; the last
// counts the rest (+Inf), as client_golang buckets them.
type hist struct {
	counts []uint64
	sum    float64
	n      uint64
}

func newHist(bounds []float64) hist { return hist{counts: make([]uint64, len(bounds)+1)} }

func (h *hist) observe(bounds []float64, v float64) {
	i := 0
	for i < len(bounds) && v > bounds[i] { // most values land in the first buckets
		i++
	}
	h.counts[i]++
	h.sum += v
	h.n++
}

// merge adds o's figures to h's (the same bounds).
func (h *hist) merge(o *hist) {
	if h.counts == nil {
		h.counts = make([]uint64, len(o.counts))
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.sum += o.sum
	h.n += o.n
}

func (h *hist) clone() hist {
	return hist{counts: append([]uint64(nil), h.counts...), sum: h.sum, n: h.n}
}

// metric is h as a constant histogram of desc (cumulative buckets, as the
// exposition wants them).
func (h *hist) metric(desc *prometheus.Desc, bounds []float64, lvs ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += h.counts[i]
		buckets[b] = cum
	}
	return constMetric(prometheus.NewConstHistogram(desc, h.n, h.sum, buckets, lvs...))
}

func counterMetric(desc *prometheus.Desc, v float64, lvs ...string) prometheus.Metric {
	return constMetric(prometheus.NewConstMetric(desc, prometheus.CounterValue, v, lvs...))
}

func constMetric(m prometheus.Metric, err error) prometheus.Metric {
	if err != nil {
		return prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(err), err)
	}
	return m
}

// callKey is a model call's label values, by their ids in their labelSets.
type callKey struct{ model, deployment, provider, team int32 }

// callStatusKey adds a call's status class (classID) and error code (its
// id in codes).
type callStatusKey struct {
	callKey
	status uint8
	code   int32
}

// packed is k as the one integer the call series are looked up by: a map
// keyed by a uint64 hashes it in a few instructions, where a struct key
// goes through the generic hasher. Each id fits its field: the model,
// deployment and team sets are bounded below 1<<16 (New, newTeamSet), the
// providers are a few vendors, the codes a fixed list (series_test.go).
func (k callStatusKey) packed() uint64 {
	return uint64(uint16(k.model)) | uint64(uint16(k.deployment))<<16 | uint64(uint16(k.team))<<32 |
		uint64(uint8(k.provider))<<48 | uint64(k.status&0x7)<<56 | uint64(uint8(k.code)&0x1f)<<59
}

// callSeries accumulates the model calls of one label set (status and code
// included): a call locks it once and adds all its figures. The series of
// the instruments without status and code sum those of every status.
type callSeries struct {
	key                           callStatusKey
	mu                            sync.Mutex
	calls                         uint64
	duration, ttft, tokIn, tokOut hist
	spend                         float64
	spent                         bool // a cost was added (the spend series exists)
}

func newCallSeries(key callStatusKey) *callSeries {
	return &callSeries{key: key, duration: newHist(durationBuckets), ttft: newHist(ttftBuckets),
		tokIn: newHist(tokenBuckets), tokOut: newHist(tokenBuckets)}
}

// callFigures are one call's measurements.
type callFigures struct {
	took, ttft float64 // seconds; ttft < 0: not a stream's
	tokens     bool    // in and out are measured
	in, out    float64
	cost       float64
}

func (s *callSeries) add(f *callFigures) {
	s.mu.Lock()
	s.calls++
	s.duration.observe(durationBuckets, f.took)
	if f.ttft >= 0 {
		s.ttft.observe(ttftBuckets, f.ttft)
	}
	if f.tokens {
		s.tokIn.observe(tokenBuckets, f.in)
		s.tokOut.observe(tokenBuckets, f.out)
	}
	if f.cost > 0 {
		s.spend += f.cost
		s.spent = true
	}
	s.mu.Unlock()
}

// callCollector exposes the calls' series: sluice_model_calls_total by
// status and code; the duration, time to first token, token and spend
// instruments by model, deployment, provider and team. A series appears once
// something was measured in it, as a client_golang child does.
type callCollector struct {
	m                                          *Metrics
	calls, duration, ttft, tokens, tokensTotal *prometheus.Desc
	spend                                      *prometheus.Desc
}

func (c *callCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.calls, c.duration, c.ttft, c.tokens, c.tokensTotal, c.spend} {
		ch <- d
	}
}

func (c *callCollector) Collect(ch chan<- prometheus.Metric) {
	type sums struct {
		duration, ttft, tokIn, tokOut hist
		spend                         float64
		spent                         bool
	}
	byCall := map[callKey]*sums{}
	series := c.m.callSeries.all()
	teams := c.m.teams.values() // after the series: it names every team they hold
	models, deployments, providers := c.m.models.values, c.m.deployments.values, c.m.providers.values
	for _, s := range series {
		k := s.key
		s.mu.Lock()
		calls := s.calls
		agg := byCall[k.callKey]
		if agg == nil {
			agg = &sums{duration: s.duration.clone(), ttft: s.ttft.clone(), tokIn: s.tokIn.clone(), tokOut: s.tokOut.clone(),
				spend: s.spend, spent: s.spent}
			byCall[k.callKey] = agg
		} else {
			agg.duration.merge(&s.duration)
			agg.ttft.merge(&s.ttft)
			agg.tokIn.merge(&s.tokIn)
			agg.tokOut.merge(&s.tokOut)
			agg.spend += s.spend
			agg.spent = agg.spent || s.spent
		}
		s.mu.Unlock()
		ch <- counterMetric(c.calls, float64(calls), models[k.model], deployments[k.deployment], providers[k.provider], teams[k.team],
			classes[k.status], codes.values[k.code])
	}
	for id, s := range byCall {
		k := [4]string{models[id.model], deployments[id.deployment], providers[id.provider], teams[id.team]}
		ch <- s.duration.metric(c.duration, durationBuckets, k[0], k[1], k[2], k[3])
		if s.ttft.n > 0 {
			ch <- s.ttft.metric(c.ttft, ttftBuckets, k[0], k[1], k[2], k[3])
		}
		if s.tokIn.n > 0 { // input and output are observed together
			ch <- s.tokIn.metric(c.tokens, tokenBuckets, k[0], k[1], k[2], k[3], "input")
			ch <- s.tokOut.metric(c.tokens, tokenBuckets, k[0], k[1], k[2], k[3], "output")
			ch <- counterMetric(c.tokensTotal, s.tokIn.sum, k[0], k[1], k[2], k[3], "input")
			ch <- counterMetric(c.tokensTotal, s.tokOut.sum, k[0], k[1], k[2], k[3], "output")
		}
		if s.spent {
			ch <- counterMetric(c.spend, s.spend, k[0], k[1], k[2], k[3])
		}
	}
}

// routeSeries accumulates the requests of one route: by status class, the
// request count is its duration histogram's count; sluice_overhead_seconds
// (by route only) sums the overheads of every class. The route's string is
// the one key a request is looked up by (a string map's fast path), its
// class an index.
type routeSeries struct {
	mu       sync.Mutex
	duration [len(classes)]hist // by classID; a class's counts exist once it was seen
	overhead hist
}

func newRouteSeries() *routeSeries { return &routeSeries{overhead: newHist(overheadBuckets)} }

// add records a request of status class class that took took seconds,
// overhead of them sluice's own (< 0: not measured).
func (s *routeSeries) add(class uint8, took, overhead float64) {
	s.mu.Lock()
	d := &s.duration[class]
	if d.counts == nil {
		d.counts = make([]uint64, len(durationBuckets)+1)
	}
	d.observe(durationBuckets, took)
	if overhead >= 0 {
		s.overhead.observe(overheadBuckets, overhead)
	}
	s.mu.Unlock()
}

// routeCollector exposes the requests' series: sluice_requests_total and
// sluice_request_duration_seconds by route and class, sluice_overhead_seconds
// by route.
type routeCollector struct {
	series                       *seriesCache[string, *routeSeries]
	requests, duration, overhead *prometheus.Desc
}

func (c *routeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.duration
	ch <- c.overhead
}

func (c *routeCollector) Collect(ch chan<- prometheus.Metric) {
	for route, s := range c.series.all() {
		var d [len(classes)]hist
		s.mu.Lock()
		for class := range s.duration {
			if s.duration[class].n > 0 {
				d[class] = s.duration[class].clone()
			}
		}
		o := s.overhead.clone()
		s.mu.Unlock()
		for class := range d {
			if d[class].n == 0 {
				continue
			}
			ch <- counterMetric(c.requests, float64(d[class].n), route, classes[class])
			ch <- d[class].metric(c.duration, durationBuckets, route, classes[class])
		}
		if o.n > 0 {
			ch <- o.metric(c.overhead, overheadBuckets, route)
		}
	}
}
