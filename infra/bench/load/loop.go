package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is what one request produced.
type outcome struct {
	status    int
	firstByte time.Time // when the first body byte arrived; zero if none did
	bytes     int64
	err       error
}

// call performs one request and reads its whole answer.
type call func(ctx context.Context) outcome

// loopResult is what one load loop measured.
type loopResult struct {
	Latency *Histogram // successful requests: start (or scheduled start) to last byte
	TTFB    *Histogram // successful requests: start (or scheduled start) to first body byte
	Lag     *Histogram // open loop only: how late each request left against its schedule
	Sent    int64
	OK      int64
	Bytes   int64
	Errors  map[string]int64  // by HTTP status, or "timeout" / "transport"
	Samples map[string]string // the first message of each transport error kind
	Elapsed time.Duration
}

func newLoopResult() *loopResult {
	return &loopResult{Latency: NewHistogram(), TTFB: NewHistogram(), Lag: NewHistogram(), Errors: map[string]int64{}, Samples: map[string]string{}}
}

// Throughput is successful requests per second.
func (r *loopResult) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// ErrorCount is the number of failed requests.
func (r *loopResult) ErrorCount() int64 {
	var n int64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// record adds one finished request that started (or was due) at start.
func (r *loopResult) record(start time.Time, out outcome, end time.Time) {
	r.Sent++
	r.Bytes += out.bytes
	switch {
	case out.err != nil:
		key := "transport"
		if errors.Is(out.err, context.DeadlineExceeded) {
			key = "timeout"
		}
		r.Errors[key]++
		if _, ok := r.Samples[key]; !ok {
			r.Samples[key] = out.err.Error()
		}
	case out.status < 200 || out.status > 299:
		r.Errors[strconv.Itoa(out.status)]++
	default:
		r.OK++
		r.Latency.Record(end.Sub(start))
		if !out.firstByte.IsZero() {
			r.TTFB.Record(out.firstByte.Sub(start))
		}
	}
}

func (r *loopResult) merge(o *loopResult) {
	r.Latency.Merge(o.Latency)
	r.TTFB.Merge(o.TTFB)
	r.Lag.Merge(o.Lag)
	r.Sent += o.Sent
	r.OK += o.OK
	r.Bytes += o.Bytes
	for k, v := range o.Errors {
		r.Errors[k] += v
	}
	for k, v := range o.Samples {
		if _, ok := r.Samples[k]; !ok {
			r.Samples[k] = v
		}
	}
}

// runClosed keeps concurrency requests in flight until dur has passed or
// maxRequests were sent, whichever comes first; requests under way at the
// deadline finish and count. Latency runs from each request's send.
func runClosed(ctx context.Context, concurrency int, dur time.Duration, maxRequests int64, do call) *loopResult {
	deadline := time.Now().Add(dur)
	var budget atomic.Int64
	budget.Store(maxRequests)
	parts := make([]*loopResult, concurrency)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range parts {
		res := newLoopResult()
		parts[w] = res
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) && budget.Add(-1) >= 0 {
				t := time.Now()
				out := do(ctx)
				res.record(t, out, time.Now())
			}
		})
	}
	wg.Wait()
	total := newLoopResult()
	for _, p := range parts {
		total.merge(p)
	}
	total.Elapsed = time.Since(start)
	return total
}

// scheduleAt is when the i-th request of an open loop at rate per second
// starting at start is due.
func scheduleAt(start time.Time, rate float64, i int64) time.Time {
	return start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
}

// runOpen sends requests at a fixed rate for dur (at most maxRequests), each
// on its own goroutine, with at most maxInFlight outstanding. Latency runs
// from each request's scheduled time, not from when it was actually sent, so
// a server that stalls is charged for the requests that queued behind it
// (no coordinated omission).
func runOpen(ctx context.Context, rate float64, dur time.Duration, maxRequests int64, maxInFlight int, do call) *loopResult {
	n := min(int64(rate*dur.Seconds()), maxRequests)
	res := newLoopResult()
	var mu sync.Mutex
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
send:
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		at := scheduleAt(start, rate, i)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break send
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break send
		}
		lag := time.Since(at)
		wg.Go(func() {
			defer func() { <-sem }()
			out := do(ctx)
			end := time.Now()
			mu.Lock()
			defer mu.Unlock()
			res.Lag.Record(lag)
			res.record(at, out, end)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}
