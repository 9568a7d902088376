package main

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout: values below 2*half are counted exactly; above that,
// each power of two is split into half sub-buckets, so a bucket's width is
// at most 1/half of its value (0.8%), as in an HDR histogram.
const (
	histSubBits = 7
	histHalf    = 1 << histSubBits
	histBuckets = (64 - histSubBits) * histHalf
)

// Histogram records durations (in nanoseconds) in log-spaced buckets with a
// relative error below 1%. It is not safe for concurrent use: give each
// goroutine its own and Merge them.
type Histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64
	min, max int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{min: math.MaxInt64} }

func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	shift := bits.Len64(uint64(v)) - (histSubBits + 1)
	if shift < 0 {
		shift = 0
	}
	return shift*histHalf + int(uint64(v)>>uint(shift))
}

// bucketRange returns the smallest and largest value counted in bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 2*histHalf {
		return int64(i), int64(i)
	}
	shift := i/histHalf - 1
	mant := int64(i - shift*histHalf)
	return mant << shift, (mant+1)<<shift - 1
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// Merge adds every value of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// Count returns how many values were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest value recorded, exactly.
func (h *Histogram) Max() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.max)
}

// Mean returns the arithmetic mean, exactly.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value at quantile q in [0, 1]: the middle of the
// bucket holding the ceil(q*n)-th smallest value, clamped to the exact
// minimum and maximum.
func (h *Histogram) Quantile(q float64) time.Duration {
	switch {
	case h.n == 0:
		return 0
	case q <= 0:
		return time.Duration(h.min)
	case q >= 1:
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(1, min(rank, h.n))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			return time.Duration(max(h.min, min(mid, h.max)))
		}
	}
	return time.Duration(h.max)
}

// LatencySummary is the JSON and table form of a histogram.
type LatencySummary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summary returns the histogram's figures in milliseconds.
func (h *Histogram) Summary() LatencySummary {
	return LatencySummary{
		Count: h.n,
		Mean:  ms(h.Mean()),
		P50:   ms(h.Quantile(0.50)),
		P90:   ms(h.Quantile(0.90)),
		P99:   ms(h.Quantile(0.99)),
		Max:   ms(h.Max()),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
