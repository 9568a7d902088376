package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// serveRecord is one request as the bench upstream served it
// (GET /_bench/served): from its handler taking the request to the last
// byte written, the provider's latency and chunk pauses included.
type serveRecord struct {
	Route          string `json:"route"`
	ReceivedUnixNS int64  `json:"received_unix_ns"`
	DoneUnixNS     int64  `json:"done_unix_ns"`
	ServedNS       int64  `json:"served_ns"`
}

// upstream is the bench upstream sizing started, with -record-served.
type upstream struct {
	url    string
	client *http.Client
}

// takeServed reads and clears the upstream's serve records: those of the
// requests that finished since the last call.
func (u *upstream) takeServed(ctx context.Context) ([]serveRecord, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"/_bench/served", nil)
	if err != nil {
		return nil, err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench upstream: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("bench upstream: read /_bench/served: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench upstream: /_bench/served answered %s: %s (an upstream built before -record-served? make bench-tools)", resp.Status, body)
	}
	var a struct {
		Served  []serveRecord `json:"served"`
		Dropped int           `json:"dropped"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("bench upstream: /_bench/served: %w", err)
	}
	if a.Dropped > 0 {
		return nil, fmt.Errorf("bench upstream: %d serve records dropped", a.Dropped)
	}
	return a.Served, nil
}

// timing is one invocation as sizing counts it.
type timing struct {
	// total is what the invoke waited, from sending the event to the
	// emulator's whole answer.
	total time.Duration
	// added is sluice's share of total: total minus the upstream's serve
	// time (all of total for a function that calls no upstream).
	added time.Duration
	// toUpstream is from sending the event to the upstream taking the
	// request: what sluice adds to the time to first byte before the
	// provider starts. Zero when the function calls no upstream.
	toUpstream time.Duration
}

// negativeSlack is how far below zero an added latency may read before the
// record cannot be this invocation's: the upstream stamps a request done
// once its last write returned, which the function may see a few µs sooner.
const negativeSlack = time.Millisecond

// attribute matches an invocation to the serve records the upstream kept
// since the previous one and returns its timing. Invocations run one after
// another, so the records must be exactly the call route names (one, or
// none for route ""), and the one must have been taken inside the
// invocation: a retry, a stray request or a record of another invocation is
// an error, never a figure.
func attribute(sent, done time.Time, records []serveRecord, route string) (timing, error) {
	t := timing{total: done.Sub(sent)}
	if route == "" {
		if len(records) != 0 {
			return t, fmt.Errorf("the invocation made %d upstream calls (%s…), want none", len(records), records[0].Route)
		}
		t.added = t.total
		return t, nil
	}
	if len(records) != 1 {
		return t, fmt.Errorf("the invocation made %d upstream calls, want one %s call", len(records), route)
	}
	r := records[0]
	if r.Route != route {
		return t, fmt.Errorf("the invocation called the upstream's %s, want %s", r.Route, route)
	}
	if r.ReceivedUnixNS < sent.UnixNano() || r.ReceivedUnixNS > done.UnixNano() {
		return t, fmt.Errorf("the upstream took its %s request at %d, outside the invocation (%d..%d)", route, r.ReceivedUnixNS, sent.UnixNano(), done.UnixNano())
	}
	t.added = t.total - time.Duration(r.ServedNS)
	if t.added < -negativeSlack {
		return t, fmt.Errorf("the upstream served %v of an invocation of %v", time.Duration(r.ServedNS), t.total)
	}
	t.toUpstream = time.Duration(r.ReceivedUnixNS - sent.UnixNano())
	return t, nil
}

// percentiles returns the p50 and p99 of ds in milliseconds (ds is sorted).
func percentiles(ds []time.Duration) (p50, p99 float64) {
	slices.Sort(ds)
	return ms(ds[len(ds)/2]), ms(ds[p99Index(len(ds))])
}

// p99Index is the index of the p99 of n sorted figures: the ⌈0.99·n⌉-th.
func p99Index(n int) int { return (n*99+99)/100 - 1 }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
