package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsAreContiguous(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < histBuckets; i++ {
		lo, hi := bucketRange(i)
		if hi < lo {
			break // the last buckets reach past MaxInt64
		}
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d,%d]: bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo > 0 && float64(hi-lo)/float64(lo) > 1.0/histHalf {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its value", i, lo, hi, histHalf)
		}
		prevHi = hi
	}
}

func TestQuantilesWithinOnePercent(t *testing.T) {
	h := NewHistogram()
	// 1..100000 µs uniformly: quantile q is q*100 ms.
	for i := 1; i <= 100000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := q * 100000 * float64(time.Microsecond)
		got := float64(h.Quantile(q))
		if math.Abs(got-want)/want > 0.01 {
			t.Errorf("q%.3f = %v, want %v ±1%%", q, time.Duration(got), time.Duration(want))
		}
	}
	if h.Max() != 100*time.Millisecond || h.Count() != 100000 {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
	if got := h.Quantile(0); got != time.Microsecond {
		t.Errorf("q0 = %v, want the minimum 1µs", got)
	}
}

func TestQuantilesAgainstSortedSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := NewHistogram()
	var vals []time.Duration
	for range 20000 {
		// Log-normal around 2 ms with a long tail, like real latencies.
		d := time.Duration(math.Exp(rng.NormFloat64()*0.8) * float64(2*time.Millisecond))
		vals = append(vals, d)
		h.Record(d)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if diff := math.Abs(float64(got-want)) / float64(want); diff > 0.01 {
			t.Errorf("q%.2f = %v, exact %v (%.2f%% off)", q, got, want, 100*diff)
		}
	}
}

func TestMerge(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	b.Record(-time.Second) // clamps to zero
	a.Merge(b)
	a.Merge(NewHistogram())
	if a.Count() != 3 || a.Max() != 3*time.Millisecond || a.Quantile(0) != 0 {
		t.Fatalf("merged: count %d max %v min %v", a.Count(), a.Max(), a.Quantile(0))
	}
	if got := NewHistogram().Quantile(0.5); got != 0 {
		t.Errorf("empty histogram quantile = %v", got)
	}
}
